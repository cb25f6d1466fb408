"""A path's image: what it was (a file with its mode and content, a link with its
target, a directory, nothing) or why it cannot be put back, as one JSON-able dict.

An image is read as the session's sandbox identity, beneath the root, with no link
followed anywhere on the path (a link is recorded as a link); a regular file is read
through the descriptor that was checked, never reopened by name. A FIFO, socket or
device is never opened for reading: it is recorded as not restorable.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any

from agentd.fs.identity import FsIdentity, acting_as
from agentd_sandbox import linux
from agentd_sandbox.linux import RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS

FILE, LINK, DIR, NONE, UNKNOWN = "file", "link", "dir", "none", "unknown"
NOT_REGULAR = "not restorable: not a regular file"
TOO_LARGE = "not restorable: too large"
NOT_CAPTURED = "no pre-image (not captured)"

Image = dict[str, Any]


def shown(path: str) -> str:
    """A path as valid text for the wire and the journal: bytes that are not UTF-8 (a
    name a command made) as backslash escapes."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def none() -> Image:
    return {"kind": NONE}


def unknown(why: str) -> Image:
    return {"kind": UNKNOWN, "why": why}


def restorable(image: Image) -> bool:
    """Whether a restore can make the path this again."""
    if image["kind"] == FILE:
        return bool(image.get("blob")) and not image.get("why")
    return image["kind"] in (LINK, DIR, NONE)


def same(a: Image, b: Image) -> bool:
    """The same kind, content, target and permission bits (a directory: its kind)."""
    if a["kind"] != b["kind"] or a["kind"] == UNKNOWN:
        return False
    if a["kind"] == FILE:
        return a.get("blob") == b.get("blob") and a.get("mode") == b.get("mode") and bool(a["blob"])
    if a["kind"] == LINK:
        return a.get("target") == b.get("target")
    return True


def describe(image: Image) -> str:
    kind = image["kind"]
    if kind == FILE:
        return f"file {image.get('mode', 0):o} {image.get('size', 0)} bytes"
    if kind == LINK:
        return f"link -> {image.get('target', '')}"
    return {DIR: "directory", NONE: "absent"}.get(kind) or str(image.get("why", "unknown"))


def look(root: str, rel: str, identity: FsIdentity | None, cap: int) -> tuple[Image, bytes | None]:
    """The image `rel` has now beneath `root`, and a regular file's bytes (None past
    `cap`, or for anything else)."""
    with acting_as(identity):
        try:
            root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:  # the workspace root itself went (or was replaced)
            return unknown(f"not restorable: the workspace root is gone ({exc.strerror})"), None
        try:
            try:
                fd = linux.openat2(
                    root_fd,
                    rel,
                    os.O_PATH | os.O_NOFOLLOW,
                    resolve=RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
                )
            except (FileNotFoundError, NotADirectoryError):
                return none(), None
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # a directory on its path is a link: no
                    return none(), None  # such path exists without following one
                if exc.errno == errno.EXDEV:
                    return unknown("not restorable: its path leaves the workspace"), None
                return unknown(f"not restorable: {exc.strerror or exc}"), None
        finally:
            os.close(root_fd)
        try:
            return _of(fd, cap)
        finally:
            os.close(fd)


def _of(fd: int, cap: int) -> tuple[Image, bytes | None]:
    st = os.fstat(fd)
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return {"kind": LINK, "target": os.readlink("", dir_fd=fd)}, None
    if stat.S_ISDIR(st.st_mode):
        return {"kind": DIR, "mode": mode}, None
    if not stat.S_ISREG(st.st_mode):
        return unknown(NOT_REGULAR), None
    if st.st_size > cap:
        return {"kind": FILE, "mode": mode, "size": st.st_size, "why": TOO_LARGE}, None
    # The descriptor checked, opened for reading (the same inode, not the name).
    rfd = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        chunks: list[bytes] = []
        remaining = cap + 1
        while remaining > 0:
            chunk = os.read(rfd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    finally:
        os.close(rfd)
    data = b"".join(chunks)
    if len(data) > cap:
        return {"kind": FILE, "mode": mode, "size": len(data), "why": TOO_LARGE}, None
    return {"kind": FILE, "mode": mode, "size": len(data)}, data
