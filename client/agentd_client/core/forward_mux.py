"""Both ends of a multiplexed forward (the ForwardMux RPC): many TCP connections on one
gRPC stream, each named by an id in its frames, as ssh carries channels.

Each connection is a `Link`: an asyncio protocol on its socket (the laptop's accepted
connection in agentctl, the connection to the sandbox's server in the daemon) and the
credit of both directions. A side sends a connection's data only within the credit the
other side granted (`window` frames), and grants more only once what it received was
handed to its socket's kernel buffer: a connection whose reader is slow stops its own
writer, never the stream or the other connections, and what a side holds per
connection is at most its window plus one socket read. Frames wait in an `Outbox`
that a single task writes as one message per turn of the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol, cast

from agentd_client.core.forward_wire import (
    close_frame,
    eof_frame,
    mux_data_frame,
    window_frame,
)

# Credit each connection starts with, each way (what the daemon announces in `started`).
WINDOW = 512 * 1024
# The largest data one frame may carry.
MAX_DATA = 256 * 1024
# Credit is granted back once this much was taken (fewer, larger window frames).
GRANT_AT = WINDOW // 4
# A message of the stream carries about this many bytes of frames at most.
MESSAGE_BYTES = 1024 * 1024
# Credit beyond this is a peer's error (a window that would overflow the field).
MAX_CREDIT = 1 << 31
# How long a frame nobody waits for may wait for company.
LATER_S = 0.01


class Host(Protocol):
    """What a link reports to the side that holds it."""

    outbox: Outbox

    def forget(self, link: Link, reason: str) -> None:
        """The link ended: its id is free of every frame from now on."""


class Outbox:
    """Frames waiting for the stream, written by `run` in batches: every frame queued in
    one turn of the loop goes in one message (an `open` waits a turn more for its
    connection's first bytes); credit owed is sent as it stands then."""

    def __init__(
        self, write: Callable[[bytes], Awaitable[object]], message_bytes: int = MESSAGE_BYTES
    ) -> None:
        self.write = write
        self.message_bytes = message_bytes
        self.parts: list[bytes] = []
        self.owed: dict[int, Link] = {}
        self.ready = asyncio.Event()
        self._later: asyncio.TimerHandle | None = None
        self._linger = False

    def put(self, frame: bytes) -> None:
        self.parts.append(frame)
        self.ready.set()

    def put_open(self, frame: bytes) -> None:
        """A connection's `open`: the message waits one more turn of the loop, so the
        connection's first bytes (read right behind its accept) go in it too."""
        self._linger = True
        self.put(frame)

    def put_later(self, frame: bytes) -> None:
        """A frame nobody waits for (the daemon's `opened`): it goes with the next
        frames, or within LATER_S, not in a message of its own."""
        self.parts.append(frame)
        if self._later is None:
            self._later = asyncio.get_running_loop().call_later(LATER_S, self.ready.set)

    def owe(self, link: Link) -> None:
        self.owed[link.id] = link
        self.ready.set()

    def backlog(self) -> int:
        """Frames waiting (a peer that never reads its stream grows it)."""
        return len(self.parts)

    async def run(self) -> None:
        while True:
            await self.ready.wait()
            if self._linger:
                # One more turn of the loop: what the sockets hold already (a new
                # connection's first bytes right behind its accept) joins this message.
                self._linger = False
                await asyncio.sleep(0)
            self.ready.clear()
            if self._later is not None:
                self._later.cancel()
                self._later = None
            parts, self.parts = self.parts, []
            for link in self.owed.values():
                if link.owed and not link.done:
                    parts.append(window_frame(link.id, link.owed))
                    link.allowed += link.owed
                    link.owed = 0
            self.owed.clear()
            batch: list[bytes] = []
            size = 0
            for part in parts:
                batch.append(part)
                size += len(part)
                if size >= self.message_bytes:
                    await self.write(b"".join(batch))
                    batch, size = [], 0
            if batch:
                await self.write(b"".join(batch))


class Link(asyncio.Protocol):
    """One forwarded connection: its socket, and the credit of both directions."""

    def __init__(self, host: Host, cid: int, window: int) -> None:
        self.host = host
        self.id = cid
        self.credit = window  # data this side may still send the peer
        self.allowed = window  # data the peer may still send this side
        self.owed = 0  # taken by the socket, not yet granted back
        self.held = 0  # taken from the peer, still in the transport's buffer
        self.transport: asyncio.Transport | None = None
        self.early: list[bytes | memoryview] = []  # the peer's data before the socket connected
        self.waiting = bytearray()  # read from the socket beyond the peer's credit
        self.read_eof = False  # the socket's far end wrote its last byte
        self.eof_sent = False
        self.peer_eof = False  # the peer's end wrote its last byte
        self.writing_paused = False
        self.reading_paused = False
        self.done = False
        self.to_socket = 0
        self.from_socket = 0

    # The socket's side.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A socket's transport (uvloop's is not an asyncio.Transport subclass).
        self.transport = sock = cast(asyncio.Transport, transport)
        # Told of every byte left in the buffer: credit is granted once the kernel took it.
        sock.set_write_buffer_limits(high=0)
        if self.done:
            sock.abort()
            return
        for data in self.early:
            self._write(data)
        self.early.clear()
        if self.peer_eof:
            self._write_eof()
        self._pump()

    def data_received(self, data: bytes) -> None:
        self.from_socket += len(data)
        if not self.waiting and len(data) <= self.credit and len(data) <= MAX_DATA:
            self.credit -= len(data)
            self.host.outbox.put(mux_data_frame(self.id, data))
            if not self.credit:
                self._pause_reading()
            return
        self.waiting += data
        self._pump()

    def eof_received(self) -> bool:
        self.read_eof = True
        self._pump()
        return True  # the socket stays open for what the peer still sends

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done:
            return
        if exc is not None:
            reason = f"reset: {getattr(exc, 'strerror', None) or exc}"
        elif self.eof_sent:
            reason = ""
        else:
            reason = "closed before its last bytes were sent"
        self._end(reason, tell=True)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._taken(self.held)
        self.held = 0

    # The peer's side (frames from the stream).

    def on_data(self, data: bytes | memoryview) -> None:
        if len(data) > MAX_DATA:
            self.reset(f"a data frame of {len(data)} bytes is over the limit of {MAX_DATA}")
            return
        if len(data) > self.allowed:
            self.reset(f"{len(data)} bytes sent with {self.allowed} of credit (window exceeded)")
            return
        if self.peer_eof:
            self.reset("data after eof")
            return
        self.allowed -= len(data)
        if self.transport is None:
            self.early.append(data)
            return
        self._write(data)

    def on_window(self, credit: int) -> None:
        if self.credit + credit > MAX_CREDIT:
            self.reset(f"a window of {credit} overflows the connection's credit")
            return
        self.credit += credit
        self._pump()

    def on_eof(self) -> None:
        if self.peer_eof:
            return
        self.peer_eof = True
        if self.transport is not None:
            self._write_eof()

    def on_close(self, reason: str) -> None:
        """The peer ended the connection: closed cleanly (its last bytes are written
        first) or reset (dropped)."""
        transport = self.transport
        self._end(reason, tell=False)
        if transport is not None:
            if reason:
                transport.abort()
            else:
                transport.close()

    def reset(self, reason: str) -> None:
        """This connection ends now, and the peer is told why."""
        transport = self.transport
        self._end(reason or "reset", tell=True)
        if transport is not None:
            transport.abort()

    # Inside.

    def _end(self, reason: str, tell: bool) -> None:
        if self.done:
            return
        self.done = True
        self.early.clear()
        self.waiting.clear()
        if tell:
            self.host.outbox.put(close_frame(self.id, reason))
        self.host.forget(self, reason)

    def _write(self, data: bytes | memoryview) -> None:
        assert self.transport is not None
        self.to_socket += len(data)
        self.transport.write(data)
        if self.writing_paused:
            self.held += len(data)
        else:
            self._taken(len(data))

    def _write_eof(self) -> None:
        assert self.transport is not None
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._maybe_finish()

    def _taken(self, n: int) -> None:
        self.owed += n
        if self.owed >= GRANT_AT or (self.owed and self.allowed < GRANT_AT):
            self.host.outbox.owe(self)

    def _pump(self) -> None:
        """What waits for credit goes as credit allows; reading stops while it waits."""
        if self.done:
            return
        while self.waiting and self.credit > 0:
            n = min(len(self.waiting), self.credit, MAX_DATA)
            chunk = bytes(self.waiting[:n])
            del self.waiting[:n]
            self.credit -= n
            self.host.outbox.put(mux_data_frame(self.id, chunk))
        if self.waiting or not self.credit:
            self._pause_reading()
        elif self.reading_paused and not self.read_eof:
            self.reading_paused = False
            if self.transport is not None:
                self.transport.resume_reading()
        if self.read_eof and not self.waiting and not self.eof_sent:
            self.eof_sent = True
            self.host.outbox.put(eof_frame(self.id))
            self._maybe_finish()

    def _pause_reading(self) -> None:
        if not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()

    def _maybe_finish(self) -> None:
        """Both ends wrote their last byte: the socket closes once its buffer is written,
        and the peer is told now (its `close` goes in the same message as the `eof`)."""
        if self.eof_sent and self.peer_eof and self.transport is not None and not self.done:
            transport = self.transport
            self._end("", tell=True)
            transport.close()
