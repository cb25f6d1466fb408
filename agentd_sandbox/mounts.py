"""The sandbox's mount list as data, checked before bwrap starts, then written as argv.

bwrap applies its mount options in order, and a later bind can show again what an
earlier one hid. Each mount says why it is there (its Role), and check() proves, on the
final list with every source resolved (a descriptor's object where the kernel has it,
not the name it was given), that nothing hidden is shown again:

- a GRANT is something the policy names itself (a workspace root, the temp dir, an
  allow-listed home path, a socket, a file staged for it); it may lie in a covered
  place (/tmp, /run, a home), but never contain one whole;
- a PROTECT bind (a protected path made read-only, a git dir pinned onto itself) is a
  descriptor bound onto its own path, beneath a root granted before it: so it can show
  nothing the root did not;
- no bind's source holds or lies in a secret unless that secret is hidden after it;
- a VIEW (review mode) is an overlay mount bound over a root granted before it, whose
  lower layer is that root: it shows the root and what the command wrote over it;
- nothing else is bound onto a host file that a covered place hides (a sanitised copy
  of a hidden git config would show what the original holds), and no file the caller
  gives by content (a data mount, which shows no host file) stands in for one either.

A list that breaks a rule fails the start (SandboxUnavailable): a bug in what builds
the list is then a sandbox that does not start, never one that shows a hidden file.
"""

from __future__ import annotations

import ctypes
import enum
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from .anchored import fd_path
from .errors import SandboxUnavailable


class Role(enum.Enum):
    COVER = "cover"  # an empty tmpfs over a place the sandbox must not see
    GRANT = "grant"  # shown because the policy names it
    PROTECT = "protect"  # a path inside a granted root, bound onto itself
    HIDE = "hide"  # a secret covered after everything else
    FIXUP = "fixup"  # remounts and directories: shows nothing
    VIEW = "view"  # an overlay over a granted root, bound onto that root


# statfs(2)'s f_type of an overlay mount.
OVERLAYFS_MAGIC = 0x794C7630


# Ops that show a source at a destination.
BINDS = frozenset({"bind", "ro-bind", "ro-bind-try", "dev-bind"})
# Ops that show content bwrap reads from a descriptor (a pipe or memfd), written into a
# file of the sandbox's own: no host path is resolved, by bwrap or anyone.
DATA = frozenset({"ro-bind-data"})
# The mode of such a file: every process inside may read and run it (a helper script).
DATA_PERMS = "0555"


@dataclass(frozen=True)
class Mount:
    """One bwrap mount option. A bind has a `source` path or a descriptor `fd`; a data
    mount (DATA) the descriptor its content is read from."""

    op: str  # bind, ro-bind, ro-bind-try, tmpfs, remount-ro, dir
    dest: str
    role: Role
    source: str | None = None
    fd: int | None = None

    def argv(self) -> list[str]:
        if self.op in DATA:
            return ["--perms", DATA_PERMS, f"--{self.op}", str(self.fd), self.dest]
        if self.fd is not None:
            return [f"--{self.op}-fd", str(self.fd), self.dest]
        if self.source is not None:
            return [f"--{self.op}", self.source, self.dest]
        return [f"--{self.op}", self.dest]

    def real_source(self) -> str | None:
        """The bound object's path now: the descriptor's, or the name resolved."""
        if self.fd is not None:
            return fd_path(self.fd)
        if self.source is None:
            return None
        return os.path.realpath(self.source)


@dataclass
class MountList:
    """Mounts in order, and the descriptors they bind (ours until closed)."""

    mounts: list[Mount] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)

    def add(self, mount: Mount) -> None:
        self.mounts.append(mount)

    def argv(self) -> list[str]:
        return [arg for m in self.mounts for arg in m.argv()]

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()


def under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def check(mounts: Iterable[Mount], covered: Iterable[str], secrets: Iterable[str]) -> None:
    """Raise SandboxUnavailable unless `mounts` keeps hidden what is hidden: the `covered`
    directories (replaced by empty tmpfs: /tmp, /run, homes) and the `secrets` (hidden
    last: credentials, the daemon's own files, host sockets). See the module docstring."""
    ordered = list(mounts)
    covered = [os.path.normpath(c) for c in covered]
    secrets = [os.path.normpath(s) for s in secrets]
    hidden_at = {m.dest: i for i, m in enumerate(ordered) if m.role is Role.HIDE}
    roots: list[str] = []
    for index, mount in enumerate(ordered):
        if mount.op in DATA:
            if mount.fd is None:
                raise _refused(mount, "it has no content")
            if _stands_in(mount.dest, covered, ordered[:index]):
                raise _refused(mount, "it would stand in for a hidden file of the host")
            continue
        if mount.op not in BINDS or mount.role in (Role.HIDE, Role.COVER):
            continue
        try:
            source = mount.real_source()
        except OSError as exc:
            raise _refused(mount, f"its descriptor cannot be read ({exc.strerror})") from None
        if source is None:
            raise _refused(mount, "it binds nothing")
        if mount.op == "ro-bind-try" and not os.path.lexists(source):
            continue
        if mount.role is Role.VIEW:
            if mount.fd is None or not is_overlay(mount.fd):
                raise _refused(mount, "a view is not an overlay mount bound by descriptor")
            if mount.dest not in roots:
                raise _refused(mount, "a view lies over no root granted before it")
            continue
        if mount.role is Role.PROTECT:
            if mount.fd is None:
                raise _refused(mount, "a protected path is bound by name, not by descriptor")
            if source != mount.dest:
                raise _refused(mount, f"it would show {source} there")
            if not any(under(source, r) and source != r for r in roots):
                raise _refused(mount, "it lies beneath no root granted before it")
        elif mount.role is Role.GRANT:
            for place in covered:
                if under(place, source):
                    raise _refused(mount, f"it would show all of {place} again")
            if source == mount.dest:
                roots.append(source)
        else:
            raise _refused(mount, f"a bind may not have the role {mount.role.value}")
        if source != mount.dest and _stands_in(mount.dest, covered, ordered[:index]):
            raise _refused(mount, "it would stand in for a hidden file of the host")
        for secret in secrets:
            if under(secret, source) or under(source, secret):
                later = hidden_at.get(secret, -1) > index
                if source != mount.dest or not later:
                    raise _refused(mount, f"it would show {secret}, which is hidden")


def is_overlay(fd: int) -> bool:
    """Whether the descriptor's file lies on an overlay mount."""
    return statfs_type(fd) == OVERLAYFS_MAGIC


def statfs_type(fd: int) -> int:
    """fstatfs(2)'s f_type (os.fstatvfs does not give it)."""
    buf = ctypes.create_string_buffer(120)
    if _libc.fstatfs(fd, buf) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(ctypes.c_long.from_buffer(buf).value)


_libc = ctypes.CDLL(None, use_errno=True)
_libc.fstatfs.argtypes = [ctypes.c_int, ctypes.c_void_p]


def _stands_in(dest: str, covered: list[str], before: list[Mount]) -> bool:
    """Whether a bind of something else onto `dest` would stand in for a host file that
    is hidden: `dest` exists on the host in a covered place no earlier bind shows. (A
    fixed mount point such as /run/agentd-tasks exists on no host.)"""
    if not any(under(dest, c) for c in covered):
        return False
    if any(m.op in BINDS and m.role is Role.GRANT and under(dest, m.dest) for m in before):
        return False
    return os.path.lexists(dest)


def _refused(mount: Mount, why: str) -> SandboxUnavailable:
    return SandboxUnavailable(
        f"refusing to start the sandbox: the bind on {mount.dest} is wrong ({why})"
    )
