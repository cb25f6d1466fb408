"""The session's identity for the daemon's own file work: per-thread fsuid, fsgid, groups.

A root daemon that opens a file for a session must not read what the session's own
sandboxed commands could not: the kernel's permission check has to see the session's
identity, not root. Linux keeps credentials per thread; setfsuid/setfsgid and the raw
setgroups syscall change only the calling thread (glibc's setgroups() broadcasts to
every thread of the process, so it is never used here). A thread switches around one
synchronous operation and switches back before it does anything else, so the event
loop may switch too, between two awaits.

Dropping fsuid from 0 also drops CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER and
CAP_CHOWN from the thread's effective set, and brings them back when it returns to 0;
CAP_SYS_RESOURCE (the filesystem's reserve) is dropped and brought back here (reserve).
"""

from __future__ import annotations

import os
import platform
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from agentd.fs import reserve
from agentd_sandbox import linux

T = TypeVar("T")


class IdentityError(RuntimeError):
    """The thread could not take (or give back) an identity; nothing was done as it."""


@dataclass(frozen=True, slots=True)
class FsIdentity:
    """Who the daemon is while it touches a session's files: the sandbox's uid and gid,
    and its supplementary groups (the session's own group, or none)."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()


_local = threading.local()


def current_identity() -> FsIdentity | None:
    """The identity this thread is acting as, if any."""
    return getattr(_local, "identity", None)


def _setgroups(groups: list[int]) -> None:
    if not linux.can_setgroups_thread():
        raise IdentityError(
            f"agentd cannot switch supplementary groups per thread on {platform.machine()}"
        )
    try:
        linux.setgroups_thread(groups)
    except OSError as exc:
        raise IdentityError(f"setgroups failed: {os.strerror(exc.errno or 0)}") from exc


def _setfs(uid: int, gid: int) -> tuple[int, int]:
    """Take fsuid `uid` and fsgid `gid`; the ones the thread held before.

    setfsuid/setfsgid report no error: the first switch of each thread reads the ids
    back (each read costs as much as a switch); a later one cannot fail differently,
    since the thread's capabilities do not change, and the ids it held are checked
    again when it switches back.
    """
    old_gid = linux.setfsgid(gid)
    old_uid = linux.setfsuid(uid)
    if not getattr(_local, "verified", False):
        now_uid = linux.fsuid()
        now_gid = linux.fsgid()
        if (now_uid, now_gid) != (uid, gid):
            linux.setfsuid(old_uid)
            linux.setfsgid(old_gid)
            raise IdentityError(
                f"could not take fsuid {uid}/fsgid {gid} (have {now_uid}/{now_gid})"
            )
        _local.verified = True
    return old_uid, old_gid


@contextmanager
def acting_as(identity: FsIdentity | None) -> Iterator[None]:
    """Run the body with `identity`'s file permissions on this thread (None: as the daemon).

    The body must not await: another task would run with the borrowed identity.
    """
    if identity is None or current_identity() == identity:
        yield
        return
    if current_identity() is not None:
        raise IdentityError("a thread acting for one identity cannot act for another")
    groups = os.getgroups()
    if groups or identity.groups:
        _setgroups(list(identity.groups))
    try:
        uid, gid = _setfs(identity.uid, identity.gid)
    except BaseException:
        if groups or identity.groups:
            _setgroups(groups)
        raise
    _local.identity = identity
    # Nor what the session could not fill itself: the state disk's reserve (fs/reserve).
    gave_up = reserve.give_up()
    try:
        yield
    finally:
        if gave_up:
            reserve.take_back()
        _local.identity = None
        _restore(identity, uid, gid, groups)


def _restore(identity: FsIdentity, uid: int, gid: int, groups: list[int]) -> None:
    try:
        held = _setfs(uid, gid)
        if groups or identity.groups:
            _setgroups(groups)
    except IdentityError:
        held = (-1, -1)
    if held != (identity.uid, identity.gid):
        # The body ran with other ids than it should have, or the thread cannot get its
        # own back: either way its work was done with the wrong rights; nothing may go on.
        os.write(2, b"agentd: a thread's file identity was not what it should be; exiting\n")
        os._exit(70)


def call_as(identity: FsIdentity | None, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` with `identity`'s file permissions; for asyncio.to_thread."""
    with acting_as(identity):
        return fn(*args)
