"""The API's unix socket handed from one daemon to the next, so a restart refuses no
client: the holder (foundation/holder.py) keeps a copy of the listening socket, and
while no daemon runs a client's connection waits in its backlog.

gRPC binds its own socket and cannot serve one it is given. So the next daemon binds a
new one beside the path and renames it over the path (a client never finds no socket),
then accepts what waited on the previous socket and relays each of those connections to
its own socket; once that socket has been quiet for a while, it is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Coroutine
from typing import Any

from agentd.foundation.holder import Holder

log = logging.getLogger(__name__)

NAME = ":api"  # no session id (the proxies' names begin with one) begins so
# Seconds with no connection on the previous socket before it is closed: a client that
# found the path just before the rename connects a moment after it.
_QUIET_SECONDS = 2.0
_CHUNK = 256 * 1024
# The longest path a unix socket can be bound to (sun_path, with its NUL).
_MAX_PATH = 107


def bind_path(path: str) -> str:
    """Where gRPC binds, to be renamed over `path` once it listens; `path` itself when
    the longer name would not fit in a socket address."""
    staged = path + ".new"
    if len(os.fsencode(staged)) > _MAX_PATH:
        return path
    with contextlib.suppress(FileNotFoundError):
        os.unlink(staged)  # a previous daemon's, killed between its bind and rename
    return staged


def listening_fd(bound: str) -> int | None:
    """This process's descriptor of the socket listening at the address `bound`."""
    inodes = set()
    with contextlib.suppress(OSError), open("/proc/net/unix") as table:
        next(table, None)
        for line in table:
            fields = line.split()
            # Flags 00010000 is __SO_ACCEPTCON: a listening socket.
            if len(fields) >= 8 and fields[7] == bound and int(fields[3], 16) & 0x10000:
                inodes.add(fields[6])
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{name}")
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return int(name)
    return None


class Handover:
    """One daemon's part: takes the previous daemon's socket, puts its own."""

    def __init__(self, holder: Holder | None, path: str, wait_seconds: float) -> None:
        self.holder = holder
        self.path = path
        self.wait_seconds = wait_seconds
        # The previous daemon's listening socket, when it died with clients waiting.
        self.previous = holder.take(NAME) if holder is not None and wait_seconds else None
        self._tasks: set[asyncio.Task[None]] = set()

    def serving(self, bound: str) -> None:
        """gRPC listens at `bound`: put it in place and in the holder's hands, and serve
        what waits on the previous socket."""
        if bound != self.path:
            os.rename(bound, self.path)
        if self.holder is not None and self.wait_seconds:
            fd = listening_fd(bound)
            if fd is None:
                log.warning("the API socket is not held: a restart may refuse clients")
            else:
                self.holder.put(NAME, fd, hold=self.wait_seconds)
        if self.previous is not None:
            self._own(self._drain(self.previous))

    def _own(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("relaying a connection made during the restart failed: %s", exc)

    async def _drain(self, previous: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        relayed = 0
        with previous:
            while True:
                try:
                    conn, _ = await asyncio.wait_for(loop.sock_accept(previous), _QUIET_SECONDS)
                except TimeoutError:
                    break
                relayed += 1
                self._own(self._relay(conn))
        if relayed:
            log.info("served %d connections made while no daemon ran", relayed)

    async def _relay(self, conn: socket.socket) -> None:
        client_r, client_w = await asyncio.open_unix_connection(sock=conn)
        try:
            ours_r, ours_w = await asyncio.open_unix_connection(self.path)
        except OSError:
            client_w.close()
            raise
        try:
            await asyncio.gather(_pump(client_r, ours_w), _pump(ours_r, client_w))
        finally:
            for writer in (client_w, ours_w):
                writer.close()

    def stop(self, keep: bool) -> None:
        """The daemon stops: relayed connections end; unless `keep`, the holder lets go
        of the socket (its clients are refused, as when no daemon runs)."""
        for task in list(self._tasks):
            task.cancel()
        if not keep and self.holder is not None:
            self.holder.drop(NAME)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One direction; its end is passed on as a half close, a reset as a close."""
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except ConnectionError:
        writer.close()
