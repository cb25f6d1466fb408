"""A multiplexed forward's frames on the daemon's terminal socket, off gRPC: both ends.

OpenForward gives a one-time token; the client connects to the terminal socket, sends
HELLO with it (terminal_wire.py's framing) and waits for READY (or REFUSED with a
reason). Then each side sends FRAMES: a socket frame whose payload is a batch of
ForwardMux's frames encoded as in a ForwardMuxRequest/Response (forward_wire.py: id,
open/opened/data/eof/close/window), with ForwardMux's credit, caps and resets
(forward_mux.py), so a batch costs one write and one read, not a gRPC message through
two Python layers. Any other kind after READY ends the connection.

`open_socket` answers None when the socket is not offered (an older daemon, one reached
over TCP, a socket this process cannot reach): the caller uses ForwardMux.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from typing import Any, cast

import grpc

from agentd_client.core import terminal_wire as wire
from agentd_client.core.forward_mux import MAX_DATA, MESSAGE_BYTES
from agentd_client.v1 import agentd_pb2 as pb

# The socket frame of a batch of forward frames, both ways.
FRAMES = 32
# Bytes of frames a FRAMES batch carries about at most (an Outbox's message_bytes): most
# batches then arrive in one read, and are read as views of it.
BATCH_BYTES = 128 * 1024
# The longest FRAMES payload a side takes: a gRPC message's worth (MESSAGE_BYTES,
# overrun by one frame).
MAX_FRAMES_PAYLOAD = MESSAGE_BYTES + MAX_DATA + 1024
# Bytes the socket's buffer holds before the writer waits.
WRITE_HIGH = 2 * MESSAGE_BYTES
# A batch this small is joined to its header (one write); a larger one is not copied.
JOIN_BELOW = 64 * 1024


def frames_header(size: int) -> bytes:
    return wire.HEADER.pack(FRAMES, size)


class FrameViews:
    """Frames out of a byte stream as (kind, view of the payload). A frame whole in one
    read is a view of that read; one that straddles reads is copied once, into a buffer
    of its own size. A frame longer than `limit` is a wire.FrameError."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._head = bytearray()  # a header begun in an earlier read
        self._body: bytearray | None = None  # a payload begun in an earlier read
        self._kind = 0
        self._filled = 0

    def feed(self, data: bytes) -> list[tuple[int, memoryview]]:
        view = memoryview(data)
        frames: list[tuple[int, memoryview]] = []
        at, end, head = 0, len(data), wire.HEADER.size
        if self._body is not None:
            at = self._fill(view, 0, frames)
            if self._body is not None:
                return frames
        if self._head:
            take = min(head - len(self._head), end - at)
            self._head += view[at : at + take]
            at += take
            if len(self._head) < head:
                return frames
            kind, size = wire.HEADER.unpack(self._head)
            self._head.clear()
            at = self._begin(kind, size, view, at, frames)
        while at < end:
            if end - at < head:
                self._head += view[at:]
                break
            kind, size = wire.HEADER.unpack_from(data, at)
            at = self._begin(kind, size, view, at + head, frames)
        return frames

    def _begin(
        self, kind: int, size: int, view: memoryview, at: int, frames: list[tuple[int, memoryview]]
    ) -> int:
        """A frame whose payload starts at `at`: taken whole, or begun; where it ends."""
        if size > self.limit:
            raise wire.FrameError(f"a frame of {size} bytes (at most {self.limit})")
        if len(view) - at >= size:
            frames.append((kind, view[at : at + size]))
            return at + size
        self._kind, self._body, self._filled = kind, bytearray(size), 0
        return self._fill(view, at, frames)

    def _fill(self, view: memoryview, at: int, frames: list[tuple[int, memoryview]]) -> int:
        """The begun payload filled from `view` at `at`, appended to `frames` once whole."""
        body = self._body
        assert body is not None
        take = min(len(body) - self._filled, len(view) - at)
        body[self._filled : self._filled + take] = view[at : at + take]
        self._filled += take
        if self._filled == len(body):
            frames.append((self._kind, memoryview(body)))
            self._body = None
        return at + take


