"""The ask for a git push through a credential route that must ask (a protected ref, a
deletion, a force push): shown on every attached terminal like a tool call's (tool
"GitPush"), whatever the session's mode, and answered once: no "always" is offered,
each such push is a person's decision."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agentd.permissions.asker import Asker
from agentd.permissions.decision import Behavior

PushAsk = Callable[[str, str, dict[str, Any], list[str]], Awaitable[tuple[bool, str]]]


def push_asker(asker: Asker) -> PushAsk:
    async def ask(
        session_id: str, tool_use_id: str, tool_input: dict[str, Any], reasons: list[str]
    ) -> tuple[bool, str]:
        answer = await asker.ask(
            session_id,
            tool_use_id=tool_use_id,
            tool_name="GitPush",
            tool_input=tool_input,
            reasons=reasons,
        )
        allowed = answer.decision is Behavior.ALLOW
        if answer.decided_by == "timeout":
            return False, "refused: nobody answered the ask in time"
        if answer.decided_by == "cancelled":
            return False, "refused: the ask was cancelled"
        return allowed, f"{'allowed' if allowed else 'refused'} by {answer.decided_by}"

    return ask
