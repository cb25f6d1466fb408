"""A session's event log: sequence numbers, journal, fan-out to attached clients, replay.

Every event gets the session's next sequence number. Events worth keeping go to
the journal (SQLite); progress events are live only: they can be many (a command
printing gigabytes) and everything they carry also reaches the call's result or
the task's output file.

A subscriber has a bounded queue. One that falls behind never slows the session:
its queue stops taking events, and when it drains it receives a Gap and the
journaled events it missed, then follows live again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from agentd.store import Store

# Kinds that are not journaled.
LIVE_ONLY = frozenset({"progress"})


@dataclass(frozen=True, slots=True)
class Event:
    seq: int
    session_id: str
    time_ms: int
    kind: str
    payload: dict[str, Any]


@dataclass(eq=False)
class _Subscriber:
    queue: asyncio.Queue[Event]
    # The seq of the first event this subscriber lost, while it is behind.
    lost_from: int | None = None
    last_seq: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class EventLog:
    def __init__(self, session_id: str, store: Store, queue_size: int = 1024) -> None:
        self.session_id = session_id
        self._store = store
        self._seq = store.last_seq(session_id)
        # When the session last did anything (progress included), for idle-session gc.
        self.last_time_ms = store.last_event_ms(session_id)
        self._subscribers: set[_Subscriber] = set()
        self._queue_size = queue_size
        self.closed = False

    @property
    def last_seq(self) -> int:
        return self._seq

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def emit(self, kind: str, **payload: Any) -> Event:
        self._seq += 1
        event = Event(self._seq, self.session_id, int(time.time() * 1000), kind, payload)
        self.last_time_ms = event.time_ms
        if kind not in LIVE_ONLY:
            self._store.append_event(self.session_id, event.seq, event.time_ms, kind, payload)
        for sub in self._subscribers:
            if sub.lost_from is not None:
                continue
            try:
                sub.queue.put_nowait(event)
            except asyncio.QueueFull:
                sub.lost_from = event.seq
                sub.wake.set()
        return event

    def close(self) -> None:
        """No more events: live subscribers finish after what they have."""
        self.closed = True
        for sub in self._subscribers:
            sub.wake.set()

    async def subscribe(self, after_seq: int = 0) -> AsyncIterator[Event]:
        """Journaled events after `after_seq`, then live ones, until the log closes."""
        sub = _Subscriber(asyncio.Queue(self._queue_size))
        # Register before replaying so nothing emitted meanwhile is missed.
        self._subscribers.add(sub)
        replay_to = self._seq
        try:
            sub.last_seq = after_seq
            for event in self._journal(after_seq, replay_to):
                sub.last_seq = event.seq
                yield event
            sub.last_seq = max(sub.last_seq, replay_to)
            while True:
                if sub.queue.empty():
                    if sub.lost_from is not None:
                        async for event in self._catch_up(sub):
                            yield event
                        continue
                    if self.closed:
                        return
                    sub.wake.clear()
                    getter = asyncio.ensure_future(sub.queue.get())
                    waker = asyncio.ensure_future(sub.wake.wait())
                    try:
                        await asyncio.wait({getter, waker}, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        # Also when the subscriber goes away (a cancelled Attach): a task
                        # left pending is reported as destroyed when it is collected.
                        waker.cancel()
                        if not getter.done():
                            getter.cancel()
                    if not getter.done() or getter.cancelled():
                        continue
                    event = getter.result()
                else:
                    event = sub.queue.get_nowait()
                if event.seq <= sub.last_seq:
                    continue
                sub.last_seq = event.seq
                yield event
        finally:
            self._subscribers.discard(sub)

    async def _catch_up(self, sub: _Subscriber) -> AsyncIterator[Event]:
        lost_to = self._seq
        lost_from = sub.lost_from
        assert lost_from is not None
        yield Event(
            0,
            self.session_id,
            int(time.time() * 1000),
            "gap",
            {"from_seq": lost_from, "to_seq": lost_to},
        )
        sub.lost_from = None
        for event in self._journal(sub.last_seq, lost_to):
            sub.last_seq = event.seq
            yield event
        sub.last_seq = max(sub.last_seq, lost_to)

    def _journal(self, after_seq: int, up_to: int) -> list[Event]:
        return [
            Event(seq, self.session_id, time_ms, kind, payload)
            for seq, time_ms, kind, payload in self._store.events_after(
                self.session_id, after_seq, up_to
            )
        ]
