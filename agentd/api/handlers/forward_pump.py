"""One connection of the single-connection Forward RPC, pumped both ways between the
sandbox's socket and the client's stream (the multiplexed ForwardMux: port_mux.py)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import grpc

from agentd.foundation.errors import AgentdError, InvalidRequest
from agentd_client.core.forward_wire import data_frame
from agentd_client.v1 import agentd_pb2 as pb

# Bytes read from the sandbox's socket per message: big enough that gRPC's per-message
# cost is small next to the copy; small enough that what a stream holds (its window:
# AHEAD chunks and the one gRPC is sending) times the connections a session may open
# stays a small part of the daemon.
CHUNK = 256 * 1024
# Chunks read from the sandbox's socket ahead of gRPC taking them, per connection.
AHEAD = 2


def shown(sock: socket.socket) -> str:
    """The sandbox's end of the connection, "127.0.0.1:PORT" or "[::1]:PORT"."""
    try:
        host, port = sock.getpeername()[:2]
    except OSError:  # reset already: said when the pump reads
        return "?"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Pump:
    """Both directions of one connection; each stops reading once the other end has
    not taken what it read (AHEAD chunks toward gRPC, one toward the socket)."""

    def __init__(self, sock: socket.socket, requests: AsyncIterator[Any], context: Any) -> None:
        self.sock = sock
        self.requests = requests
        self.context = context
        self.sent = 0  # to the sandbox's server
        self.received = 0  # from it
        self.how = "closed"  # how it ended, for the journal
        self.loop = asyncio.get_running_loop()

    async def run(self) -> None:
        """Until both directions have ended (or one failed: the RPC ends with it)."""
        up = asyncio.ensure_future(self._up())
        down = asyncio.ensure_future(self._down())
        try:
            done, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if (failure := task.exception()) is not None:
                    raise failure
        except OSError as exc:
            self.how = f"broke in the sandbox: {exc.strerror or exc}"
            await self.context.abort(grpc.StatusCode.ABORTED, f"the connection {self.how}")
        except AgentdError as exc:
            self.how = f"refused: {exc}"
            raise
        finally:
            for task in (up, down):
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(up, down, return_exceptions=True)
        self.how = "closed"

    async def _up(self) -> None:
        async for request in self.requests:
            if request.WhichOneof("kind") != "data":
                raise InvalidRequest("after `open`, a forwarded connection sends only data")
            await self.loop.sock_sendall(self.sock, request.data)
            self.sent += len(request.data)
        # The laptop's side wrote its last byte: the server reads its end, may still write.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    async def _down(self) -> None:
        # A few chunks in flight: the socket is read while gRPC sends the last chunk,
        # and no further than AHEAD chunks before gRPC has taken them.
        queue: asyncio.Queue[bytes | OSError] = asyncio.Queue(AHEAD)

        async def read() -> None:
            try:
                while data := await self.loop.sock_recv(self.sock, CHUNK):
                    self.received += len(data)
                    await queue.put(data)
            except OSError as exc:  # a reset: said to the client after what came before
                await queue.put(exc)
                return
            await queue.put(b"")

        reader = asyncio.ensure_future(read())
        try:
            while True:
                item = await queue.get()
                if isinstance(item, OSError):
                    raise item
                if not item:
                    break
                # Encoded here: one copy of the chunk, not protobuf's two (forward_wire).
                await self.context.write(data_frame(item))
            await self.context.write(pb.ForwardResponse(eof=True))
        finally:
            reader.cancel()
