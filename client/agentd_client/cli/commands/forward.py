"""`agentctl forward` and `agentctl ports`: a session's sandbox ports on the laptop.

`forward SESSION [LOCAL:]PORT` listens on the laptop (127.0.0.1 unless --bind says
otherwise) and carries each connection it accepts as one Forward stream on the channel
agentctl already uses (the unix socket, an ssh-forwarded one, or TLS with the token), to
127.0.0.1:PORT (else ::1) inside the session's sandbox. Each direction reads only when
the other end took the last chunk, so neither a slow browser nor a slow server makes
either side buffer more than a chunk and the transport's windows.

How it ends: Ctrl-C (or SIGTERM, SIGHUP) stops listening, cancels every open stream
(the daemon closes its sockets in the sandbox), records the stop and exits 130 (128+N).
A connection closed at either end ends its stream alone. The daemon restarting cuts the
open connections; new ones go through once it is back.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
from typing import Any

import grpc

from agentd_client.cli import names
from agentd_client.core import contexts
from agentd_client.core.aio import AsyncClient
from agentd_client.core.client import Client
from agentd_client.core.errors import Usage, from_rpc_error
from agentd_client.core.forward_wire import data_frame, data_of
from agentd_client.terminal.hangup import Hangup, say
from agentd_client.terminal.sanitize import line as one
from agentd_client.v1 import agentd_pb2 as pb

# Bytes read from a laptop connection per message (the daemon sends the same size back).
CHUNK = 1024 * 1024
# Chunks read from a laptop connection ahead of gRPC taking them.
AHEAD = 2
START_TIMEOUT_S = 30.0
OPEN_TIMEOUT_S = 30.0


def parse_spec(spec: str) -> tuple[int, int]:
    """ "[LOCAL:]PORT" -> (local port, sandbox port); LOCAL 0 picks a free port."""
    local, sep, remote = spec.rpartition(":")
    try:
        port = int(remote)
        local_port = int(local) if sep else port
    except ValueError:
        raise Usage(f"expected [LOCAL:]PORT, got {spec!r}") from None
    if not 1 <= port <= 65535 or not 0 <= local_port <= 65535:
        raise Usage(f"ports are 1-65535 (LOCAL may be 0: any free port), got {spec!r}")
    return local_port, port


def _encoded(request: pb.ForwardRequest | bytes) -> bytes:
    """`open` the usual way; data arrives already encoded (data_frame)."""
    return request if isinstance(request, bytes) else request.SerializeToString()


def _decoded(raw: bytes) -> pb.ForwardResponse | memoryview:
    """A data message's bytes as a view of `raw`; any other message decoded."""
    data = data_of(raw)
    return data if data is not None else pb.ForwardResponse.FromString(raw)


