"""A session's events: following them (Attach), and an agent's own events added to them."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from agentd.api.handlers.rpc import client_identity, require, stream, unary
from agentd.api.wire import event_to_pb
from agentd.foundation.errors import InvalidRequest
from agentd.sessions import agent_events
from agentd.sessions.event_types import Agent
from agentd.sessions.session import SessionManager
from agentd_client.core.calls import ATTACHED_KEY
from agentd_client.v1 import agentd_pb2 as pb

log = logging.getLogger(__name__)

# Sequence numbers are SQLite integers.
MAX_SEQ = 2**63 - 1


class EventHandlers:
    def __init__(self, sessions: SessionManager) -> None:
        self.sessions = sessions

    @stream
    async def Attach(self, request: pb.AttachRequest, context: Any) -> AsyncIterator[pb.Event]:
        log_ = self.sessions.log(require(request.session_id, "session_id"))
        if request.after_seq > MAX_SEQ:
            raise InvalidRequest(f"after_seq {request.after_seq} is out of range (0 to {MAX_SEQ})")
        log.info(
            "session %s: %s attached (after seq %d)",
            request.session_id,
            client_identity(context),
            request.after_seq,
        )

        async def registered() -> None:
            # The attach counts from here (asks reach it): say so before any event, so a
            # client can wait for it (an approver must be in place before the first ask).
            await context.send_initial_metadata(((ATTACHED_KEY, str(log_.last_seq)),))

        # Closed here, not whenever it is collected, when the caller goes away.
        if request.no_follow:
            subscription = log_.replay(request.after_seq)
        else:
            subscription = log_.subscribe(request.after_seq, registered)
        async with contextlib.aclosing(subscription) as events:
            async for event in events:
                yield event_to_pb(event)

    @unary
    async def AppendAgentEvent(
        self, request: pb.AppendAgentEventRequest, context: Any
    ) -> pb.AppendAgentEventResponse:
        session = self.sessions.get(require(request.session_id, "session_id"), open_only=True)
        live = agent_events.check(request.event)
        if not live:
            self.sessions.store.require_writable("Journaling the event")
        body = Agent(agent_events.to_payload(request.event), live=live)
        event = self.sessions.log(session.id).emit(body)
        if not live:
            self.sessions.store.flush()  # durable before its seq is acknowledged
        return pb.AppendAgentEventResponse(seq=event.seq)
