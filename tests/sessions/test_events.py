"""Attach in bounded memory: paged replay, a byte-bounded backlog, gaps that resume from the store.

These drive the real EventLog over a real SQLite store; the RSS figures with a real daemon
and gRPC clients are in bench/attach_memory.py.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from agentd.sessions import events
from agentd.sessions.event_types import CwdChanged, Progress, TodosChanged
from agentd.sessions.events import EventLog, Replay
from agentd.sessions.store import Store

BLOB = "x" * 10_000


def _fill(log: EventLog, n: int) -> None:
    for i in range(n):
        log.emit(TodosChanged(todos=[{"content": f"{i} {BLOB}", "status": "pending"}]))


def _setter(event: asyncio.Event) -> Callable[[], Awaitable[None]]:
    """A subscribe() `registered` callback that sets `event`: the subscriber is counted."""

    async def registered() -> None:
        event.set()

    return registered


async def _until(agen, seq: int) -> list[events.Event]:  # type: ignore[no-untyped-def]
    out = []
    async for e in agen:
        out.append(e)
        if e.seq == seq:
            break
    return out


async def _take(agen, n: int) -> list[events.Event]:  # type: ignore[no-untyped-def]
    out = []
    async for e in agen:
        out.append(e)
        if len(out) == n:
            break
    return out


def test_replay_is_paged_off_the_loop_and_in_order(tmp_path: Path) -> None:
    async def main() -> None:
        store = Store(str(tmp_path / "s.db"))
        log = EventLog("s1", store, Replay())
        _fill(log, 300)  # 3 MB: many pages, some not yet committed
        threads: set[str] = set()
        real = store.events_page

        def spy(*a, **k):  # type: ignore[no-untyped-def]
            threads.add(threading.current_thread().name)
            return real(*a, **k)

        store.events_page = spy  # type: ignore[method-assign]
        got = await _take(log.subscribe(0), 300)
        assert [e.seq for e in got] == list(range(1, 301))
        assert threads and all(t.startswith("journal") for t in threads), threads
        store.close()

    asyncio.run(main())


def test_a_silent_subscriber_holds_a_bounded_backlog_then_catches_up(tmp_path: Path) -> None:
    async def main() -> None:
        store = Store(str(tmp_path / "s.db"))
        log = EventLog("s1", store, Replay(), backlog_bytes=200_000)
        counted = asyncio.Event()
        agen = log.subscribe(0, _setter(counted))
        # Start it (it registers), then never read while 500 events (5 MB) go by.
        pending = asyncio.ensure_future(agen.__anext__())
        await counted.wait()
        _fill(log, 500)
        [sub] = log._subscribers
        assert sub.bytes <= 200_000 + len(BLOB) + 200
        assert len(sub.backlog) <= 21
        first_event = await pending
        got = [first_event, *await _until(agen, 500)]
        seqs = [e.seq for e in got if e.kind != "gap"]
        gaps = [e for e in got if e.kind == "gap"]
        assert gaps, "a subscriber that fell behind is told"
        assert seqs == list(range(1, 501)), "and then gets every journaled event, in order"

    async def run() -> None:
        await asyncio.wait_for(main(), 30)

    asyncio.run(run())


@pytest.mark.parametrize("live_only", [True, False])
def test_live_events_after_the_gap_are_not_lost(tmp_path: Path, live_only: bool) -> None:
    async def main() -> None:
        store = Store(str(tmp_path / "s.db"))
        log = EventLog("s1", store, Replay(), backlog_bytes=50_000)
        counted = asyncio.Event()
        agen = log.subscribe(0, _setter(counted))
        pending = asyncio.ensure_future(agen.__anext__())
        await counted.wait()
        _fill(log, 50)
        got = [await pending]
        got += await _until(agen, 50)
        kind = "progress" if live_only else "cwd_changed"
        log.emit(Progress(tool_use_id="t") if live_only else CwdChanged(cwd="/a", previous="/b"))
        got += await _take(agen, 1)
        # A live event takes no number: it carries the last journaled one's.
        assert got[-1].kind == kind and got[-1].seq == (50 if live_only else 51)
        log.close()
        assert [e async for e in agen] == []
        store.close()

    asyncio.run(main())


def test_journaled_numbers_have_no_holes_and_live_events_carry_the_last(tmp_path: Path) -> None:
    async def main() -> None:
        store = Store(str(tmp_path / "s.db"))
        log = EventLog("s1", store, Replay())
        counted = asyncio.Event()
        agen = log.subscribe(0, _setter(counted))
        pending = asyncio.ensure_future(agen.__anext__())
        await counted.wait()
        log.emit(CwdChanged(cwd="/a", previous="/b"))
        for _ in range(3):
            log.emit(Progress(tool_use_id="t"))
        log.emit(CwdChanged(cwd="/b", previous="/a"))
        log.emit(Progress(tool_use_id="t"))
        log.emit(CwdChanged(cwd="/c", previous="/b"))
        got = [await pending, *await _take(agen, 6)]
        assert [(e.kind, e.seq) for e in got] == [
            ("cwd_changed", 1),
            ("progress", 1),
            ("progress", 1),
            ("progress", 1),
            ("cwd_changed", 2),
            ("progress", 2),
            ("cwd_changed", 3),
        ]
        assert log.last_seq == 3
        # Resuming after a progress event's seq replays what followed it, nothing lost.
        replay = await _take(log.replay(1), 2)
        assert [e.seq for e in replay] == [2, 3]
        # A restarted daemon goes on from the journal's last number.
        log.close()
        assert EventLog("s1", store, Replay()).last_seq == 3
        store.close()

    asyncio.run(main())


def test_replays_take_turns_with_the_rest_of_the_loop(tmp_path: Path) -> None:
    """However many clients replay at once, other work waits for one replayed event per
    turn of the loop, not for a page of each."""

    async def main() -> None:
        store = Store(str(tmp_path / "s.db"))
        log = EventLog("s1", store, Replay())
        _fill(log, 200)  # 2 MB: pages of many events each
        store.flush()
        between: list[int] = []
        taken = 0
        done = False

        async def probe() -> None:
            # One tick per turn of the loop: how many events were replayed since the last.
            nonlocal taken
            while not done:
                await asyncio.sleep(0)
                between.append(taken)
                taken = 0

        async def replay() -> None:
            nonlocal taken
            async for event in log.subscribe(0):
                taken += 1
                if event.seq == 200:
                    return

        ticking = asyncio.ensure_future(probe())
        await asyncio.gather(*(replay() for _ in range(6)))
        done = True
        await ticking
        assert sum(between) + taken == 6 * 200
        assert max(between) <= 2, max(between)
        store.close()

    asyncio.run(main())
