"""What serving many followers of one output costs the daemon: one read per chunk, and a
bounded share of the machine while the command still writes.

Followers of a running command all want the same bytes at about the same time. A
chunk is read from the file once and handed to every reader at that offset: readers
that arrive while it is being read wait for that read, later ones find it among the
recent chunks (a cache bounded in bytes for the whole daemon). A chunk in the page
cache (the usual case: it was just written) is read on the event loop with
RWF_NOWAIT, which never blocks; one that is not is read on a thread.
An output's bytes never change once written (its file is append-only), so a chunk
read once is right for everyone.

While the command runs, the bytes followers are sent come out of a budget shared by
every live follow of the daemon (`LIVE_RATE` per second, bursts of `LIVE_BURST`): the
file is the buffer, so a command that prints faster than that is not slowed by its
followers, who fall behind and catch up at full speed once it ends. A person following
a build's log reads far less than `LIVE_RATE`, so for them nothing changes.

A chunk is also encoded for the wire once (EncodedChunks) and sent as those bytes to
each follower: per follower the daemon copies it only into gRPC and the socket.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from agentd_client.v1 import agentd_pb2 as pb

# Bytes per chunk a reader is sent; chunk boundaries are multiples of it, so readers
# that follow from anywhere meet on the same chunks after their first.
CHUNK = 256 * 1024
# Recent chunks kept for readers that come a little later, in bytes for the daemon.
CACHE_BYTES = 8 * CHUNK
# Bytes per second (and per burst) all live follows of the daemon are sent in total.
LIVE_RATE = 32 << 20
LIVE_BURST = 1 << 20
# At most this long a paced reader sleeps before it looks whether the command ended.
PACE_STEP = 0.05

Key = tuple[str, str]  # (session id, output id)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of an output as a reader is sent it; `done`: the output ended there."""

    offset: int
    data: bytes
    output_id: str
    done: bool


class ChunkCache:
    """Chunks of output files by (output, offset): read once, shared by every reader."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self._max = max_bytes
        self._bytes = 0
        self._recent: OrderedDict[tuple[Key, int], bytes] = OrderedDict()
        self._reading: dict[tuple[Key, int], asyncio.Future[bytes]] = {}

    async def read(self, key: Key, fd: int, offset: int, size: int) -> bytes:
        """The bytes from `offset` to the next chunk boundary or `size`, whichever comes
        first (or fewer, as another reader read them when the file was shorter)."""
        end = min((offset // CHUNK + 1) * CHUNK, size)
        at = (key, offset)
        data = self._recent.get(at)
        if data is not None and offset + len(data) >= end:
            self._recent.move_to_end(at)
            return data
        pending = self._reading.get(at)
        if pending is not None:
            # Shared: one reader going away must not cancel the read for the others.
            return await asyncio.shield(pending)
        data = _read_cached(fd, end - offset, offset)
        if data is None:
            loop = asyncio.get_running_loop()
            fut = loop.run_in_executor(None, os.pread, fd, end - offset, offset)
            self._reading[at] = fut
            try:
                data = await asyncio.shield(fut)
            finally:
                self._reading.pop(at, None)
        self._keep(at, data)
        return data

    def _keep(self, at: tuple[Key, int], data: bytes) -> None:
        if not data:
            return
        old = self._recent.pop(at, None)
        if old is not None:
            self._bytes -= len(old)
        self._recent[at] = data
        self._bytes += len(data)
        while self._bytes > self._max and len(self._recent) > 1:
            _, dropped = self._recent.popitem(last=False)
            self._bytes -= len(dropped)


def _read_cached(fd: int, n: int, offset: int) -> bytes | None:
    """The bytes if they are all in the page cache (read without blocking), else None."""
    buf = bytearray(n)
    try:
        got = os.preadv(fd, [buf], offset, os.RWF_NOWAIT)
    except OSError:  # EAGAIN: not cached; EOPNOTSUPP: this file system cannot say
        return None
    if got < n:
        return None  # partly cached, or a short read: the thread reads it whole
    return bytes(buf)


class Pacer:
    """A token bucket in bytes: `take(n)` returns once n bytes fit the rate, or at once
    when `ended()` says the command is done (its followers are no longer paced)."""

    def __init__(self, rate: float = LIVE_RATE, burst: int = LIVE_BURST) -> None:
        self._rate = rate
        self._burst = burst
        self._tokens = float(burst)
        self._at = time.monotonic()

    async def take(self, n: int, ended: Callable[[], bool]) -> None:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        # Into debt, so readers waiting at once are served one after the other.
        self._tokens -= n
        if self._tokens >= 0:
            return
        deadline = now + -self._tokens / self._rate
        while not ended():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(PACE_STEP, left))
        # Ended before its turn: what it did not wait for goes back to the others.
        left = max(0.0, deadline - time.monotonic())
        self._tokens += min(n, left * self._rate)


class EncodedChunks:
    """Output chunks as sent, encoded once for every follower at that offset (the file
    is append-only, so the bytes at an offset never change); the last few only."""

    def __init__(self, keep: int = 16) -> None:
        self._keep = keep
        self._recent: OrderedDict[tuple[str, str, int, int], bytes] = OrderedDict()

    def get(self, session_id: str, chunk: Chunk) -> bytes:
        if not chunk.data:  # the end, or nothing new: small, and `done` differs
            return pb.OutputChunk(
                offset=chunk.offset, output_id=chunk.output_id, done=chunk.done
            ).SerializeToString()
        key = (session_id, chunk.output_id, chunk.offset, len(chunk.data))
        wire = self._recent.get(key)
        if wire is None:
            wire = pb.OutputChunk(
                offset=chunk.offset, data=chunk.data, output_id=chunk.output_id
            ).SerializeToString()
            self._recent[key] = wire
            if len(self._recent) > self._keep:
                self._recent.popitem(last=False)
        else:
            self._recent.move_to_end(key)
        return wire
