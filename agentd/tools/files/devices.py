"""Paths that name devices and process files, which Read refuses by name (as the reference).

Read never blocks on what it opens (non-blocking open, regular files only, see
filestate.read_current); refusing these names first gives the model the reason in words,
as an input error, before any permission check or open.
"""

from __future__ import annotations

import re

# /proc/<pid or self>/fd/<n> and /proc/<pid>/task/<tid>/fd/<n>: another process's streams.
_PROC_FD = re.compile(r"/proc/[^/]+(?:/task/[^/]+)?/fd/[^/]+")
# Under /dev, files that are no devices: /dev/null reads as empty, /dev/shm holds files.
_NOT_DEVICES = ("/dev/null",)
_FILE_TREES = ("/dev/shm/",)


def named_device(path: str) -> str | None:
    """What kind of device file the absolute, normalised `path` names (by its name alone,
    without touching it), or None."""
    if path.startswith("//"):
        path = path[1:]
    if _PROC_FD.fullmatch(path):
        return "a process's file descriptor"
    is_dev = path.startswith("/dev/") and not path.startswith(_FILE_TREES)
    if is_dev and path not in _NOT_DEVICES:
        return "a device"
    return None