class Writer:
    """Batches to a socket's transport, as an Outbox's `write`: waits while the
    socket's buffer is over WRITE_HIGH (a peer that does not read)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._writable: asyncio.Future[None] | None = None

    def attach(self, transport: asyncio.BaseTransport) -> None:
        self.transport = sock = cast(asyncio.Transport, transport)
        sock.set_write_buffer_limits(high=WRITE_HIGH)

    def pause(self) -> None:
        if self._writable is None or self._writable.done():
            self._writable = asyncio.get_running_loop().create_future()

    def resume(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    async def write(self, batch: bytes) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            raise ConnectionError("the forward's socket is closed")
        if len(batch) < JOIN_BELOW:
            transport.write(frames_header(len(batch)) + batch)
        else:
            transport.writelines((frames_header(len(batch)), batch))
        if self._writable is not None and not self._writable.done():
            await self._writable


class ChannelRefused(ConnectionError):
    """The daemon refused the connection (the reason it gave)."""


class ClientSocket(asyncio.Protocol):
    """agentctl's end: READY awaited by `ready`, then each batch of frames to
    `on_frames(payload)`; `lost` is done once the connection is gone."""

    def __init__(self, on_frames: Callable[[memoryview], None]) -> None:
        self.on_frames = on_frames
        self.writer = Writer()
        self._reader = FrameViews(MAX_FRAMES_PAYLOAD)
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[None] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.writer.attach(transport)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._reader.feed(data)
        except wire.FrameError as exc:
            self._fail(ChannelRefused(str(exc)))
            return
        for kind, payload in frames:
            if kind == FRAMES and self.ready.done():
                self.on_frames(payload)
            elif kind == wire.READY and not self.ready.done():
                self.ready.set_result(None)
            elif kind == wire.REFUSED:
                self._fail(ChannelRefused(str(payload, "utf-8", "replace")))
                return

    def _fail(self, exc: Exception) -> None:
        if not self.ready.done():
            self.ready.set_exception(exc)
        if self.writer.transport is not None:
            self.writer.transport.abort()

    def pause_writing(self) -> None:
        self.writer.pause()

    def resume_writing(self) -> None:
        self.writer.resume()

    def connection_lost(self, exc: Exception | None) -> None:
        self.writer.resume()
        if not self.ready.done():
            self.ready.set_exception(ConnectionError("the daemon closed the terminal socket"))
        if not self.lost.done():
            self.lost.set_result(None)


async def open_socket(
    stub: Any,
    start: pb.ForwardMuxStart,
    on_frames: Callable[[memoryview], None],
    timeout: float,
) -> tuple[ClientSocket, pb.ForwardChannel] | None:
    """The forward's frames over the terminal socket, once READY; None when it is not
    offered or not reachable from here (then ForwardMux serves). Errors of the forward
    itself (no session, the port refused) raise as gRPC errors."""
    request = pb.OpenForwardRequest(
        session_id=start.session_id,
        port=start.port,
        host=start.host,
        forward_id=start.forward_id,
        uid=os.geteuid(),
    )
    try:
        offered = await stub.OpenForward(request, timeout=timeout)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
            return None  # a daemon from before the socket carried forwards
        raise
    if not offered.path:
        return None
    loop = asyncio.get_running_loop()
    try:
        transport, proto = await loop.create_unix_connection(
            lambda: ClientSocket(on_frames), offered.path
        )
    except OSError:
        return None
    try:
        transport.write(wire.frame(wire.HELLO, offered.token))
        async with asyncio.timeout(timeout):
            await proto.ready
    except (ConnectionError, TimeoutError):
        transport.abort()
        with contextlib.suppress(BaseException):
            await proto.ready
        return None
    return proto, offered
