"""The ask before a key's first signature for a host in a session: shaped
as a tool call's (tool "SshAgent"), so every attached terminal shows and may answer it;
"always" adds the rule `SshAgent(HOST KEY)` to the session's allow rules (kept with
the session, shown by `session show`), as the network ask adds its WebFetch rule."""

from __future__ import annotations

from agentd.credentials.ssh_agent_service import AskFn
from agentd.network.state import AskAnswer
from agentd.permissions.asker import Asker
from agentd.permissions.decision import Behavior
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
        allowed = answer.decision is Behavior.ALLOW
        added = ""
        if answer.scope == "always" and (chosen := answer.rule or rule):
            rules = session.allow_rules if allowed else session.deny_rules
            if chosen not in rules:
                rules.append(chosen)
                sessions.save(session)
            added = chosen
        if answer.decided_by == "timeout":
            how = "not allowed, and nobody answered the ask in time"
        elif answer.decided_by == "cancelled":
            how = "not allowed; the ask was cancelled"
        elif allowed:
            how = f"{answer.decided_by} ({answer.scope})"
        else:
            how = f"refused by {answer.decided_by} ({answer.scope})"
        return AskAnswer(allowed, how, added)

    return ask
