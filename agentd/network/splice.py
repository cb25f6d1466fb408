"""A tunnel's bytes moved by the kernel: splice(2) from one socket into a pipe and from
the pipe into the other socket, never through Python's memory. Each direction is a
small state machine on readiness callbacks: read while the pipe has room, write while
the other socket takes it, stop reading when it does not (back-pressure).

The two sockets are watched by an epoll of the tunnel's own (`_Poller`), which the
loop watches as one readable descriptor: the loop never polls the sockets themselves.
A reset is an error event on its socket, and libuv (uvloop) answers one by silently
ending its watch: the tunnel would never learn of it and its client would hang. Here
an error is a readiness like any other, and ends the tunnel at once.
Linux only; tunnel.py falls back to protocols where it cannot start."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import select
import socket
from collections.abc import Callable

F_SETPIPE_SZ = 1031
PIPE_BYTES = 1 << 20
_FLAGS = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)
_AGAIN = (errno.EAGAIN, errno.EWOULDBLOCK)


class _Outcome:
    """How a tunnel ended: both directions done, or the first failure."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.future: asyncio.Future[None] = loop.create_future()
        self.ended = 0

    def end(self) -> None:
        self.ended += 1
        if self.ended == 2 and not self.future.done():
            self.future.set_result(None)

    def fail(self, exc: OSError) -> None:
        if not self.future.done():
            self.future.set_exception(exc)


class _Poller:
    """add_reader/add_writer for the tunnel's sockets, through an epoll of its own (see
    the module's note)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, outcome: _Outcome) -> None:
        self.loop, self.outcome = loop, outcome
        self.epoll = select.epoll()
        self.readers: dict[int, Callable[[], None]] = {}
        self.writers: dict[int, Callable[[], None]] = {}
        self.masks: dict[int, int] = {}
        loop.add_reader(self.epoll.fileno(), self._ready)

    def _update(self, fd: int) -> None:
        mask = (select.EPOLLIN if fd in self.readers else 0) | (
            select.EPOLLOUT if fd in self.writers else 0
        )
        old = self.masks.get(fd, 0)
        if mask == old:
            return
        if not mask:
            self.epoll.unregister(fd)
            del self.masks[fd]
        elif not old:
            self.epoll.register(fd, mask)
            self.masks[fd] = mask
        else:
            self.epoll.modify(fd, mask)
            self.masks[fd] = mask

    def add_reader(self, fd: int, callback: Callable[[], None]) -> None:
        self.readers[fd] = callback
        self._update(fd)

    def remove_reader(self, fd: int) -> None:
        self.readers.pop(fd, None)
        self._update(fd)

    def add_writer(self, fd: int, callback: Callable[[], None]) -> None:
        self.writers[fd] = callback
        self._update(fd)

    def remove_writer(self, fd: int) -> None:
        self.writers.pop(fd, None)
        self._update(fd)

    def _ready(self) -> None:
        for fd, events in self.epoll.poll(0):
            if events & select.EPOLLERR:
                if read := self.readers.get(fd):
                    read()  # what arrived before the error first; the read then fails
                    continue
                with socket.socket(fileno=os.dup(fd)) as sock:
                    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                self.outcome.fail(OSError(code or errno.EIO, os.strerror(code or errno.EIO)))
                continue
            if events & (select.EPOLLIN | select.EPOLLHUP) and (read := self.readers.get(fd)):
                read()
            if events & (select.EPOLLOUT | select.EPOLLHUP) and (write := self.writers.get(fd)):
                write()

    def close(self) -> None:
        self.loop.remove_reader(self.epoll.fileno())
        self.epoll.close()


class _Direction:
    """src -> pipe -> dst."""

    def __init__(
        self, poller: _Poller, src: int, dst: int, early: bytes, eof: bool, outcome: _Outcome
    ) -> None:
        self.poller, self.src, self.dst = poller, src, dst
        self.pipe_r, self.pipe_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        with contextlib.suppress(OSError):
            fcntl.fcntl(self.pipe_w, F_SETPIPE_SZ, PIPE_BYTES)
        self.in_pipe = 0
        self.count = 0
        self.eof = eof
        self.reading = False
        self.writing = False
        self.ended = False
        self.outcome = outcome
        if early:
            written = os.write(self.pipe_w, early)  # raises if the pipe cannot hold it
            if written != len(early):
                self.close()
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
            self.outcome.fail(exc)
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
                    self.outcome.fail(exc)
                    return
                n = -1
            if n < 0:
                # The other side is full: wait until it takes more; read no more meanwhile.
                self._stop_reading()
                if not self.writing:
                    self.poller.add_writer(self.dst, self._flush)
                    self.writing = True
                return
            self.in_pipe -= n
        if self.writing:
            self.poller.remove_writer(self.dst)
            self.writing = False
        if self.eof:
            with contextlib.suppress(OSError), socket.socket(fileno=os.dup(self.dst)) as dst:
                dst.shutdown(socket.SHUT_WR)
            self._stop_reading()
            if not self.ended:
                self.ended = True
                self.outcome.end()
        elif not self.reading:
            self.poller.add_reader(self.src, self._read)
            self.reading = True

    def _stop_reading(self) -> None:
        if self.reading:
            self.poller.remove_reader(self.src)
            self.reading = False

    def close(self) -> None:
        self._stop_reading()
        if self.writing:
            self.poller.remove_writer(self.dst)
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
    outcome = _Outcome(loop)
    poller = _Poller(loop, outcome)
    directions: list[_Direction] = []
    try:
        directions.append(_Direction(poller, a, b, early_a, eof_a, outcome))
        directions.append(_Direction(poller, b, a, early_b, eof_b, outcome))
        for direction in directions:
            direction.start()
        with contextlib.suppress(OSError):
            await outcome.future  # a failure (a reset) ends the tunnel: both sides close
    finally:
        for direction in directions:
            direction.close()
        poller.close()
        if outcome.future.done() and not outcome.future.cancelled():
            outcome.future.exception()  # retrieved: a failure is how a tunnel may end
    return directions[0].count, directions[1].count
