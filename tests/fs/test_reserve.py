"""agentd/fs/reserve.py: writes a session chose have no right to the state disk's
reserve (no root fsuid, no CAP_SYS_RESOURCE on that thread), and the daemon's own
writes keep it even on a thread acting as a session."""

from __future__ import annotations

import os
import threading

import pytest

from agentd.fs import reserve
from agentd.fs.identity import FsIdentity, acting_as
from agentd_sandbox import linux

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
BIT = 1 << linux.CAP_SYS_RESOURCE


def _in_thread(fn):  # type: ignore[no-untyped-def]
    box: list[object] = []
    thread = threading.Thread(target=lambda: box.append(fn()))
    thread.start()
    thread.join()
    return box[0]


def test_without_the_reserve_then_with_it_again() -> None:
    had = bool(linux.capget().effective & BIT)

    def work() -> tuple[int, bool, int, bool]:
        with reserve.without():
            inside = (linux.fsuid(), reserve.held())
        return (*inside, linux.fsuid(), reserve.held())

    fsuid, held, after, held_after = _in_thread(work)
    assert fsuid != 0 and not held
    assert after == 0 and held_after == had


def test_give_up_and_take_back_are_per_thread() -> None:
    if not linux.capget().effective & BIT:
        pytest.skip("this process has no CAP_SYS_RESOURCE to give up")

    def work() -> tuple[bool, bool, bool]:
        gave = reserve.give_up()
        dropped = reserve.held()
        reserve.take_back()
        return gave, dropped, reserve.held()

    assert _in_thread(work) == (True, False, True)
    assert reserve.held()


def test_as_daemon_is_root_for_one_write_on_a_session_thread() -> None:
    def work() -> tuple[int, int]:
        with acting_as(FsIdentity(65534, 65534)):
            with reserve.as_daemon():
                during = linux.fsuid()
            return during, linux.fsuid()

    assert _in_thread(work) == (0, 65534)
