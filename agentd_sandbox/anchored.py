"""Paths opened as descriptors without following a link anywhere on the way.

What the sandbox binds inside a workspace was named by the workspace: `.idea` may be a
symlink to /home, `.git/modules` one to another repository. A path checked by name and
then handed to bwrap by name is bound wherever it points at the moment bwrap resolves
it. So every such path is opened here with openat2(2): beneath the descriptor of its
root (RESOLVE_BENEATH, so neither `..` nor an absolute link leaves it) and with no
symlink resolution at all (RESOLVE_NO_SYMLINKS), and bwrap binds that descriptor
(`--bind-fd`, which mounts it and then checks the mount is that very inode). A name
that is a link, or has one on its way, is refused with ELOOP and bound nowhere.
"""

from __future__ import annotations

import errno
import os

from . import linux
from .linux import RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS

# Refuse any link, /proc's magic ones included, and never leave the starting directory.
STRICT = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS


def openat2(dir_fd: int, rel: str, flags: int, resolve: int = STRICT) -> int:
    """openat2(dir_fd, rel) with `resolve` flags; raises OSError (ELOOP for a link)."""
    return linux.openat2(dir_fd, rel, flags, resolve=resolve)


def open_beneath(root_fd: int, rel: str, flags: int = os.O_PATH) -> int:
    """`rel` opened beneath the directory `root_fd`, no link followed (O_PATH by default)."""
    rel = os.path.normpath(rel)
    if os.path.isabs(rel) or rel == ".." or rel.startswith("../"):
        raise OSError(errno.EXDEV, "not beneath its root", rel)
    return openat2(root_fd, rel, flags)


def open_path(path: str, flags: int = os.O_PATH) -> int:
    """The absolute `path` opened from / with no link in any component (O_PATH by
    default): the caller resolved it once (realpath); a link swapped in since is ELOOP."""
    if not os.path.isabs(path):
        raise OSError(errno.EINVAL, "not an absolute path", path)
    root = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        rel = os.path.normpath(path).lstrip("/") or "."
        return openat2(root, rel, flags, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
    finally:
        os.close(root)


def fd_path(fd: int) -> str:
    """Where the object `fd` names is now, as the kernel says (not a name we gave it)."""
    return os.readlink(f"/proc/self/fd/{fd}")


def is_link_refusal(exc: OSError) -> bool:
    """Whether the open failed because a link was on the way (or it left its root)."""
    return exc.errno in (errno.ELOOP, errno.EXDEV)
