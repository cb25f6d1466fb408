"""The state disk's reserve, kept from sessions: a thread writing for a session gives up
CAP_SYS_RESOURCE while it does.

ext2/3/4 keep blocks (5% by default, `tune2fs -m`/`-r`) that only root (the
filesystem's resuid, as fsuid) or a holder of CAP_SYS_RESOURCE may fill. A root daemon's
journal can therefore still grow when a session has filled the disk its workspace
shares with the state: sandboxed commands never run as root and hold no capability.
The daemon's own file work for a session (Write, Edit, NotebookEdit) runs with the
session's fsuid (fs/identity.py), which is not root, but setfsuid does not take
CAP_SYS_RESOURCE away: this module does, for the calling thread only (capabilities are
per thread), and gives it back after. Bytes a session chose that the daemon writes as
itself (a large result saved for the session to read) are written with a fsuid other
than root and without the capability too (`without`).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager

_CAP_SYS_RESOURCE = 24
_VERSION_3 = 0x20080522
_libc = ctypes.CDLL(None, use_errno=True)


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _caps() -> tuple[_Header, ctypes.Array[_Data]]:
    header = _Header(_VERSION_3, 0)  # pid 0: the calling thread
    data = (_Data * 2)()
    if _libc.capget(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capget: {os.strerror(err)}")
    return header, data


def _set(header: _Header, data: ctypes.Array[_Data]) -> None:
    if _libc.capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")


def give_up() -> bool:
    """Drop CAP_SYS_RESOURCE from this thread's effective set; whether it was there."""
    if os.geteuid() != 0:
        return False
    header, data = _caps()
    bit = 1 << _CAP_SYS_RESOURCE
    if not data[0].effective & bit:
        return False
    data[0].effective &= ~bit
    _set(header, data)
    return True


def take_back() -> None:
    """Raise CAP_SYS_RESOURCE again (it stayed permitted)."""
    header, data = _caps()
    data[0].effective |= 1 << _CAP_SYS_RESOURCE
    _set(header, data)


def held() -> bool:
    """Whether this thread may write into the reserve now."""
    return bool(_caps()[1][0].effective & (1 << _CAP_SYS_RESOURCE))


# The fsuid a root thread takes while it writes bytes a session made (any uid but the
# filesystem's resuid, root, will do: the file is already open).
_NOBODY = 65534
_QUERY = ctypes.c_uint(0xFFFFFFFF)


@contextmanager
def without() -> Iterator[None]:
    """Run the body (writes to files already open, of bytes a session chose: a large
    result saved for it) with no right to the reserve, on this thread: a fsuid other
    than root and no CAP_SYS_RESOURCE. Nothing to do for a daemon that is not root, or a
    thread already acting as a session (fs/identity)."""
    if os.geteuid() != 0 or _libc.setfsuid(_QUERY) != 0:
        yield
        return
    _libc.setfsuid(ctypes.c_uint(_NOBODY))
    gave_up = give_up()
    try:
        yield
    finally:
        if gave_up:
            take_back()
        _libc.setfsuid(ctypes.c_uint(0))
        if _libc.setfsuid(_QUERY) != 0:
            # The thread cannot be the daemon again: its next write would be wrong.
            os.write(2, b"agentd: a thread could not take back its file identity; exiting\n")
            os._exit(70)


@contextmanager
def as_daemon() -> Iterator[None]:
    """Run the body (a write of the daemon's own state through a descriptor it holds: the
    temp ledger) with the reserve, even on a thread acting as a session: fsuid root, the
    filesystem's resuid, for that write only."""
    held = _libc.setfsuid(_QUERY)
    if os.geteuid() != 0 or held == 0:
        yield
        return
    _libc.setfsuid(ctypes.c_uint(0))
    try:
        yield
    finally:
        _libc.setfsuid(ctypes.c_uint(held))
        if _libc.setfsuid(_QUERY) != held:
            os.write(2, b"agentd: a thread could not take back its file identity; exiting\n")
            os._exit(70)


# Below this, the state disk's reserve is not worth counting on.
ENOUGH = 64 * 1024 * 1024


def room(path: str) -> int:
    """Bytes of the filesystem holding `path` that only this daemon, not a session, may
    still fill: the blocks reserved for root, when we are root; 0 otherwise (a
    filesystem with no such reserve: tmpfs, XFS, btrfs, ext4 made with -m 0)."""
    if os.geteuid() != 0:
        return 0
    st = os.statvfs(path)
    return max(0, st.f_bfree - st.f_bavail) * st.f_frsize


def warning(path: str) -> str | None:
    """One line saying what to do, when a session filling the disk of `path` would stop
    the daemon's journal; None when the reserve holds."""
    have = room(path)
    if have >= ENOUGH:
        return None
    who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    return (
        f"the state dir {path} is on a filesystem with {have // (1024 * 1024)} MiB that "
        f"only agentd ({who}) may fill: a session that fills that disk (a workspace on it) "
        "stops the journal; put state_dir on a filesystem of its own, or run agentd as "
        "root on ext4 with blocks reserved for root (tune2fs -m 5)"
    )
