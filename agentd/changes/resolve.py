"""Directory handles from fanotify events back to paths, on the workspace's filesystems.

open_by_handle_at needs CAP_DAC_READ_SEARCH, which is more than a session's sandbox
identity has: it is used only to learn a directory's current path (a string the change
set is keyed by). Every file operation on what a run changed is made afterwards by name
beneath the workspace root, as the session's identity, without following links
(files.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct

from agentd.changes.fanotify import Fid, fsid_of

_libc = ctypes.CDLL(None, use_errno=True)
_libc.open_by_handle_at.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
_libc.open_by_handle_at.restype = ctypes.c_int
_MAX_HANDLE = 128
_DELETED = " (deleted)"


def handles_work(path: str) -> str:
    """ "" when this process may turn a handle of `path` back into a path (it needs
    CAP_DAC_READ_SEARCH), else why not."""
    buf = ctypes.create_string_buffer(struct.pack("<Ii", _MAX_HANDLE, 0) + bytes(_MAX_HANDLE))
    mount_id = ctypes.c_int()
    if _libc.name_to_handle_at(-100, os.fsencode(path), buf, ctypes.byref(mount_id), 0) != 0:
        return f"name_to_handle_at: {os.strerror(ctypes.get_errno())}"
    size = struct.unpack_from("<I", buf.raw)[0]
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        got = _libc.open_by_handle_at(fd, buf.raw[: 8 + size], os.O_PATH | os.O_CLOEXEC)
        if got < 0:
            return f"open_by_handle_at: {os.strerror(ctypes.get_errno())}"
        os.close(got)
        return ""
    finally:
        os.close(fd)


class Resolver:
    """Paths of directory handles on the filesystems of `roots`, cached until `forget`."""

    def __init__(self, roots: list[str]) -> None:
        self._mounts: dict[bytes, int] = {}
        self._cache: dict[Fid, str | None] = {}
        for root in roots:
            try:  # open_by_handle_at refuses an O_PATH descriptor
                fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                continue
            fsid = fsid_of(fd)
            if fsid in self._mounts:
                os.close(fd)
            else:
                self._mounts[fsid] = fd

    def close(self) -> None:
        for fd in self._mounts.values():
            os.close(fd)
        self._mounts.clear()

    def forget(self) -> None:
        """Drop cached paths (a directory was renamed: its handle now has another path)."""
        self._cache.clear()

    def path(self, fid: Fid) -> str | None:
        """The directory's current path; None when it is gone or on another filesystem."""
        if fid in self._cache:
            return self._cache[fid]
        path = self._open(fid)
        self._cache[fid] = path
        return path

    def _open(self, fid: Fid) -> str | None:
        mount = self._mounts.get(fid.fsid)
        if mount is None or len(fid.handle) < 4:
            return None
        buf = struct.pack("<I", len(fid.handle) - 4) + fid.handle
        fd = _libc.open_by_handle_at(mount, buf, os.O_PATH | os.O_CLOEXEC)
        if fd < 0:
            return None  # ESTALE: deleted since
        try:
            if os.fstat(fd).st_nlink == 0:
                return None
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
        if path.endswith(_DELETED) or not path.startswith("/"):
            return None
        return path
