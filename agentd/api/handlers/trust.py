"""Workspace settings content a person trusts (`agentctl trust`): list, approve, revoke."""

from __future__ import annotations

from typing import Any

from agentd.api.handlers.rpc import client_identity, require, unary
from agentd.api.wire import trust_to_pb
from agentd.permissions.approvals import Approvals
from agentd_client.v1 import agentd_pb2 as pb


class TrustHandlers:
    def __init__(self, approvals: Approvals) -> None:
        self.approvals = approvals

    @unary
    async def ListTrust(self, request: pb.ListTrustRequest, context: Any) -> pb.ListTrustResponse:
        entries = await self.approvals.trust_entries(request.path)
        return pb.ListTrustResponse(entries=[trust_to_pb(e) for e in entries])

    @unary
    async def ApproveTrust(self, request: pb.ApproveTrustRequest, context: Any) -> pb.TrustEntry:
        entry = await self.approvals.approve(
            require(request.path, "path"),
            require(request.sha256, "sha256"),
            client_identity(context),
        )
        return trust_to_pb(entry)

    @unary
    async def RevokeTrust(
        self, request: pb.RevokeTrustRequest, context: Any
    ) -> pb.RevokeTrustResponse:
        gone = self.approvals.revoke(require(request.path, "path"), request.sha256)
        return pb.RevokeTrustResponse(revoked=[trust_to_pb(e) for e in gone])
