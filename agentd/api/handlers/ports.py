"""Ports of a session's sandbox: start and stop a forward, carry one forwarded
connection, list what listens (`agentctl forward`, `agentctl ports`).

Forwarded connections ride the client's existing channel (the unix socket, or TLS with
the token): nothing new listens on the dev box. `agentctl forward` carries all of a
forward's connections on one multiplexed stream (agentd/network/port_mux.py): on the
terminal socket where OpenForward offers it (api/terminals/forward.py), else a ForwardMux
gRPC stream; the older Forward RPC carries one each (forward_pump.py). Either way a
client that never reads, or a server that never does, holds at most its window in the
daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

from agentd.api.handlers.forward_pump import Pump, shown
from agentd.api.handlers.rpc import client_identity, require, unary
from agentd.api.terminals.tokens import TOKEN_SECONDS, TerminalTokens
from agentd.foundation.errors import AgentdError, Exhausted, InvalidRequest
from agentd.network import ports
from agentd.network.port_mux import Backlogged, Dialer, Journal, Places, SessionMux
from agentd.network.service import NetworkService
from agentd.sessions.event_types import PortForward
from agentd.sessions.session import Session, SessionManager, network_mode
from agentd_client.core.forward_mux import MAX_DATA, WINDOW, Outbox
from agentd_client.v1 import agentd_pb2 as pb

log = logging.getLogger(__name__)

# Forwarded connections open at once: all sessions together, one session, one client
# (as it names itself: a courtesy cap; the session's is the one that holds). Past any
# of them, refused: one client cannot take another session's forwards.
MAX_OPEN = 256
MAX_OPEN_PER_SESSION = 64
MAX_OPEN_PER_CLIENT = 128
# Multiplexed streams open at once: one session, all together (each keeps a thread in
# its session's namespace; one `agentctl forward` is one stream).
MAX_STREAMS_PER_SESSION = 16
MAX_STREAMS = 64
# Multiplexed connections over a cap waiting for a place, all streams together (each
# holds at most its credit of early bytes).
MAX_WAITING = 64


class TooMany(Exhausted):
    """Too many forwarded connections are open at once."""


class PortHandlers:
    def __init__(
        self,
        sessions: SessionManager,
        network: NetworkService | None,
        tokens: TerminalTokens | None = None,
        socket_path: str = "",
    ) -> None:
        self.sessions = sessions
        # Where proxied sessions' namespaces are (None: this daemon keeps none).
        self.network = network
        self.open = 0
        self.by_session: Counter[str] = Counter()
        self.by_client: Counter[str] = Counter()
        self._running: set[asyncio.Task[Any]] = set()
        # The multiplexed streams' journals with rows not yet written, by session.
        self._journals: dict[str, set[Journal]] = {}
        self.streams: Counter[str] = Counter()
        self.waiting = 0  # multiplexed connections waiting for a place, all streams
        self.stopping = False
        # The forward streams on the terminal socket, closed if the daemon stops.
        self._closers: set[Callable[[], None]] = set()
        # The terminal socket's tokens and path (None: OpenForward offers none).
        self.tokens: TerminalTokens | None = tokens
        self.socket_path = socket_path

    def stop(self) -> None:
        """The daemon stops: every forwarded connection ends now (its socket in the
        sandbox closed, its client told CANCELLED), not after the server's grace."""
        self.stopping = True
        for task in self._running:
            task.cancel()
        for closer in list(self._closers):
            closer()

    def _closed(self, session_id: str, who: str) -> None:
        self._released(session_id, who)
        if self.open == 0:
            _trim()

    def _released(self, session_id: str, who: str) -> None:
        self.open -= 1
        for counts, key in ((self.by_session, session_id), (self.by_client, who)):
            counts[key] -= 1
            if counts[key] <= 0:
                del counts[key]

    def _session(self, session_id: str) -> Session:
        return self.sessions.get(require(session_id, "session_id"), open_only=True)

    def _namespace(self, session: Session, port: int | None = None) -> str:
        """The session's namespace, made; refused when `port` is agentd's own proxy."""
        service = self.network
        path = ports.namespace(service, session)
        if port is not None and port in ports.proxy_ports(service):
            raise ports.NotForwardable(
                f"port {port} in the sandbox is agentd's own (its proxy or credential routes), "
                "not a server of the session's; forward the port your server listens on "
                "(`agentctl ports`)"
            )
        if not ports.exists(path):
            raise ports.NotForwardable(
                f"nothing listens in session {session.label}'s sandbox yet (no command has run "
                "there); start the server, e.g. as a background task, then forward"
            )
        return path

    @unary
    async def StartForward(
        self, request: pb.StartForwardRequest, context: Any
    ) -> pb.ForwardStarted:
        session = self._session(request.session_id)
        port = ports.checked_port(request.port)
        path = self._namespace(session, port)
        loop = asyncio.get_running_loop()
        address = await loop.run_in_executor(None, ports.listening_on, path, port, "")
        forward_id = f"fwd_{uuid.uuid4().hex[:12]}"
        self.sessions.log(session.id).emit(
            PortForward(
                action="started",
                forward_id=forward_id,
                port=port,
                address=address,
                local=request.local[:200],
                by=client_identity(context),
            )
        )
        log.info("session %s: %s forwards port %d", session.id, client_identity(context), port)
        return pb.ForwardStarted(forward_id=forward_id, address=address, port=port)

    @unary
    async def StopForward(
        self, request: pb.StopForwardRequest, context: Any
    ) -> pb.StopForwardResponse:
        session = self._session(request.session_id)
        for journal in self._journals.get(session.id, ()):
            journal.flush()  # its connections' rows come before the stop
        self.sessions.log(session.id).emit(
            PortForward(
                action="stopped",
                forward_id=require(request.forward_id, "forward_id")[:100],
                by=client_identity(context),
            )
        )
        return pb.StopForwardResponse()

    @unary
    async def ListPorts(self, request: pb.ListPortsRequest, context: Any) -> pb.ListPortsResponse:
        session = self._session(request.session_id)
        service = self.network
        path = ports.namespace(service, session)
        if not ports.exists(path):  # no command has run there: nothing listens
            return pb.ListPortsResponse(network=network_mode(session))
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(None, ports.listeners, path)
        theirs = ports.proxy_ports(service)
        found = [x for x in found if x.port not in theirs]
        owners = await loop.run_in_executor(None, ports.processes, {x.inode for x in found})
        return pb.ListPortsResponse(
            network=network_mode(session),
            ports=[
                pb.ListeningPort(
                    address=x.address,
                    port=x.port,
                    forwardable=x.forwardable,
                    processes=owners.get(x.inode, []),
                )
                for x in found
            ],
        )

    @unary
    async def Forward(self, requests: AsyncIterator[pb.ForwardRequest], context: Any) -> None:
        first = await anext(requests, None)
        if first is None or first.WhichOneof("kind") != "open":
            raise InvalidRequest("a forwarded connection's first message is `open`")
        opening = first.open
        session = self._session(opening.session_id)
        port = ports.checked_port(opening.port)
        host = ports.checked_host(opening.host)
        path = self._namespace(session, port)
        who = client_identity(context)
        if self.open >= MAX_OPEN:
            raise TooMany(f"{MAX_OPEN} forwarded connections are open; close some first")
        if self.by_session[session.id] >= MAX_OPEN_PER_SESSION:
            raise TooMany(
                f"session {session.id} has {MAX_OPEN_PER_SESSION} forwarded connections open; "
                "close some first"
            )
        if self.by_client[who] >= MAX_OPEN_PER_CLIENT:
            raise TooMany(
                f"this client has {MAX_OPEN_PER_CLIENT} forwarded connections open; "
                "close some first"
            )
        loop = asyncio.get_running_loop()
        self.open += 1
        self.by_session[session.id] += 1
        self.by_client[who] += 1
        try:
            sock = await loop.run_in_executor(None, ports.connect, path, port, host)
        except BaseException:
            self._closed(session.id, who)
            raise
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        journal = self.sessions.log(session.id)
        connection_id = f"conn_{uuid.uuid4().hex[:12]}"
        pump = Pump(sock, requests, context)
        try:
            address = shown(sock)
            journal.emit(
                PortForward(
                    action="connected",
                    forward_id=opening.forward_id[:100],
                    connection_id=connection_id,
                    port=port,
                    address=address,
                    by=client_identity(context),
                )
            )
            await context.write(
                pb.ForwardResponse(
                    opened=pb.ForwardOpened(connection_id=connection_id, address=address)
                )
            )
            await pump.run()
        except asyncio.CancelledError:
            pump.how = "the daemon stopped" if self.stopping else "cancelled by the client"
            raise
        finally:
            self._closed(session.id, who)
            if task is not None:
                self._running.discard(task)
            sock.close()
            journal.emit(
                PortForward(
                    action="closed",
                    forward_id=opening.forward_id[:100],
                    connection_id=connection_id,
                    port=port,
                    bytes_in=pump.sent,
                    bytes_out=pump.received,
                    how=pump.how,
                )
            )

    def _admit(self, session_id: str, who: str) -> tuple[str, bool] | None:
        """One more forwarded connection counted, or why not and whether a place may
        free up (a cap is reached) or not (the session closed)."""
        try:
            self.sessions.get(session_id, open_only=True)
        except AgentdError as exc:
            return str(exc), False
        if self.open >= MAX_OPEN:
            return f"{MAX_OPEN} forwarded connections are open; close some first", True
        if self.by_session[session_id] >= MAX_OPEN_PER_SESSION:
            return (
                f"session {session_id} has {MAX_OPEN_PER_SESSION} forwarded connections "
                "open; close some first"
            ), True
        if self.by_client[who] >= MAX_OPEN_PER_CLIENT:
            return (
                f"this client has {MAX_OPEN_PER_CLIENT} forwarded connections open; "
                "close some first"
            ), True
        self.open += 1
        self.by_session[session_id] += 1
        self.by_client[who] += 1
        return None

    def _wait(self) -> bool:
        if self.waiting >= MAX_WAITING:
            return False
        self.waiting += 1
        return True

    def _unwait(self) -> None:
        self.waiting -= 1

    def open_stream(
        self, session_id: str, start: pb.ForwardMuxStart, path: str, who: str, outbox: Outbox
    ) -> SessionMux:
        """A multiplexed stream's connections, counted against the streams' caps (TooMany
        past them); `close_stream` ends them. Its frames come and go as the caller
        carries them: a ForwardMux gRPC stream, or the terminal socket."""
        if self.streams.total() >= MAX_STREAMS:
            raise TooMany(f"{MAX_STREAMS} forward streams are open; stop some forwards first")
        if self.streams[session_id] >= MAX_STREAMS_PER_SESSION:
            raise TooMany(
                f"session {session_id} has {MAX_STREAMS_PER_SESSION} forward streams open; "
                "stop some forwards first"
            )
        journal = Journal(self.sessions.log(session_id))
        mux = SessionMux(
            outbox,
            Dialer(path),
            journal,
            start,
            Places(
                take=lambda: self._admit(session_id, who),
                release=lambda: self._released(session_id, who),
                wait=self._wait,
                unwait=self._unwait,
            ),
            who,
        )
        self.streams[session_id] += 1
        self._journals.setdefault(session_id, set()).add(journal)
        return mux

    def close_stream(self, session_id: str, mux: SessionMux, how: str) -> None:
        mux.close(how)
        journals = self._journals.get(session_id, set())
        journals.discard(mux.journal)
        if not journals:
            self._journals.pop(session_id, None)
        self.streams[session_id] -= 1
        if self.streams[session_id] <= 0:
            del self.streams[session_id]
        if self.open == 0:
            _trim()

    def checked_start(self, start: pb.ForwardMuxStart) -> str:
        """The session's namespace for a stream to `start`'s port, once checked."""
        session = self._session(start.session_id)
        ports.checked_port(start.port)
        ports.checked_host(start.host)
        return self._namespace(session, start.port)

    def on_stop(self, closer: Callable[[], None]) -> Callable[[], None]:
        """`closer` is called if the daemon stops first; the answer forgets it."""
        self._closers.add(closer)
        return lambda: self._closers.discard(closer)

    @unary
    async def ForwardMux(self, requests: AsyncIterator[pb.ForwardMuxRequest], context: Any) -> None:
        first = await anext(requests, None)
        if first is None or not first.HasField("start") or first.frames:
            raise InvalidRequest("a multiplexed forward's first message is `start` alone")
        start = first.start
        path = self.checked_start(start)
        outbox = Outbox(context.write)
        mux = self.open_stream(start.session_id, start, path, client_identity(context), outbox)
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        # The client's stream ending (cancelled, or half-closed) ends its connections.
        how = "cancelled by the client"
        writer: asyncio.Future[None] | None = None
        try:
            await context.write(
                pb.ForwardMuxResponse(
                    started=pb.ForwardMuxStarted(window=WINDOW, max_data=MAX_DATA)
                )
            )
            writer = asyncio.ensure_future(outbox.run())
            async for request in requests:
                if request.HasField("start"):
                    raise InvalidRequest("`start` comes once, in a stream's first message")
                for frame in request.frames:
                    mux.receive(frame)
                if writer.done():
                    break
        except Backlogged:
            how = "the client reads none of its stream"
            raise Exhausted(
                "this stream's client sends frames and reads none of the answers; read them"
            ) from None
        except asyncio.CancelledError:
            how = "the daemon stopped" if self.stopping else "cancelled by the client"
            raise
        finally:
            if task is not None:
                self._running.discard(task)
            self.close_stream(start.session_id, mux, how)
            if writer is not None:
                writer.cancel()
                with contextlib.suppress(BaseException):
                    await writer

    @unary
    async def OpenForward(self, request: pb.OpenForwardRequest, context: Any) -> pb.ForwardChannel:
        start = pb.ForwardMuxStart(
            session_id=request.session_id,
            port=request.port,
            host=request.host,
            forward_id=request.forward_id[:100],
        )
        path = self.checked_start(start)
        # Offered only to a caller on this machine's API socket: the terminal socket is
        # beside it, with its permissions.
        if self.tokens is None or not str(context.peer()).startswith("unix:"):
            return pb.ForwardChannel()
        token = self.tokens.issue_forward(
            start.session_id,
            request.uid,
            port=start.port,
            host=start.host,
            forward_id=start.forward_id,
            namespace=path,
            by=client_identity(context),
        )
        return pb.ForwardChannel(
            path=self.socket_path,
            token=token,
            expires_ms=int(TOKEN_SECONDS * 1000),
            window=WINDOW,
            max_data=MAX_DATA,
        )


def _trim() -> None:
    """Hand freed memory back to the system: the chunks of a flood of connections are
    freed into malloc's arenas, which keep them resident otherwise."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
