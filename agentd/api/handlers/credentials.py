"""`agentctl credentials`: the configured sources and routes and which sessions used
them; never a secret (a source is shown by where it comes from)."""

from __future__ import annotations

from typing import Any

from agentd.api.handlers.rpc import unary
from agentd.credentials.masks import CredentialMasks
from agentd.credentials.service import CredentialService
from agentd.credentials.ssh_agent_service import SshAgentService
from agentd_client.v1 import agentd_pb2 as pb


class CredentialHandlers:
    def __init__(
        self,
        service: CredentialService | None,
        ssh_agent: SshAgentService | None,
        masks: CredentialMasks | None = None,
    ) -> None:
        # None: no credential routes (this daemon keeps no network namespaces).
        self.service = service
        # None: no ssh-agent for sandboxes (`ssh_agent_hosts` unset).
        self.ssh_agent = ssh_agent
        # None: no sandbox.credentials entries.
        self.masks = masks

    @unary
    async def ListCredentials(
        self, request: pb.ListCredentialsRequest, context: Any
    ) -> pb.ListCredentialsResponse:
        service = self.service
        ssh_agent = _ssh_agent(self.ssh_agent)
        masked = _masked(self.masks)
        if service is None:
            return pb.ListCredentialsResponse(available=False, ssh_agent=ssh_agent, masked=masked)
        shown = service.summary()
        return pb.ListCredentialsResponse(
            available=True,
            ssh_agent=ssh_agent,
            masked=masked,
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


def _masked(masks: CredentialMasks | None) -> list[pb.MaskedCredential]:
    if masks is None:
        return []
    return [
        pb.MaskedCredential(
            kind=e["kind"],
            name=e["name"],
            mode=e["mode"],
            inject_hosts=e["inject_hosts"],
            source=e["source"],
            sessions=[
                pb.MaskedCredentialUse(session_id=sid, **use) for sid, use in e["sessions"].items()
            ],
        )
        for e in masks.summary()
    ]


def _ssh_agent(agent: SshAgentService | None) -> pb.SshAgentShown:
    """The sandbox's ssh-agent as `agentctl credentials` shows it (none configured: off)."""
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
