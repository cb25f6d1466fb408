"""A session's event log: sequence numbers, journal, fan-out to attached clients, replay.

Every event worth keeping gets the session's next sequence number and goes to the
journal (SQLite), so the numbers a person sees run without holes and resuming after
any of them replays exactly what followed. Progress events (and an agent's streamed
text) are live only: they can be many, and they say only where a command's output
file stands (its bytes are read from the file). They take no number of their own:
they carry the seq of the last journaled event, the point to resume after.

What an attached client costs the daemon is bounded whatever the journal's size:
replay reads the journal a page at a time on another thread, as the client takes
it; live events wait in a backlog bounded in bytes. A client whose backlog is full
loses it (the memory is freed at once); when it reads again it receives a Gap and
the journaled events it missed, paged from the store, then follows live again.

Replay is background work: however many clients replay at once, the event loop runs
at most one replayed event (its conversion and send, by the caller) per turn of the
loop, so a call another client makes meanwhile waits for one event, not one each.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import weakref
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agentd.foundation.errors import StorageFull
from agentd.sessions import event_types, journal
from agentd.sessions.event_types import EventBody
from agentd.sessions.store import Store
from agentd_client.core.structs import EncodedDict

# A subscriber's live backlog, in bytes of payload, before it is dropped for a Gap.
BACKLOG_BYTES = 1 << 20
# One page of replay, in bytes of payload (at least one event).
PAGE_BYTES = 256 * 1024


class _Lane:
    """Turns taken one per iteration of the event loop, in the order asked."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._scheduled = False

    async def turn(self) -> None:
        fut = self._loop.create_future()
        self._waiters.append(fut)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._grant)
        await fut

    def _grant(self) -> None:
        # Runs once per loop iteration (call_soon from a callback runs in the next one).
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                break
        self._scheduled = bool(self._waiters)
        if self._scheduled:
            self._loop.call_soon(self._grant)


class Replay:
    """How every session's journal is read back: its pages in two threads of their own
    (never on the event loop), its events handed out one per turn of the loop so a long
    replay does not hold up live calls. One per daemon, made with its SessionManager."""

    def __init__(self) -> None:
        self.readers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="journal")
        self._lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Lane] = (
            weakref.WeakKeyDictionary()
        )

    def lane(self) -> _Lane:
        """The running loop's lane (turns taken one per iteration)."""
        loop = asyncio.get_running_loop()
        lane = self._lanes.get(loop)
        if lane is None:
            lane = self._lanes[loop] = _Lane(loop)
        return lane


def _has_encoded(value: dict[Any, Any]) -> bool:
    return any(
        type(v) is EncodedDict or (type(v) is dict and _has_encoded(v)) for v in value.values()
    )


def json_text(value: Any) -> str:
    """json.dumps(value), the same text, with the text of parts encoded beforehand (an
    EncodedDict, made in a worker process: a large Write's data) copied, not encoded again
    on the event loop. Only dicts are looked into for them, as a result nests its data."""
    if type(value) is EncodedDict:
        return value.json
    if type(value) is dict and all(type(k) is str for k in value) and _has_encoded(value):
        items = ", ".join(f"{json.dumps(k)}: {json_text(v)}" for k, v in value.items())
        return "{" + items + "}"
    return json.dumps(value)


@dataclass(frozen=True, slots=True)
class Event:
    seq: int
    session_id: str
    time_ms: int
    body: EventBody
    size: int = 0  # bytes of payload as JSON, for backlog accounting

    @property
    def kind(self) -> str:
        """The journal's name for it."""
        return event_types.journal_kind(self.body)

    @property
    def payload(self) -> dict[str, Any]:
        """Its fields as the journal holds them (JSON-able)."""
        return journal.encode(self.body)[1]


