"""Who the sandbox runs as: a root daemon drops to an unprivileged uid before bwrap.

bwrap started by root keeps host uid 0 and every capability, so the drop must happen
before bwrap runs; subprocess does it between fork and exec (setgroups, setgid, setuid).
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from typing import TypedDict

from . import binaries
from .errors import SandboxUnavailable
from .policy import SandboxPolicy

# The uid a root daemon uses when the policy names none (nobody).
DEFAULT_UID = 65534


@dataclass(frozen=True)
class Identity:
    """The uid/gid the sandbox runs as, its supplementary groups, and whether we must
    switch to it."""

    uid: int
    gid: int
    switch: bool
    groups: tuple[int, ...] = ()


def resolve(policy: SandboxPolicy) -> Identity:
    """Pick the identity for `policy`; refuse uid 0 and impossible switches."""
    euid = os.geteuid()
    if euid != 0:
        if (
            policy.uid not in (None, euid)
            or policy.gid not in (None, os.getegid())
            or policy.groups
        ):
            raise SandboxUnavailable(
                f"cannot run the sandbox as uid {policy.uid}: only root can switch users; "
                "run the daemon as root or leave the policy's uid unset"
            )
        return Identity(euid, os.getegid(), switch=False)
    uid = DEFAULT_UID if policy.uid is None else policy.uid
    if uid == 0:
        raise SandboxUnavailable(
            "refusing to run a sandbox as uid 0; give the policy a non-root uid"
        )
    gid = policy.gid if policy.gid is not None else _primary_gid(uid)
    if gid == 0 or 0 in policy.groups:
        raise SandboxUnavailable("refusing to run a sandbox as gid 0; give the policy a gid")
    return Identity(uid, gid, switch=True, groups=tuple(policy.groups))


def setpriv_prefix(identity: Identity) -> list[str]:
    """argv prefix that arms the parent-death signal and drops to `identity`, then execs.

    util-linux setpriv does in one exec what subprocess's user=/group= would do in the
    forked child, and more: the parent-death signal it sets survives the exec of
    prlimit and bwrap, so the sandbox dies with the daemon even if the daemon dies
    before bwrap has armed its own; and a child that needs no uid switch from Python
    can be spawned with vfork, which is much cheaper from a large daemon.
    Empty when setpriv is missing (popen_kwargs then drops the identity instead).
    """
    path = binaries.find("setpriv")
    if path is None:
        return []
    argv = [path, "--pdeathsig=KILL"]
    if identity.switch:
        argv += [f"--regid={identity.gid}", f"--reuid={identity.uid}", groups_option(identity)]
    return [*argv, "--"]


def groups_option(identity: Identity) -> str:
    """setpriv's option for `identity`'s supplementary groups (none: cleared)."""
    if not identity.groups:
        return "--clear-groups"
    return "--groups=" + ",".join(str(g) for g in identity.groups)


class PopenIdentity(TypedDict, total=False):
    """The subprocess.Popen keywords that set a child's identity."""

    user: int
    group: int
    extra_groups: list[int]


def popen_kwargs(identity: Identity) -> PopenIdentity:
    """subprocess arguments that drop to `identity` in the child, before exec."""
    if not identity.switch:
        return {}
    return {"user": identity.uid, "group": identity.gid, "extra_groups": list(identity.groups)}


def home_of(uid: int) -> str | None:
    """The passwd home of `uid`, if it has one."""
    try:
        return pwd.getpwuid(uid).pw_dir
    except KeyError:
        return None


def may_search(st: os.stat_result, identity: Identity) -> bool:
    """Whether `identity` has search (x) permission on the directory `st` describes."""
    if st.st_uid == identity.uid:
        bit = stat.S_IXUSR
    elif st.st_gid == identity.gid or st.st_gid in identity.groups:
        bit = stat.S_IXGRP
    else:
        bit = stat.S_IXOTH
    return bool(st.st_mode & bit)


def can_reach(path: str, identity: Identity) -> bool:
    """Whether `identity` could look `path` up (search permission on every ancestor).

    bwrap runs as `identity`, so it can only mount over paths that identity can reach;
    a path it cannot reach is already closed to the sandbox by the host's permissions.
    """
    if not identity.switch:
        return os.path.lexists(path)
    parent = os.path.dirname(os.path.abspath(path))
    while True:
        try:
            st = os.stat(parent)
        except OSError:
            return False
        if not may_search(st, identity):
            return False
        if parent == "/":
            return os.path.lexists(path)
        parent = os.path.dirname(parent)


def _primary_gid(uid: int) -> int:
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return uid
