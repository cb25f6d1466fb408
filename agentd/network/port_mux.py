"""The daemon's end of a multiplexed forward: the connections of one ForwardMux stream
to a port on a session's sandbox loopback.

Sockets are made by one thread that joined the session's namespace when the stream
started (a socket belongs to the namespace it was made in), so a connection costs no
thread and no setns; the connect itself runs on the loop, non-blocking. Every frame is
checked against its connection: an unknown id, data over the frame limit or over the
credit granted, a window that would overflow, each resets that connection with the
reason (a `close` frame), never the stream. Connection events reach the journal in
batches, after the connection is already carrying bytes.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from agentd.network import netns, ports
from agentd.sessions.event_types import PortForward
from agentd.sessions.events import EventLog
from agentd_client.core.forward_mux import WINDOW, Link, Outbox
from agentd_client.core.forward_wire import close_frame, opened_frame
from agentd_client.v1 import agentd_pb2 as pb

# Sockets made ahead per address family and stream, made again in one go once half are
# taken (one hop to the namespace's thread per STOCK // 2 connections, not one each).
STOCK = 16
# How long a connection over a cap waits for a place, and how often it looks.
WAIT_S = 5.0
RETRY_S = 0.02
# Journal rows wait this long to be written together.
JOURNAL_BATCH_S = 0.2
# Control frames waiting for a client that reads nothing of its stream: past this it is
# refused its stream (each unknown id it names queues one `close`).
MAX_BACKLOG = 4096


class Backlogged(Exception):
    """The client sends frames and reads none of the answers."""


class Dialer:
    """Sockets made inside a session's namespace by a thread that stays there, a few
    kept made ahead so a connection takes one without waiting for the thread."""

    def __init__(self, path: str) -> None:
        self._pool = ThreadPoolExecutor(1, "agentd-forward", netns.join, (path,))
        self._stock: dict[int, list[socket.socket]] = {socket.AF_INET: [], socket.AF_INET6: []}
        self._filling: set[int] = set()
        self._closed = False

    def warm(self, family: socket.AddressFamily) -> None:
        self._refill(family)

    async def make(self, family: socket.AddressFamily) -> socket.socket:
        stock = self._stock[family]
        if stock:
            sock = stock.pop()
            self._refill(family)
            return sock
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, _made, family)

    def _refill(self, family: socket.AddressFamily) -> None:
        stock = self._stock[family]
        if self._closed or family in self._filling or len(stock) > STOCK // 2:
            return
        self._filling.add(family)
        loop = asyncio.get_running_loop()
        made = loop.run_in_executor(self._pool, _made_many, family, STOCK - len(stock))

        def done(future: asyncio.Future[list[socket.socket]]) -> None:
            self._filling.discard(family)
            if future.cancelled() or future.exception() is not None:
                return
            if self._closed:
                for sock in future.result():
                    sock.close()
                return
            stock.extend(future.result())

        made.add_done_callback(done)

    def close(self) -> None:
        self._closed = True
        for stock in self._stock.values():
            for sock in stock:
                sock.close()
            stock.clear()
        # The thread ends with the pool: the namespace it joined goes with it.
        self._pool.shutdown(wait=False, cancel_futures=True)


def _connected_now(sock: socket.socket, address: tuple[str, int]) -> bool:
    """Start a non-blocking connect; True if it is made already (on a loopback the
    handshake is done within the call: no wait for the socket to become writable)."""
    err = sock.connect_ex(address)
    if err not in (0, errno.EINPROGRESS):
        raise OSError(err, os.strerror(err))
    if err == 0:
        return True
    if err := sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
        raise OSError(err, os.strerror(err))
    try:
        sock.getpeername()
    except OSError:
        return False
    return True


async def _connected(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    """The connect begun by _connected_now, once done (OSError if it failed)."""
    done: asyncio.Future[None] = loop.create_future()
    fd = sock.fileno()

    def writable() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_writer(fd, writable)
    try:
        await done
    finally:
        loop.remove_writer(fd)
    if err := sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
        raise OSError(err, os.strerror(err))


def _made(family: socket.AddressFamily) -> socket.socket:
    return socket.socket(family, socket.SOCK_STREAM)


def _made_many(family: socket.AddressFamily, n: int) -> list[socket.socket]:
    return [socket.socket(family, socket.SOCK_STREAM) for _ in range(n)]


class Journal:
    """PortForward rows for one session, written in batches off the connections' path."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.rows: list[PortForward] = []
        self._timer: asyncio.TimerHandle | None = None

    def add(self, row: PortForward) -> None:
        self.rows.append(row)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(JOURNAL_BATCH_S, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        rows, self.rows = self.rows, []
        for row in rows:
            self.log.emit(row)


@dataclass(frozen=True, slots=True)
class Places:
    """The caps on forwarded connections, as the handler counts them: `take` counts one
    more open or says why not (and whether waiting for a place may help); `wait` holds
    one of the few places to wait in (False: none left), `unwait` gives it back."""

    take: Callable[[], tuple[str, bool] | None]
    release: Callable[[], None]
    wait: Callable[[], bool]
    unwait: Callable[[], None]


class SessionMux:
    """The connections of one ForwardMux stream, keyed by the client's ids. A connection
    over a cap waits up to WAIT_S for a place (a closing connection holds one until the
    server has closed its end), in a bounded line; past that, refused with the cap."""

    def __init__(
        self,
        outbox: Outbox,
        dialer: Dialer,
        journal: Journal,
        start: pb.ForwardMuxStart,
        places: Places,
        by: str,
    ) -> None:
        self.outbox = outbox
        self.dialer = dialer
        self.journal = journal
        self.port = start.port
        self.host = start.host
        self.forward_id = start.forward_id[:100]
        self.places = places
        self.by = by
        # Names this stream's connections in the journal: conn_<stream>_<id>.
        self.name = f"conn_{uuid.uuid4().hex[:8]}_"
        self.links: dict[int, Link] = {}
        # Connections waiting for a place, oldest first: the deadline and the cap's line.
        self.waiting: dict[int, tuple[float, str]] = {}
        self._retry: asyncio.TimerHandle | None = None
        self.last_id = 0  # ids are new and rising: one at or below is over
        self._dials: set[asyncio.Task[None]] = set()
        dialer.warm(socket.AF_INET6 if ":" in self.host else socket.AF_INET)

    # Frames from the client.

    def receive(self, frame: pb.ForwardFrame) -> None:
        kind = frame.WhichOneof("kind") or ""
        self.take(frame.id, kind, getattr(frame, kind) if kind else 0)

    def take(self, cid: int, kind: str, value: int | str | bytes | memoryview) -> None:
        """One frame from the client (as protobuf or forward_wire.frames_of read it)."""
        if self.outbox.backlog() > MAX_BACKLOG:
            raise Backlogged
        if kind == "open":
            self._open(cid)
            return
        link = self.links.get(cid)
        if link is None:
            if cid > self.last_id:  # never opened: said once, the id is used up
                self.last_id = cid
                self.outbox.put(close_frame(cid, f"unknown connection {cid}: send `open` first"))
            return  # a frame that crossed its connection's close: nothing to do
        if kind == "data" and not isinstance(value, int | str):
            link.on_data(value)
        elif kind == "window" and isinstance(value, int):
            link.on_window(value)
        elif kind == "eof":
            link.on_eof()
        elif kind == "close" and isinstance(value, str):
            link.on_close(value[:200])
        else:
            link.reset(f"a client does not send {kind or 'an empty frame'}")

    def _open(self, cid: int) -> None:
        if cid <= self.last_id:
            link = self.links.get(cid)
            if link is not None:
                link.reset(f"connection {cid} is already open")
            else:
                self.outbox.put(
                    close_frame(cid, f"connection id {cid} was used; ids are new and rising")
                )
            return
        self.last_id = cid
        refused = self.places.take()
        if refused is None:
            link = self.links[cid] = Link(self, cid, WINDOW)
            self._connect(link)
            return
        why, may_wait = refused
        if may_wait and self.places.wait():
            # Its first bytes (within its credit) wait with it.
            self.links[cid] = Link(self, cid, WINDOW)
            self.waiting[cid] = (asyncio.get_running_loop().time() + WAIT_S, why)
            self._retry_soon()
            return
        self.outbox.put(close_frame(cid, why))

    def _connect(self, link: Link) -> None:
        task = asyncio.create_task(self._dial(link))
        self._dials.add(task)
        task.add_done_callback(self._dials.discard)

    def _retry_soon(self) -> None:
        if self._retry is None and self.waiting:
            self._retry = asyncio.get_running_loop().call_later(RETRY_S, self._admit_waiting)

    def _admit_waiting(self) -> None:
        """Waiting connections take the places freed, oldest first; those past their
        deadline are refused with their cap."""
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        now = asyncio.get_running_loop().time()
        for cid, (deadline, why) in list(self.waiting.items()):
            link = self.links.get(cid)
            if link is None or cid not in self.waiting:
                continue
            if self.places.take() is None:
                del self.waiting[cid]
                self.places.unwait()
                self._connect(link)
            elif now >= deadline:
                link.reset(why)
        self._retry_soon()

    async def _dial(self, link: Link) -> None:
        loop = asyncio.get_running_loop()
        last: OSError | None = None
        for address in [self.host] if self.host else list(ports.LOOPBACK):
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            try:
                sock = await self.dialer.make(family)
            except (OSError, RuntimeError) as exc:  # RuntimeError: the pool shut down
                last = OSError(str(exc))
                break
            sock.setblocking(False)
            try:
                if not _connected_now(sock, (address, self.port)):
                    async with asyncio.timeout(ports.CONNECT_TIMEOUT_S):
                        await _connected(loop, sock)
                if link.done:  # the client closed it meanwhile
                    sock.close()
                    return
                await loop.connect_accepted_socket(lambda: link, sock)
            except (OSError, TimeoutError) as exc:
                sock.close()
                last = exc if isinstance(exc, OSError) else OSError("timed out")
                continue
            except BaseException:
                sock.close()
                raise
            shown = f"[{address}]:{self.port}" if ":" in address else f"{address}:{self.port}"
            self.outbox.put_later(opened_frame(link.id, shown))
            self.journal.add(
                PortForward(
                    action="connected",
                    forward_id=self.forward_id,
                    connection_id=f"{self.name}{link.id}",
                    port=self.port,
                    address=shown,
                    by=self.by,
                )
            )
            return
        if link.done:
            return
        if isinstance(last, ConnectionRefusedError):
            why = ports.nothing_listens(self.port)
        else:
            why = f"could not connect to port {self.port} in the session's sandbox: " + (
                f"{last.strerror or last}" if last is not None else "no address"
            )
        link.reset(why)

    # A link ended (Host).

    def forget(self, link: Link, reason: str) -> None:
        if self.links.pop(link.id, None) is None:
            return
        if self.waiting.pop(link.id, None) is not None:
            self.places.unwait()  # never held a place
            return
        self.places.release()
        if self.waiting:
            self._admit_waiting()
        if link.transport is None:
            return  # never connected: the client was told why, nothing was journaled
        self.journal.add(
            PortForward(
                action="closed",
                forward_id=self.forward_id,
                connection_id=f"{self.name}{link.id}",
                port=self.port,
                bytes_in=link.to_socket,
                bytes_out=link.from_socket,
                how=reason or "closed",
            )
        )

    def close(self, how: str) -> None:
        """The stream ended: every connection with it."""
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        for task in list(self._dials):
            task.cancel()
        for link in list(self.links.values()):
            link.on_close(how)  # dropped: its socket reset, no frame for it
        self.dialer.close()
        self.journal.flush()
