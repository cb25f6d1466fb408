"""Sessions: create, read, list, close, and collect the idle and the long closed."""

from __future__ import annotations

from typing import Any

from agentd.api.handlers.rpc import require, unary
from agentd.api.wire import session_to_pb, struct_or_none
from agentd.network.service import NetworkService
from agentd.permissions.approvals import Approvals
from agentd.permissions.asker import checked_timeout
from agentd.sessions.retention import Reaper
from agentd.sessions.session import SessionManager
from agentd_client.core import structs
from agentd_client.v1 import agentd_pb2 as pb


class SessionHandlers:
    def __init__(
        self,
        sessions: SessionManager,
        approvals: Approvals,
        reaper: Reaper,
        network: NetworkService | None,
    ) -> None:
        self.sessions = sessions
        self.approvals = approvals
        self.reaper = reaper
        # Proxied sessions' network, for the summary GetSession shows (None: none).
        self.network = network

    @unary
    async def CreateSession(self, request: pb.CreateSessionRequest, context: Any) -> pb.Session:
        self.sessions.store.require_writable("Creating the session")
        session = self.sessions.create(
            list(request.workspace_roots),
            cwd=request.cwd,
            env=dict(request.env),
            name=request.name,
            labels=dict(request.labels),
            permission_mode=request.permission_mode,
            allow_network=request.allow_network,
            allow_unsandboxed=request.allow_unsandboxed,
            network=request.network,
            ask_timeout_seconds=checked_timeout(request.ask_timeout_seconds, "ask_timeout_seconds"),
            review=request.review,
        )
        return session_to_pb(session)

    @unary
    async def GetSession(self, request: pb.GetSessionRequest, context: Any) -> pb.Session:
        session = self.sessions.get(require(request.session_id, "session_id"))
        out = session_to_pb(session, self.sessions.log(session.id))
        if not session.closed:
            network = self.network
            if network is not None and (summary := network.summary(session.id)):
                structs.fill(out.network_summary, summary)
            for path, sha, widens, reason in await self.approvals.ignored(session):
                out.ignored_settings.add(
                    path=path, sha256=sha, widens=struct_or_none(widens or None), reason=reason
                )
        return out

    @unary
    async def ListSessions(
        self, request: pb.ListSessionsRequest, context: Any
    ) -> pb.ListSessionsResponse:
        sessions = self.sessions.list(include_closed=request.include_closed)
        # Closed sessions go without their event logs: loading one per closed session
        # would cost a query each and keep it in memory for good.
        return pb.ListSessionsResponse(
            sessions=[
                session_to_pb(s, None if s.closed else self.sessions.log(s.id)) for s in sessions
            ]
        )

    @unary
    async def CloseSession(self, request: pb.CloseSessionRequest, context: Any) -> pb.Session:
        session = self.sessions.get(require(request.session_id, "session_id"))
        if not session.closed:
            self.sessions.store.require_writable("Closing the session")
        return session_to_pb(await self.sessions.close(session.id))

    @unary
    async def CollectSessions(
        self, request: pb.CollectSessionsRequest, context: Any
    ) -> pb.CollectSessionsResponse:
        if not request.dry_run:
            self.sessions.store.require_writable("Collecting sessions")
        done = await self.reaper.collect_asked(
            request.idle_seconds if request.HasField("idle_seconds") else None,
            request.reap_after_seconds if request.HasField("reap_after_seconds") else None,
            dry_run=request.dry_run,
        )
        return pb.CollectSessionsResponse(
            sessions=[
                pb.CollectedSession(
                    id=c.id,
                    name=c.name,
                    action=c.action,
                    idle_seconds=c.idle_seconds,
                    reason=c.reason,
                )
                for c in done
            ]
        )
