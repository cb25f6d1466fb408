"""Whether a session's sandbox identity can use a workspace, asked before the session is.

A root daemon runs a session's commands and file tools as an unprivileged identity (the
workspace's owner, or `sandbox_uid` for a workspace root owns). A workspace that
identity cannot read, write and enter would take every call of the session to
"Permission denied" with no word of why; so CreateSession refuses it with one line
saying which identity needs what, and how to give it.

The kernel answers, as that identity: faccessat2(AT_EACCESS) with the thread's fsuid and
fsgid switched (identity.py), so ACLs, the read-only flag of the mount and every
capability the thread drops count, as they count for the session's own calls. Each
directory on the way is asked on its own (an O_PATH descriptor the daemon opened, with
AT_EMPTY_PATH), so every parent lacking search is named, not only the first; and the
whole path is then asked once more by name, as the identity resolves it.
"""

from __future__ import annotations

import errno
import grp
import logging
import os
import pwd
import stat
from dataclasses import dataclass

from agentd.foundation.errors import InvalidRequest
from agentd.fs.identity import FsIdentity, IdentityError, acting_as
from agentd_sandbox import linux

log = logging.getLogger(__name__)

_NEEDS = {os.R_OK: "read", os.W_OK: "write", os.X_OK: "search"}


@dataclass(frozen=True, slots=True)
class Refusal:
    """What the identity lacks on one workspace root."""

    root: str
    blocked: list[str]  # parents it cannot search, outermost first
    missing: list[str]  # of read, write, search on the root itself
    read_only_mount: bool
    other: str  # an errno the parts do not explain ("" when they do)


def _faccessat2(fd: int, path: str, mode: int, flags: int) -> int:
    """0, or the errno faccessat2 gives for `mode` on `path` beneath `fd`."""
    try:
        linux.faccessat2(fd, path, mode, flags)
    except OSError as exc:
        return exc.errno or errno.EIO
    return 0


def _can(fd: int, mode: int) -> int:
    return _faccessat2(fd, "", mode, linux.AT_EMPTY_PATH | linux.AT_EACCESS)


def examine(root: str, identity: FsIdentity | None) -> Refusal | None:
    """What `identity` (None: the daemon itself) lacks to use the real path `root`."""
    parts = [p for p in root.split("/") if p]
    dirs = ["/" + "/".join(parts[:i]) for i in range(len(parts) + 1)]
    fds: list[int] = []
    try:
        for d in dirs:  # opened as the daemon: the identity may not reach them
            fds.append(os.open(d, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC))
        with acting_as(identity):
            if _can(fds[-1], os.F_OK) == errno.ENOSYS:
                return _examine_by_name(root, dirs)
            blocked = [d for d, fd in zip(dirs[:-1], fds[:-1], strict=True) if _can(fd, os.X_OK)]
            results = {mode: _can(fds[-1], mode) for mode in _NEEDS}
            whole = _faccessat2(linux.AT_FDCWD, root, os.R_OK | os.W_OK | os.X_OK, linux.AT_EACCESS)
    finally:
        for fd in fds:
            os.close(fd)
    missing = [name for mode, name in _NEEDS.items() if results[mode] == errno.EACCES]
    read_only = results[os.W_OK] == errno.EROFS
    if not blocked and not missing and not read_only:
        if whole == 0:
            return None
        return Refusal(root, [], [], False, os.strerror(whole))
    return Refusal(root, blocked, missing, read_only, "")


def _examine_by_name(root: str, dirs: list[str]) -> Refusal | None:
    """Without faccessat2 (Linux before 5.8): the first parent that stops the identity."""
    for d in dirs[:-1]:
        if not os.access(d, os.X_OK, effective_ids=True):
            return Refusal(root, [d], [], False, "")
    missing = [n for m, n in _NEEDS.items() if not os.access(root, m, effective_ids=True)]
    return Refusal(root, [], missing, False, "") if missing else None


def _who(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _shown(path: str) -> str:
    """`/root (drwx------ root:root)`: enough for a person to see why."""
    try:
        st = os.stat(path)
    except OSError:
        return path
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    return f"{path} ({stat.filemode(st.st_mode)} {owner}:{group})"


def refusal_message(
    refusal: Refusal, identity: tuple[int, int], chosen_by: str, root_daemon: bool
) -> str:
    """One line: which identity needs what on which path, and the commands that give it."""
    uid, gid = identity
    who = _who(uid)
    if root_daemon:
        subject = (
            f"{who}, the identity this root daemon runs the session's commands and file "
            f"tools as ({chosen_by})"
        )
    else:
        subject = f"{who}, the user this daemon runs as"
    needs: list[str] = []
    if refusal.blocked:
        needs.append("search (x) on " + ", ".join(_shown(d) for d in refusal.blocked))
    if refusal.missing:
        needs.append(" and ".join(refusal.missing) + " on " + _shown(refusal.root))
    if refusal.read_only_mount:
        needs.append(f"write on {refusal.root}, which is on a read-only mount")
    if refusal.other:
        needs.append(f"access to {refusal.root} ({refusal.other})")
    line = f"workspace {refusal.root} cannot be used by {subject}: it needs {'; '.join(needs)}"
    return line + ". " + _fix(refusal, uid, gid, root_daemon, chosen_by)


def _fix(refusal: Refusal, uid: int, gid: int, root_daemon: bool, chosen_by: str) -> str:
    if refusal.read_only_mount:
        return "Remount it read-write, or choose a workspace on a writable file system"
    if not root_daemon:
        owner = os.stat(refusal.root).st_uid if not refusal.blocked else -1
        if owner == uid and refusal.missing:
            return f"Fix: chmod u+rwx {refusal.root}, or choose a workspace {_who(uid)} can use"
        return f"Choose a workspace {_who(uid)} can read, write and enter"
    steps: list[str] = []
    if refusal.blocked:
        steps.append("chmod o+x " + " ".join(refusal.blocked))
    if refusal.missing:
        owner = os.stat(refusal.root).st_uid
        steps.append(
            f"chmod u+rwx {refusal.root}"
            if owner == uid
            else f"chown -R {uid}:{gid} {refusal.root}"
        )
    fix = "Fix: " + " && ".join(steps) if steps else "Fix the access above"
    if refusal.blocked:
        fix += f", or use a workspace outside {refusal.blocked[0]}"
    if chosen_by.startswith("sandbox_uid"):
        fix += ", or set sandbox_uid and sandbox_gid in the daemon's config to a user who can"
    return fix


def check(
    roots: list[str], identity: tuple[int, int] | None, chosen_by: str, *, root_daemon: bool
) -> None:
    """InvalidRequest (one line) unless `identity` can read, write and enter every root.
    `identity` None: the daemon's own user, which the check then is about."""
    ident = FsIdentity(*identity) if identity is not None else None
    for root in roots:
        try:
            refusal = examine(root, ident)
        except IdentityError as exc:
            # A daemon that cannot act as the identity (no CAP_SETUID) cannot ask: its
            # calls will say so themselves. The session is not refused for it.
            log.warning("workspace %s not checked for uid %s: %s", root, identity, exc)
            return
        if refusal is not None:
            who = identity if identity is not None else (os.getuid(), os.getgid())
            raise InvalidRequest(refusal_message(refusal, who, chosen_by, root_daemon))
