"""A session's permissions: a person's changes to its mode and rules, and the answers to
its permission prompts."""

from __future__ import annotations

from typing import Any

from agentd.api.handlers.rpc import client_identity, require, unary
from agentd.api.wire import session_to_pb
from agentd.foundation.errors import InvalidRequest
from agentd.permissions import Asker
from agentd.permissions.asker import checked_timeout
from agentd.permissions.session_update import PermissionUpdate, update_permissions
from agentd.sessions.session import SessionManager
from agentd_client.v1 import agentd_pb2 as pb


class PermissionHandlers:
    def __init__(self, sessions: SessionManager, asker: Asker) -> None:
        self.sessions = sessions
        self.asker = asker

    @unary
    async def UpdatePermissions(
        self, request: pb.UpdatePermissionsRequest, context: Any
    ) -> pb.Session:
        session = self.sessions.get(require(request.session_id, "session_id"), open_only=True)
        self.sessions.store.require_writable("Changing permissions")
        update = PermissionUpdate(
            mode=request.permission_mode,
            allow=tuple(request.add_allow),
            deny=tuple(request.add_deny),
            ask=tuple(request.add_ask),
            ask_timeout_seconds=(
                checked_timeout(request.ask_timeout_seconds, "ask_timeout_seconds")
                if request.HasField("ask_timeout_seconds")
                else None
            ),
        )
        update_permissions(session, update)
        self.sessions.save(session)
        self.sessions.store.flush()  # durable before it is acknowledged
        return session_to_pb(session)

    @unary
    async def ResolvePermission(
        self, request: pb.ResolvePermissionRequest, context: Any
    ) -> pb.ResolvePermissionResponse:
        self.sessions.get(require(request.session_id, "session_id"))
        require(request.request_id, "request_id")
        if request.decision not in ("allow", "deny"):
            raise InvalidRequest("decision must be 'allow' or 'deny'")
        scope = request.scope or "once"
        if scope not in ("once", "always"):
            raise InvalidRequest("scope must be 'once' or 'always'")
        accepted, message = self.asker.resolve(
            request.session_id,
            request.request_id,
            request.decision,
            scope,
            decided_by=client_identity(context),
            rule=request.rule,
        )
        self.sessions.store.flush()  # a rule it added, and the decision, durable first
        return pb.ResolvePermissionResponse(accepted=accepted, message=message)
