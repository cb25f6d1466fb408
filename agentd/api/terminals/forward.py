"""A connection of the terminal socket that carries a multiplexed forward: ForwardMux's
frames (agentd_client/core/forward_socket.py) off gRPC, once its token, an
OpenForward's, was checked (channel.py hands the connection over).

The stream's connections are the ones a ForwardMux stream holds (network/port_mux.py):
the same credit, caps, waiting line, resets and batched journal; only the carrier
differs. What ends the stream here ends the connection: a frame that is not FRAMES, a
batch that is not frames, a client that reads none of the answers (its frames waiting
past the mux's backlog), the daemon stopping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from agentd.api.terminals.tokens import ForwardGrant
from agentd.network.port_mux import Backlogged, SessionMux
from agentd_client.core import terminal_wire as wire
from agentd_client.core.forward_mux import Outbox
from agentd_client.core.forward_socket import (
    BATCH_BYTES,
    FRAMES,
    MAX_FRAMES_PAYLOAD,
    FrameViews,
    Writer,
)
from agentd_client.core.forward_wire import frames_of
from agentd_client.v1 import agentd_pb2 as pb

log = logging.getLogger(__name__)


class Streams(Protocol):
    """What a forward connection asks of the port handlers (api/handlers/ports.py)."""

    def open_stream(
        self, session_id: str, start: pb.ForwardMuxStart, path: str, who: str, outbox: Outbox
    ) -> SessionMux: ...

    def close_stream(self, session_id: str, mux: SessionMux, how: str) -> None: ...

    def on_stop(self, closer: Callable[[], None]) -> Callable[[], None]: ...


class ForwardConnection(asyncio.Protocol):
    """One forward stream on the terminal socket: made by `start` from the connection
    that presented the grant, which is READY once this returns."""

    def __init__(self, streams: Streams, grant: ForwardGrant) -> None:
        self._streams = streams
        self._grant = grant
        self._reader = FrameViews(MAX_FRAMES_PAYLOAD)
        self._writer = Writer()
        self._outbox = Outbox(self._writer.write, BATCH_BYTES)
        start = pb.ForwardMuxStart(
            session_id=grant.session_id,
            port=grant.port,
            host=grant.host,
            forward_id=grant.forward_id,
        )
        # TooMany (the streams' caps) or the session's error: the caller refuses with it.
        self._mux: SessionMux | None = streams.open_stream(
            grant.session_id, start, grant.namespace, grant.by, self._outbox
        )
        self._sending: asyncio.Future[None] | None = None
        self._forget_stop = streams.on_stop(lambda: self._end("the daemon stopped"))
        # As ForwardMux says it: the client ended its stream (closed or dropped).
        self._how = "cancelled by the client"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._writer.attach(transport)
        self._sending = asyncio.ensure_future(self._outbox.run())
        self._sending.add_done_callback(self._sent)
        log.info(
            "terminal socket: port %d of session %s forwarded for %s",
            self._grant.port,
            self._grant.session_id,
            self._grant.by,
        )

    def data_received(self, data: bytes) -> None:
        mux = self._mux
        if mux is None:
            return
        try:
            for kind, payload in self._reader.feed(data):
                if kind != FRAMES:
                    raise wire.FrameError(f"a frame of kind {kind} on a forward")
                frames = frames_of(payload)
                if frames is None:
                    for frame in pb.ForwardMuxRequest.FromString(bytes(payload)).frames:
                        mux.receive(frame)
                    continue
                for cid, kind_, value in frames:
                    mux.take(cid, kind_, value)
        except Backlogged:
            self._end("the client reads none of its stream")
        except Exception as exc:  # noqa: BLE001 - not this protocol: the stream ends
            self._end(f"not a forward's frames: {str(exc)[:200]}")

    def pause_writing(self) -> None:
        self._writer.pause()

    def resume_writing(self) -> None:
        self._writer.resume()

    def eof_received(self) -> bool | None:
        return None  # the client is done with this forward: its connections end

    def connection_lost(self, exc: Exception | None) -> None:
        self._writer.resume()
        self._finish(self._how)

    def _sent(self, sending: asyncio.Future[None]) -> None:
        if not sending.cancelled() and sending.exception() is not None:
            self._end("the client's socket is gone")

    def _end(self, how: str) -> None:
        self._how = how
        transport = self._writer.transport
        if transport is not None and not transport.is_closing():
            transport.abort()  # connection_lost follows, soon
        else:
            self._finish(how)

    def _finish(self, how: str) -> None:
        mux, self._mux = self._mux, None
        if mux is None:
            return
        self._forget_stop()
        if self._sending is not None:
            self._sending.cancel()
        self._streams.close_stream(self._grant.session_id, mux, how)
