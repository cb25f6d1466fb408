"""The event stream of `agentctl attach`, kept across daemon restarts.

A thread reads the session's events in order and hands them on. When the stream breaks
(the daemon stopped, restarted, or the network went), it says so, waits a quarter
second, doubling up to ten, and tries again with a new connection; once the daemon
answers, it attaches after the last event it received, as `kubectl get -w` and
`journalctl -f` go on, so no event is shown twice and none is lost. A closed session,
or one the daemon does not know, ends it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import grpc

from agentd_client.core.client import Client
from agentd_client.core.errors import AgentdError, NotFound
from agentd_client.terminal import sanitize

# What the link hands on last: the session's stream is over.
END = object()
# Reconnecting: the first wait, doubled up to the last.
BACKOFF = (0.25, 10.0)


def why(error: BaseException | None) -> str:
    """What happened to the connection, in a few words."""
    if not isinstance(error, grpc.RpcError):
        return "its stream ended"
    code = error.code()
    if code == grpc.StatusCode.UNAVAILABLE:
        return "not reachable"
    return sanitize.line(f"{code.name.lower()}: {(error.details() or '')[:120]}")


class EventLink:
    """Hands `put` ("event", e) in order; ("lost", why), ("retry", attempt, delay, why) and
    ("reconnected", client, status, session) around a restart; ("error", exc); END."""

    def __init__(
        self,
        session_id: str,
        connect: Callable[[], Client] | None,
        put: Callable[[Any], None],
        stopping: threading.Event,
        after_seq: int,
    ) -> None:
        self.session_id = session_id
        self.connect = connect
        self.put = put
        self.stopping = stopping
        self.last_seq = after_seq  # of the last event received

    def run(self, c: Client, stream: Any) -> None:
        while not self.stopping.is_set():
            error: BaseException | None = None
            try:
                for event in stream:
                    if event.seq:
                        self.last_seq = event.seq
                    self.put(("event", event))
            except grpc.RpcError as exc:
                error = exc
            if self.stopping.is_set() or self.connect is None:
                break
            if isinstance(error, NotFound):
                self.put(("error", error))
                break
            if error is None:
                # The stream ended: the session closed, or the daemon is stopping.
                try:
                    if c.get_session(self.session_id, timeout=5).closed:
                        break
                except AgentdError as exc:
                    error = exc
            reconnected = self._reconnect(error)
            if reconnected is None:
                break
            c, stream = reconnected
        self.put(END)

    def _reconnect(self, error: BaseException | None) -> tuple[Client, Any] | None:
        assert self.connect is not None
        self.put(("lost", why(error)))
        delay = BACKOFF[0]
        attempt = 0
        while not self.stopping.wait(delay):
            attempt += 1
            try:
                c = self.connect()
                status = c.status(timeout=5)
                session = c.get_session(self.session_id, timeout=5)
                stream = c.attach(self.session_id, self.last_seq)
                if not stream.wait_attached():
                    raise AgentdError("the daemon did not take the attach")
            except grpc.RpcError as exc:
                delay = min(delay * 2, BACKOFF[1])
                self.put(("retry", attempt, delay, why(exc)))
                continue
            self.put(("reconnected", c, status, session))
            return c, stream
        return None
