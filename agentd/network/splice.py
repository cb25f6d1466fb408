"""A tunnel's bytes moved by the kernel: splice(2) from one socket into a pipe and from
the pipe into the other socket, never through Python's memory. Each direction is a
small state machine on the loop's readiness callbacks: read while the pipe has room,
write while the other socket takes it, stop reading when it does not (back-pressure).
Linux only; tunnel.py falls back to protocols where it cannot start."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import socket
from typing import Any

F_SETPIPE_SZ = 1031
PIPE_BYTES = 1 << 20
_FLAGS = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)
_AGAIN = (errno.EAGAIN, errno.EWOULDBLOCK)


class _Direction:
    """src -> pipe -> dst."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        src: int,
        dst: int,
        early: bytes,
        eof: bool,
        finished: asyncio.Future[None],
        fail: asyncio.Future[None],
    ) -> None:
        self.loop, self.src, self.dst = loop, src, dst
        self.pipe_r, self.pipe_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        with contextlib.suppress(OSError):
            fcntl.fcntl(self.pipe_w, F_SETPIPE_SZ, PIPE_BYTES)
        self.in_pipe = 0
        self.count = 0
        self.eof = eof
        self.reading = False
        self.writing = False
        self.finished, self.fail = finished, fail
        if early:
            written = os.write(self.pipe_w, early)  # raises if the pipe cannot hold it
            if written != len(early):
                raise OSError(errno.ENOBUFS, "early bytes larger than the pipe")
            self.in_pipe = self.count = len(early)

    def start(self) -> None:
        self._flush()

    def _read(self) -> None:
        try:
            n = os.splice(self.src, self.pipe_w, PIPE_BYTES, flags=_FLAGS)
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno in _AGAIN:
                return
            self._failed(exc)
            return
        if n == 0:
            self.eof = True
            self._stop_reading()
        self.in_pipe += n
        self.count += n
        self._flush()

    def _flush(self) -> None:
        while self.in_pipe:
            try:
                n = os.splice(self.pipe_r, self.dst, self.in_pipe, flags=_FLAGS)
            except BlockingIOError:
                n = -1
            except OSError as exc:
                if exc.errno not in _AGAIN:
                    self._failed(exc)
                    return
                n = -1
            if n < 0:
                # The other side is full: wait until it takes more; read no more meanwhile.
                self._stop_reading()
                if not self.writing:
                    self.loop.add_writer(self.dst, self._flush)
                    self.writing = True
                return
            self.in_pipe -= n
        if self.writing:
            self.loop.remove_writer(self.dst)
            self.writing = False
        if self.eof:
            with contextlib.suppress(OSError), socket.socket(fileno=os.dup(self.dst)) as dst:
                dst.shutdown(socket.SHUT_WR)
            self._stop_reading()
            if not self.finished.done():
                self.finished.set_result(None)
        elif not self.reading:
            self.loop.add_reader(self.src, self._read)
            self.reading = True

    def _stop_reading(self) -> None:
        if self.reading:
            self.loop.remove_reader(self.src)
            self.reading = False

    def _failed(self, exc: OSError) -> None:
        if not self.fail.done():
            self.fail.set_exception(exc)

    def close(self) -> None:
        self._stop_reading()
        if self.writing:
            self.loop.remove_writer(self.dst)
            self.writing = False
        for fd in (self.pipe_r, self.pipe_w):
            os.close(fd)


async def splice_both(
    a: int, b: int, early_a: bytes, early_b: bytes, eof_a: bool, eof_b: bool
) -> tuple[int, int]:
    """Move bytes between the connected sockets `a` and `b` (non-blocking descriptors the
    caller owns) until both directions ended or one failed: (a->b bytes, b->a bytes).
    `early_*`: bytes already read from that side; `eof_*`: that side already ended."""
    loop = asyncio.get_running_loop()
    fail: asyncio.Future[None] = loop.create_future()
    ends = [loop.create_future(), loop.create_future()]
    there = _Direction(loop, a, b, early_a, eof_a, ends[0], fail)
    try:
        back = _Direction(loop, b, a, early_b, eof_b, ends[1], fail)
    except BaseException:
        there.close()
        raise
    try:
        there.start()
        back.start()
        both = asyncio.gather(*ends)
        waiters: set[asyncio.Future[Any]] = {both, fail}
        done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if both not in done:
            both.cancel()
    finally:
        there.close()
        back.close()
    return there.count, back.count