class Forwarder:
    """The laptop's listener and its connections, each one Forward stream."""

    def __init__(
        self, client: AsyncClient, session_id: str, port: int, forward_id: str, where: str
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.port = port
        self.forward_id = forward_id
        self.where = where
        self.connections: set[asyncio.Task[None]] = set()
        # The Forward RPC with data messages encoded and read by hand (forward_wire):
        # a chunk is copied once on its way up, not at all on its way down.
        self._forward = client.channel.stream_stream(
            "/agentd.v1.Agentd/Forward",
            request_serializer=_encoded,
            response_deserializer=_decoded,
        )

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        # A connection made while the daemon restarts waits for it (up to OPEN_TIMEOUT_S),
        # rather than failing at once on a channel still backing off.
        call = self._forward(wait_for_ready=True)
        try:
            await call.write(
                pb.ForwardRequest(
                    open=pb.ForwardOpen(
                        session_id=self.session_id, port=self.port, forward_id=self.forward_id
                    )
                )
            )
            try:
                first = await asyncio.wait_for(call.read(), OPEN_TIMEOUT_S)
            except TimeoutError:
                say(
                    f"agentctl forward: agentd at {self.where} did not answer within "
                    f"{OPEN_TIMEOUT_S:g}s"
                )
                return
            if first is grpc.aio.EOF or first.WhichOneof("kind") != "opened":
                return
            up = asyncio.ensure_future(self._up(reader, call))
            try:
                await self._down(call, writer)
                await up
            finally:
                up.cancel()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                say(f"agentctl forward: {from_rpc_error(exc, self.where).message}")
        except (ConnectionError, OSError):
            pass  # the laptop's side went away: the stream is cancelled below
        except asyncio.CancelledError:
            pass  # agentctl stops (stop()): this connection ends with it, quietly
        except Exception as exc:  # one connection's failure never stops the others
            say(f"agentctl forward: a connection failed: {exc}")
        finally:
            call.cancel()
            writer.close()
            # Cancelled here too when agentctl stops: the connection is closed either way.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()
            self.connections.discard(task)

    async def _up(self, reader: asyncio.StreamReader, call: Any) -> None:
        # The laptop's connection is read while gRPC sends the last chunk, no further
        # than AHEAD chunks before gRPC has taken them (`write` returns then).
        queue: asyncio.Queue[bytes] = asyncio.Queue(AHEAD)

        async def read() -> None:
            try:
                while data := await reader.read(CHUNK):
                    await queue.put(data)
            finally:
                await queue.put(b"")

        reading = asyncio.ensure_future(read())
        try:
            while data := await queue.get():
                await call.write(data_frame(data))
            await call.done_writing()
        finally:
            reading.cancel()

    async def _down(self, call: Any, writer: asyncio.StreamWriter) -> None:
        while True:
            reply = await call.read()
            if reply is grpc.aio.EOF:
                return
            if isinstance(reply, memoryview):  # data, as a view of the message received
                writer.write(reply)
                await writer.drain()
                continue
            kind = reply.WhichOneof("kind")
            if kind == "data":
                writer.write(reply.data)
                await writer.drain()
            elif kind == "eof" and writer.can_write_eof():
                writer.write_eof()

    async def stop(self) -> None:
        for task in list(self.connections):
            task.cancel()
        await asyncio.gather(*self.connections, return_exceptions=True)


async def _serve(
    args: argparse.Namespace, session_id: str, port: int, local_port: int, started: Any
) -> int:
    """Serves until a signal; returns its number."""
    loop = asyncio.get_running_loop()
    stopped: asyncio.Future[int] = loop.create_future()

    def stop(signum: int) -> None:
        if not stopped.done():
            stopped.set_result(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop, sig)
    client = contexts.open_client(args.endpoint, wait_for_ready=False, factory=AsyncClient)
    forwarder = Forwarder(client, session_id, port, started.forward_id, args.endpoint.where)
    try:
        server = await asyncio.start_server(forwarder.handle, args.bind, local_port)
    except OSError as exc:
        await client.close()
        raise Usage(f"cannot listen on {args.bind}:{local_port}: {exc.strerror or exc}") from None
    bound = server.sockets[0].getsockname()
    host = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    shown = {
        "local": f"{host}:{bound[1]}",
        "local_port": bound[1],
        "session_id": session_id,
        "port": port,
        "address": started.address,
        "forward_id": started.forward_id,
    }
    if getattr(args, "json", False):
        print(json.dumps(shown), flush=True)
    else:
        print(
            f"forwarding {host}:{bound[1]} -> {one(started.address)}:{port} in session "
            f"{one(session_id)} (Ctrl-C to stop)",
            flush=True,
        )
    try:
        return await stopped
    finally:
        server.close()
        await forwarder.stop()
        await server.wait_closed()
        await client.close()


def cmd_forward(c: Client, args: argparse.Namespace) -> int:
    local_port, port = parse_spec(args.spec)
    session_id = names.resolve(c, args.session_name or args.default_session)
    started = c.stub.StartForward(
        pb.StartForwardRequest(session_id=session_id, port=port, local=f"{args.bind}:{local_port}"),
        timeout=START_TIMEOUT_S,
    )
    signum = 0
    try:
        signum = asyncio.run(_serve(args, session_id, port, local_port, started))
    finally:
        with contextlib.suppress(grpc.RpcError):
            c.stub.StopForward(
                pb.StopForwardRequest(session_id=session_id, forward_id=started.forward_id),
                timeout=5,
            )
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Hangup(signum)


def cmd_ports(c: Client, args: argparse.Namespace) -> int:
    session_id = names.resolve(c, args.session_name or args.default_session)
    reply = c.stub.ListPorts(pb.ListPortsRequest(session_id=session_id), timeout=30)
    if getattr(args, "json", False):
        print(
            json.dumps(
                [
                    {
                        "address": p.address,
                        "port": p.port,
                        "forwardable": p.forwardable,
                        "processes": list(p.processes),
                    }
                    for p in reply.ports
                ],
                indent=2,
            )
        )
        return 0
    if not reply.ports:
        print(f"nothing listens in session {one(session_id)}'s sandbox")
        return 0
    print(f"{'ADDRESS':<24} {'PORT':>5}  FORWARD  PROCESS")
    for p in reply.ports:
        who = ", ".join(one(x) for x in p.processes) or "-"
        print(
            f"{one(p.address):<24} {p.port:>5}  {'yes' if p.forwardable else 'no':<7}  {who}",
        )
    return 0
