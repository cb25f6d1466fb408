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

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager

from agentd_sandbox import linux

_BIT = 1 << linux.CAP_SYS_RESOURCE


def give_up() -> bool:
    """Drop CAP_SYS_RESOURCE from this thread's effective set; whether it was there."""
    if os.geteuid() != 0:
        return False
    caps = linux.capget()
    if not caps.effective & _BIT:
        return False
    linux.capset(dataclasses.replace(caps, effective=caps.effective & ~_BIT))
    return True


def take_back() -> None:
    """Raise CAP_SYS_RESOURCE again (it stayed permitted)."""
    caps = linux.capget()
    linux.capset(dataclasses.replace(caps, effective=caps.effective | _BIT))


def held() -> bool:
    """Whether this thread may write into the reserve now."""
    return bool(linux.capget().effective & _BIT)


# The fsuid a root thread takes while it writes bytes a session made (any uid but the
# filesystem's resuid, root, will do: the file is already open).
_NOBODY = 65534


@contextmanager
def without() -> Iterator[None]:
    """Run the body (writes to files already open, of bytes a session chose: a large
    result saved for it) with no right to the reserve, on this thread: a fsuid other
    than root and no CAP_SYS_RESOURCE. Nothing to do for a daemon that is not root, or a
    thread already acting as a session (fs/identity)."""
    if os.geteuid() != 0 or linux.fsuid() != 0:
        yield
        return
    linux.setfsuid(_NOBODY)
    gave_up = give_up()
    try:
        yield
    finally:
        if gave_up:
            take_back()
        linux.setfsuid(0)
        if linux.fsuid() != 0:
            # The thread cannot be the daemon again: its next write would be wrong.
            os.write(2, b"agentd: a thread could not take back its file identity; exiting\n")
            os._exit(70)


@contextmanager
def as_daemon() -> Iterator[None]:
    """Run the body (a write of the daemon's own state through a descriptor it holds: the
    temp ledger) with the reserve, even on a thread acting as a session: fsuid root, the
    filesystem's resuid, for that write only."""
    held = linux.fsuid()
    if os.geteuid() != 0 or held == 0:
        yield
        return
    linux.setfsuid(0)
    try:
        yield
    finally:
        linux.setfsuid(held)
        if linux.fsuid() != held:
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
