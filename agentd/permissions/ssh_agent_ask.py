"""The ask before a key's first signature for a host in a session: shaped
as a tool call's (tool "SshAgent"), so every attached terminal shows and may answer it;
"always" adds the rule `SshAgent(HOST KEY)` to the session's allow rules (kept with
the session, shown by `session show`), as the network ask adds its WebFetch rule."""

from __future__ import annotations

from agentd.credentials.ssh_agent_service import AskFn
from agentd.network.state import AskAnswer
from agentd.permissions.asker import Asker
from agentd.permissions.network_rules import settled
from agentd.sessions.session import Session, SessionManager


def ssh_agent_asker(asker: Asker, sessions: SessionManager) -> AskFn:
    async def ask(session: Session, host: str, fingerprint: str, user: str, rule: str) -> AskAnswer:
        answer = await asker.ask(
            session.id,
            tool_use_id="",
            tool_name="SshAgent",
            tool_input={"host": host, "key": fingerprint, "user": user},
            reasons=[
                f"a sandboxed ssh wants to log in as {user}@{host} with the key {fingerprint}",
                f"always: adds {rule} (this key may sign for this host in this session)",
            ],
            rule_choices=(rule,),
        )
        return settled(answer, session, sessions, rule)

    return ask
