"""The ask before a key's first signature for a host in a session (creds-ssh): shaped
as a tool call's (tool "SshAgent"), so every attached terminal shows and may answer it;
"always" is remembered for the session by the agent (agentd/credentials/)."""

from __future__ import annotations

from agentd.credentials.ssh_agent_service import AskFn
from agentd.network.state import AskAnswer
from agentd.permissions.asker import Asker
from agentd.permissions.decision import Behavior
from agentd.sessions.session import Session


def ssh_agent_asker(asker: Asker) -> AskFn:
    async def ask(
        session: Session, host: str, fingerprint: str, user: str
    ) -> tuple[AskAnswer, bool]:
        answer = await asker.ask(
            session.id,
            tool_use_id="",
            tool_name="SshAgent",
            tool_input={"host": host, "key": fingerprint, "user": user},
            reasons=[
                f"a sandboxed ssh wants to log in as {user}@{host} with the key {fingerprint}",
                "always: this key may sign for this host for the rest of the session",
            ],
        )
        allowed = answer.decision is Behavior.ALLOW
        if answer.decided_by == "timeout":
            how = "not allowed, and nobody answered the ask in time"
        elif answer.decided_by == "cancelled":
            how = "not allowed; the ask was cancelled"
        elif allowed:
            how = f"{answer.decided_by} ({answer.scope})"
        else:
            how = f"refused by {answer.decided_by} ({answer.scope})"
        return AskAnswer(allowed, how), allowed and answer.scope == "always"

    return ask
