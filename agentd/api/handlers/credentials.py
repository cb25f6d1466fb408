"""`agentctl credentials`: the configured sources and routes and which sessions used
them; never a secret (a source is shown by where it comes from)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentd.api.handlers.rpc import unary
from agentd.credentials import ssh_agent_service
from agentd.credentials.service import CredentialService
from agentd_client.v1 import agentd_pb2 as pb


class CredentialHandlers:
    def __init__(self, service: Callable[[], CredentialService | None]) -> None:
        # The service is made when the daemon starts (it needs the network's).
        self.service = service

    @unary
    async def ListCredentials(
        self, request: pb.ListCredentialsRequest, context: Any
    ) -> pb.ListCredentialsResponse:
        service = self.service()
        ssh_agent = _ssh_agent()
        if service is None:
            return pb.ListCredentialsResponse(available=False, ssh_agent=ssh_agent)
        shown = service.summary()
        return pb.ListCredentialsResponse(
            available=True,
            ssh_agent=ssh_agent,
            sources=[pb.CredentialSource(**s) for s in shown["sources"]],
            routes=[
                pb.CredentialRoute(
                    name=r["name"],
                    kind=r["kind"],
                    upstream=r["upstream"],
                    source=r["source"],
                    header=r["header"],
                    url=r["url"],
                    env=r["env"],
                    sessions=[
                        pb.CredentialUse(session_id=sid, **use)
                        for sid, use in r["sessions"].items()
                    ],
                )
                for r in shown["routes"]
            ],
            protected_refs=shown["protected_refs"],
        )


def _ssh_agent() -> pb.SshAgentShown:
    """The sandbox's ssh-agent as `agentctl credentials` shows it (none configured: off)."""
    agent = ssh_agent_service.current()
    if agent is None:
        return pb.SshAgentShown(enabled=False)
    shown = agent.listing()
    return pb.SshAgentShown(
        enabled=True,
        hosts=shown["hosts"],
        known_hosts=shown["known_hosts"],
        keys=[pb.SshAgentKey(**k) for k in shown["keys"]],
        upstream=shown["upstream"] or "",
        uses=[
            pb.SshAgentUse(session_id=sid, **use)
            for sid, uses in shown["sessions"].items()
            for use in uses
        ],
    )
