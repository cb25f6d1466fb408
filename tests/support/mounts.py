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


_CLONE_NEWNS = 0x00020000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18


def private_namespace() -> bool:
    """Move this process (its main thread, and every child it starts from now on) into a
    mount namespace of its own, private to it: whether it did.

    For a parallel run's workers. bwrap copies every host mount into each sandbox and
    then remounts them one by one; a directory removed on the host that is a mount point
    in that copy is unmounted from it too (since Linux 3.18), and when that happens in
    the middle of the walk, bwrap fails to start ("Unable to apply mount flags"). A
    session closing does exactly that to its temp dir, so one worker's daemons closing
    sessions failed another worker's sandboxes at random. With a namespace each, what one
    worker's daemons mount is not in any other worker's copies at all. (A daemon's own
    starts survive that window: agentd/runs/launch.py starts again a sandbox that ended
    before its command ran. Tests that run bwrap themselves have no such retry.)"""
    if os.geteuid() != 0:
        return False
    if _libc.unshare(_CLONE_NEWNS) != 0:
        return False
    # On a systemd host / is shared: keep this namespace's mounts from propagating back.
    _libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None)
    return True
