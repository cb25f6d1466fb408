"""Directory handles from fanotify events back to paths, on the workspace's filesystems.

open_by_handle_at needs CAP_DAC_READ_SEARCH, which is more than a session's sandbox
identity has: it is used only to learn a directory's current path (a string the change
set is keyed by). Every file operation on what a run changed is made afterwards by name
beneath the workspace root, as the session's identity, without following links
(files.py).
"""

from __future__ import annotations

import contextlib
import os

from agentd.changes.fanotify import Fid, fsid_of
from agentd_sandbox import linux

_DELETED = " (deleted)"


def handles_work(path: str) -> str:
    """ "" when this process may turn a handle of `path` back into a path (it needs
    CAP_DAC_READ_SEARCH), else why not."""
    try:
        handle, _ = linux.name_to_handle_at(linux.AT_FDCWD, path)
    except OSError as exc:
        return f"name_to_handle_at: {os.strerror(exc.errno or 0)}"
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.close(linux.open_by_handle_at(fd, handle, os.O_PATH))
        return ""
    except OSError as exc:
        return f"open_by_handle_at: {os.strerror(exc.errno or 0)}"
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
        handle = (len(fid.handle) - 4).to_bytes(4, "little") + fid.handle
        try:
            fd = linux.open_by_handle_at(mount, handle, os.O_PATH)
        except OSError:
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
