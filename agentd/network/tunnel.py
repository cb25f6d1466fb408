"""A tunnel's bytes, both ways, once a connection was decided and connected.

The client's and the upstream's transports are moved from their streams (used for the
handshake) to a pair of protocols that write what one side receives to the other at
once, with back-pressure: no await per chunk, so a download runs at the loop's speed."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from typing import cast

from agentd.foundation import metrics
from agentd.network.connection import Decider, Streams
from agentd.network.splice import splice_both

# Bytes queued for one side before the other side stops being read.
HIGH_WATER = 4 * 1024 * 1024


class _Half(asyncio.Protocol):
    """One side of a tunnel: what it receives is written to the other side at once;
    when the other side's buffer is full, this side stops being read until it drains."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Half | None = None
        self.count = 0
        self.done = done
        self.closed = False
        self.eof = False

    def data_received(self, data: bytes) -> None:
        assert self.peer is not None and self.peer.transport is not None
        self.count += len(data)
        self.peer.transport.write(data)

    def eof_received(self) -> bool:
        self.eof = True
        peer = self.peer
        if peer is None or peer.transport is None:
            return False
        if peer.eof:
            # Both directions ended: close both (close() sends what is buffered first).
            peer.transport.close()
            return False
        if peer.transport.can_write_eof():
            peer.transport.write_eof()
        return True  # half-closed: the other direction goes on

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()
        if (self.peer is None or self.peer.closed) and not self.done.done():
            self.done.set_result(None)


def _take_over(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, half: _Half) -> bytes:
    """Move a stream's transport to `half`; the bytes its reader had buffered beyond
    what the handshake read (a request body, an eager TLS hello) are returned."""
    # asyncio's or uvloop's (whose transports do not derive from asyncio.Transport).
    transport = cast(asyncio.Transport, writer.transport)
    # StreamReader keeps them in its (private) buffer; nothing else can hand them over.
    buffer: bytearray = vars(reader)["_buffer"]
    leftover = bytes(buffer)
    buffer.clear()
    half.transport = transport
    transport.set_protocol(half)
    transport.set_write_buffer_limits(high=HIGH_WATER)
    return leftover


def _detach(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[int, bytes, bool]:
    """The stream's socket as a descriptor of our own (non-blocking), the bytes its
    reader had buffered, and whether it had ended; the transport is dropped (closing
    its descriptor, not the connection: ours still holds it)."""
    sock = writer.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
        raise OSError(errno.ENOTSOCK, "not a socket transport")
    fd = os.dup(sock.fileno())
    os.set_blocking(fd, False)
    buffer: bytearray = vars(reader)["_buffer"]  # see _take_over
    early = bytes(buffer)
    buffer.clear()
    eof = reader.at_eof()
    writer.transport.abort()
    return fd, early, eof


async def relay(client: Streams, upstream: Streams, decider: Decider) -> None:
    """Bytes both ways until both sides are done: by splice(2) where it can (the kernel
    moves them), else by protocols on the loop."""
    if hasattr(os, "splice") and not client[1].transport.is_closing():
        metrics.NETWORK_OPEN.inc()
        fds: list[int] = []
        try:
            a, early_a, eof_a = _detach(*client)
            fds.append(a)
            b, early_b, eof_b = _detach(*upstream)
            fds.append(b)
            sent, received = await splice_both(a, b, early_a, early_b, eof_a, eof_b)
            decider.carried(sent, received)
            return
        except OSError:
            if len(fds) < 2:
                raise  # nothing was moved yet, but a transport is already gone: give up
            return
        finally:
            metrics.NETWORK_OPEN.dec()
            for fd in fds:
                os.close(fd)
    await _relay_protocols(client, upstream, decider)


async def _relay_protocols(client: Streams, upstream: Streams, decider: Decider) -> None:
    """Bytes both ways, zero-await (each side's data written to the other as it comes,
    with back-pressure), until both sides are closed."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    near, far = _Half(done), _Half(done)
    near.peer, far.peer = far, near
    metrics.NETWORK_OPEN.inc()
    try:
        early_near = _take_over(client[0], client[1], near)
        early_far = _take_over(upstream[0], upstream[1], far)
        if early_near:
            near.data_received(early_near)
        if early_far:
            far.data_received(early_far)
        for half, reader in ((near, client[0]), (far, upstream[0])):
            assert half.transport is not None
            if reader.at_eof():
                half.eof_received()
            if half.transport.is_closing():
                half.connection_lost(None)
            elif not half.transport.is_reading():
                half.transport.resume_reading()
        await done
    finally:
        metrics.NETWORK_OPEN.dec()
        for half in (near, far):
            if half.transport is not None:
                half.transport.close()
        decider.carried(near.count, far.count)
