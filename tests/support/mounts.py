"""Mounts a run's daemons left under its temp dirs, taken down at the run's end.

A daemon killed outright (the crash tests' kill -9) leaves its sessions' network
namespaces mounted under its state dir; the next daemon on that state would remove them,
and a test's daemon has no next. Left, each keeps pytest from removing the directory."""

from __future__ import annotations

import ctypes
import os

_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def _unescape(field: str) -> str:
    """/proc/self/mountinfo writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def detach_under(root: str) -> int:
    """Lazily unmount every mount at or below `root`, deepest first; how many."""
    if os.geteuid() != 0:
        return 0
    prefix = root.rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        points = [_unescape(line.split()[4]) for line in f]
    done = 0
    for point in sorted((p for p in points if p.startswith(prefix)), reverse=True):
        if _libc.umount2(point.encode(), _MNT_DETACH) == 0:
            done += 1
    return done
