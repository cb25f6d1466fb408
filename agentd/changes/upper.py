"""An overlay's upper directory read as a change set: what a call in review mode wrote.

Everything in it is the sandbox's making, so it is read as hostile: by descriptor from
the upper's root down, no link followed (a link is an entry, its target only text), a
regular file read through the descriptor that was checked (images.py), and nothing
else ever opened. Each entry becomes the image its path should have in the workspace:

- a regular file, a link, a directory: itself (a directory with its mode);
- a whiteout (a character device 0:0): the path is deleted;
- an opaque directory (xattr trusted.overlay.opaque = "y"): the directory replaced
  whole, so every name the workspace holds in it and the upper does not is deleted
  (`opaque` lists them for the caller, who reads the workspace);
- a FIFO, socket or any other device: not applicable, and says so.

Names come from the directory listing: never "", ".", ".." or with a "/" in them (the
kernel's promise, checked all the same).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from agentd.changes import images
from agentd.changes.images import Image
from agentd_sandbox import linux
from agentd_sandbox.linux import RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS

_NO_LINKS = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
OPAQUE_XATTR = "trusted.overlay.opaque"
NOT_APPLICABLE = "not applicable: not a regular file, link or directory"


@dataclass
class Entry:
    rel: str
    image: Image
    data: bytes | None = None


@dataclass
class Scan:
    entries: list[Entry] = field(default_factory=list)
    # Directories the command replaced whole (the workspace's names in them go).
    opaque: list[str] = field(default_factory=list)
    # More paths than `limit`: the scan stopped, the set cannot be applied.
    truncated: bool = False


def scan(upper: str, cap: int, limit: int) -> Scan:
    """The change set in `upper`, files past `cap` bytes kept without their content."""
    out = Scan()
    top = os.open(upper, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        _walk(top, "", upper, cap, limit, out)
    finally:
        os.close(top)
    return out


def _walk(dir_fd: int, prefix: str, upper: str, cap: int, limit: int, out: Scan) -> None:
    for name in sorted(os.listdir(dir_fd)):
        if not name or name in (".", "..") or "/" in name:
            continue  # never listed; a path made of one would leave the workspace
        if len(out.entries) >= limit:
            out.truncated = True
            return
        rel = f"{prefix}{name}"
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            out.entries.append(Entry(rel, images.none()))
        elif stat.S_ISDIR(st.st_mode):
            out.entries.append(Entry(rel, {"kind": images.DIR, "mode": stat.S_IMODE(st.st_mode)}))
            sub = linux.openat2(dir_fd, name, os.O_RDONLY | os.O_DIRECTORY, resolve=_NO_LINKS)
            try:
                if _opaque(sub):
                    out.opaque.append(rel)
                _walk(sub, rel + "/", upper, cap, limit, out)
            finally:
                os.close(sub)
            if out.truncated:
                return
        elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
            image, data = images.look(upper, rel, None, cap)
            out.entries.append(Entry(rel, image, data))
        else:
            out.entries.append(Entry(rel, images.unknown(NOT_APPLICABLE)))


def _opaque(fd: int) -> bool:
    try:
        return os.getxattr(fd, OPAQUE_XATTR) == b"y"
    except OSError:
        return False
