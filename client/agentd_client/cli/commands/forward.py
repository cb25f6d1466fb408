"""`agentctl forward` and `agentctl ports`: a session's sandbox ports on the laptop.

`forward SESSION [LOCAL:]PORT` listens on the laptop (127.0.0.1 unless --bind says
otherwise) and carries every connection it accepts on one multiplexed stream (the
daemon's terminal socket where OpenForward offers it, else a ForwardMux stream on the
channel agentctl already uses: an ssh-forwarded socket, or TLS with the token), to
127.0.0.1:PORT (else ::1) inside the session's sandbox. Each connection has
credit both ways (core/forward_mux.py): a slow browser or a slow server stops its own
connection, never the others, and neither side buffers more than a window of it.

How it ends: Ctrl-C (or SIGTERM, SIGHUP) stops listening, cancels the stream (the daemon
closes its sockets in the sandbox), records the stop and exits 130 (128+N). A
connection closed at either end ends alone. The daemon restarting cuts the open
connections; new ones go through once it is back (on a new stream).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import signal
from collections.abc import Callable
from typing import Any

import grpc

from agentd_client.cli import names
from agentd_client.core import contexts, forward_socket
from agentd_client.core.aio import AsyncClient
from agentd_client.core.client import Client
from agentd_client.core.errors import Usage, from_rpc_error
from agentd_client.core.forward_mux import Link, Outbox
from agentd_client.core.forward_socket import ClientSocket
from agentd_client.core.forward_wire import ReadFrame, frames_of, open_frame
from agentd_client.terminal.hangup import Hangup, say
from agentd_client.terminal.sanitize import line as one
from agentd_client.v1 import agentd_pb2 as pb

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


def _decoded(raw: bytes) -> pb.ForwardMuxResponse | list[ReadFrame]:
    """Frames read by hand, data as views of the message received (forward_wire); any
    other message decoded."""
    frames = frames_of(raw)
    return frames if frames is not None else pb.ForwardMuxResponse.FromString(raw)


class Stream:
    """One multiplexed stream and the laptop's connections it carries: the daemon's
    terminal socket where OpenForward offers it (core/forward_socket.py), else a
    ForwardMux gRPC stream; the same frames either way. Connections accepted before the
    daemon answered wait for its credit; the stream ending (the daemon restarting)
    resets them, and the next connection opens a new stream."""

    def __init__(self, forwarder: Forwarder) -> None:
        self.forwarder = forwarder
        # Its `write` is the socket's, or the gRPC call's, once one is up.
        self.outbox = Outbox(self._unwritable)
        self.links: dict[int, Link] = {}
        self.window = 0  # each new connection's credit, once started
        self.next_id = 1
        self.ended = False
        self.over = ""  # "socket" or "grpc", once started
        self.task = asyncio.ensure_future(self.run())

    @staticmethod
    async def _unwritable(batch: bytes) -> None:
        raise ConnectionError("the stream is not started")

    def attach(self) -> Link:
        """A new laptop connection on this stream (the listener's protocol factory)."""
        link = Link(self, self.next_id, self.window)
        self.next_id += 1
        self.links[link.id] = link
        self.outbox.put_open(open_frame(link.id))
        return link

    def forget(self, link: Link, reason: str) -> None:
        self.links.pop(link.id, None)

    def _started(self, window: int) -> asyncio.Future[None]:
        self.window = window
        for link in list(self.links.values()):
            link.allowed = window
            link.on_window(window)
        return asyncio.ensure_future(self.outbox.run())

    async def run(self) -> None:
        writer: asyncio.Future[None] | None = None
        f = self.forwarder
        start = pb.ForwardMuxStart(session_id=f.session_id, port=f.port, forward_id=f.forward_id)
        call: Any = None
        channel: ClientSocket | None = None
        try:
            offered = await forward_socket.open_socket(
                f.client.stub, start, self._on_frames, OPEN_TIMEOUT_S
            )
            if offered is not None:
                channel, reply = offered
                self.over = "socket"
                self.outbox.write = channel.writer.write
                self.outbox.message_bytes = forward_socket.BATCH_BYTES
                writer = self._started(reply.window)
                await asyncio.wait({channel.lost, writer}, return_when=asyncio.FIRST_COMPLETED)
                return
            self.over = "grpc"
            # Requests go encoded already (forward_wire); a chunk is copied once on its way.
            call = f.mux(wait_for_ready=True)
            self.outbox.write = call.write
            await call.write(pb.ForwardMuxRequest(start=start).SerializeToString())
            try:
                first = await asyncio.wait_for(call.read(), OPEN_TIMEOUT_S)
            except TimeoutError:
                say(
                    f"agentctl forward: agentd at {f.where} did not answer within "
                    f"{OPEN_TIMEOUT_S:g}s"
                )
                return
            if first is grpc.aio.EOF or isinstance(first, list) or not first.HasField("started"):
                return
            writer = self._started(first.started.window)
            while True:
                reply = await call.read()
                if reply is grpc.aio.EOF:
                    return
                if isinstance(reply, list):
                    for cid, kind, value in reply:
                        self.receive(cid, kind, value)
                    continue
                self._decoded(reply)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                say(f"agentctl forward: {from_rpc_error(exc, f.where).message}")
        except asyncio.CancelledError:
            pass  # agentctl stops (stop()): the connections end with it, quietly
        finally:
            self.ended = True
            if writer is not None:
                writer.cancel()
                # Its failure (the call ended under it) is the stream's, said above.
                writer.add_done_callback(lambda w: w.cancelled() or w.exception())
            for link in list(self.links.values()):
                link.on_close("the stream to agentd ended")
            if call is not None:
                call.cancel()
            if channel is not None and channel.writer.transport is not None:
                channel.writer.transport.abort()

    def _on_frames(self, payload: memoryview) -> None:
        """A batch of frames from the socket (views of what was read)."""
        frames = frames_of(payload)
        if frames is None:
            self._decoded(pb.ForwardMuxResponse.FromString(bytes(payload)))
            return
        for cid, kind, value in frames:
            self.receive(cid, kind, value)

    def _decoded(self, reply: pb.ForwardMuxResponse) -> None:
        for frame in reply.frames:
            kind = frame.WhichOneof("kind") or ""
            self.receive(frame.id, kind, getattr(frame, kind) if kind else 0)

    def receive(self, cid: int, kind: str, value: int | str | bytes | memoryview) -> None:
        link = self.links.get(cid)
        if link is None:
            return  # crossed its connection's close
        if kind == "data" and not isinstance(value, int | str):
            link.on_data(value)
        elif kind == "window" and isinstance(value, int):
            link.on_window(value)
        elif kind == "eof":
            link.on_eof()
        elif kind == "close" and isinstance(value, str):
            if value:
                say(f"agentctl forward: {one(value)}")
            link.on_close(value)


class Forwarder:
    """The laptop's listener: every connection it accepts goes on one ForwardMux
    stream (a new one once the last has ended)."""

    def __init__(
        self, client: AsyncClient, session_id: str, port: int, forward_id: str, where: str
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.port = port
        self.forward_id = forward_id
        self.where = where
        self.stream: Stream | None = None
        self.mux = client.channel.stream_stream(
            "/agentd.v1.Agentd/ForwardMux",
            request_serializer=bytes,
            response_deserializer=_decoded,
        )

    def connection(self) -> Link:
        if self.stream is None or self.stream.ended:
            self.stream = Stream(self)
        return self.stream.attach()

    async def stop(self) -> None:
        if self.stream is not None:
            self.stream.task.cancel()
            await asyncio.gather(self.stream.task, return_exceptions=True)


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
        server = await loop.create_server(forwarder.connection, args.bind, local_port)
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


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where it is installed (its transports are C: a connection's bytes cost a
    fraction of asyncio's), asyncio's loop otherwise."""
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def cmd_forward(c: Client, args: argparse.Namespace) -> int:
    local_port, port = parse_spec(args.spec)
    session_id = names.resolve(c, args.session_name or args.default_session)
    started = c.stub.StartForward(
        pb.StartForwardRequest(session_id=session_id, port=port, local=f"{args.bind}:{local_port}"),
        timeout=START_TIMEOUT_S,
    )
    signum = 0
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            signum = runner.run(_serve(args, session_id, port, local_port, started))
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