@dataclass(eq=False)
class _Subscriber:
    backlog: deque[Event] = field(default_factory=deque)
    bytes: int = 0
    # The seq of the first event this subscriber lost, while it is behind.
    lost_from: int | None = None
    last_seq: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class EventLog:
    def __init__(
        self, session_id: str, store: Store, replay: Replay, backlog_bytes: int = BACKLOG_BYTES
    ) -> None:
        self.session_id = session_id
        self._store = store
        self._replay = replay
        self._seq = store.last_seq(session_id)
        # When the session last did anything (progress included), for idle-session gc.
        self.last_time_ms = store.last_event_ms(session_id)
        self._subscribers: set[_Subscriber] = set()
        self._backlog_bytes = backlog_bytes
        self.closed = False

    @property
    def last_seq(self) -> int:
        return self._seq

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def emit(self, body: EventBody) -> Event:
        live = event_types.live_only(body)
        if not live:
            self._seq += 1
        kind, payload = journal.encode(body)
        text = json_text(payload)
        event = Event(self._seq, self.session_id, int(time.time() * 1000), body, len(text))
        self.last_time_ms = event.time_ms
        if not live:
            try:
                self._store.append_event(
                    self.session_id, event.seq, event.time_ms, kind, text, journal.VERSION
                )
            except StorageFull:
                # The state disk is full: live subscribers still get it; the journal
                # has a hole (counted, logged by the store). Calls that change
                # something are refused meanwhile (Executor), so nothing goes unrecorded.
                self._store.unjournaled += 1
        for sub in self._subscribers:
            if sub.lost_from is not None:
                continue
            if sub.bytes + event.size > self._backlog_bytes and sub.backlog:
                # Behind: drop what it has not taken; the journal has the rest.
                sub.lost_from = sub.last_seq + 1
                sub.backlog.clear()
                sub.bytes = 0
            else:
                sub.backlog.append(event)
                sub.bytes += event.size
            sub.wake.set()
        return event

    def close(self) -> None:
        """No more events: live subscribers finish after what they have."""
        self.closed = True
        for sub in self._subscribers:
            sub.wake.set()

    async def subscribe(
        self, after_seq: int = 0, registered: Callable[[], Awaitable[None]] | None = None
    ) -> AsyncGenerator[Event, None]:
        """Journaled events after `after_seq`, then live ones, until the log closes.
        `registered` is awaited once the subscriber is counted: from then on it misses
        nothing emitted, and asks find it among the session's listeners."""
        sub = _Subscriber(last_seq=after_seq)
        # Register before replaying so nothing emitted meanwhile is missed.
        self._subscribers.add(sub)
        try:
            if registered is not None:
                await registered()
            async for event in self._journal(sub, self._seq):
                yield event
            while True:
                if sub.lost_from is not None:
                    async for event in self._catch_up(sub):
                        yield event
                    continue
                if not sub.backlog:
                    if self.closed:
                        return
                    sub.wake.clear()
                    await sub.wake.wait()
                    continue
                event = sub.backlog.popleft()
                sub.bytes -= event.size
                if event_types.live_only(event.body):
                    # Live only: emitted after this subscriber registered, so new to it.
                    if event.seq >= sub.last_seq:
                        yield event
                    continue
                if event.seq <= sub.last_seq:
                    continue
                sub.last_seq = event.seq
                yield event
        finally:
            self._subscribers.discard(sub)

    async def replay(self, after_seq: int = 0) -> AsyncGenerator[Event, None]:
        """The journaled events after `after_seq` up to the latest now; nothing live."""
        async for event in self._journal(_Subscriber(last_seq=after_seq), self._seq):
            yield event

    async def _catch_up(self, sub: _Subscriber) -> AsyncIterator[Event]:
        lost_to = self._seq
        lost_from = sub.lost_from
        assert lost_from is not None
        sub.lost_from = None  # from here on it takes live events again
        # Only live events lost (nothing journaled since): the gap names the last one.
        gap = event_types.Gap(from_seq=min(lost_from, lost_to), to_seq=lost_to)
        yield Event(0, self.session_id, int(time.time() * 1000), gap)
        async for event in self._journal(sub, lost_to):
            yield event

    async def _journal(self, sub: _Subscriber, up_to: int) -> AsyncIterator[Event]:
        """The journal after sub.last_seq up to `up_to`, a page at a time, read off the loop."""
        loop = asyncio.get_running_loop()
        lane = self._replay.lane()
        while sub.last_seq < up_to:
            if self._store.dirty:
                # The readers' connections see committed rows only. On a full disk the
                # replay goes on with what is committed: reading needs no space.
                with contextlib.suppress(StorageFull):
                    self._store.flush()
            page = await loop.run_in_executor(self._replay.readers, self._page, sub.last_seq, up_to)
            if not page:
                break
            for seq, event in page:
                await lane.turn()
                sub.last_seq = seq
                if event is not None:
                    yield event
        sub.last_seq = max(sub.last_seq, up_to)

    def _page(self, after_seq: int, up_to: int) -> list[tuple[int, Event | None]]:
        """A page of the journal, read as events (on a reader thread): (seq, event) each,
        the event None where a row cannot be read (journal.decode logs it)."""
        out: list[tuple[int, Event | None]] = []
        rows = self._store.events_page(self.session_id, after_seq, up_to, PAGE_BYTES)
        for seq, time_ms, kind, payload, size, version in rows:
            body = journal.decode(kind, payload, version)
            event = None if body is None else Event(seq, self.session_id, time_ms, body, size)
            out.append((seq, event))
        return out
