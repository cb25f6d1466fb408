"""Step 9 of the engine's order, the tool's own check, for calls no rule or hook
decided: what runs unasked by its nature (session-state tools, read-only commands,
reads inside the roots, edits in acceptEdits) and what asks, with the reasons and the
paths a person's yes would grant."""

from __future__ import annotations

import os

from agentd.permissions.call import PERMISSIONLESS_TOOLS, Allow, Ask, Call
from agentd.permissions.paths import is_within
from agentd.permissions.rules import EDIT_TOOLS, url_host
from agentd.permissions.settings import MergedSettings
from agentd.sandboxing.mode import SandboxMode
from agentd.sessions.session import Session
from agentd.tools.base import ToolContext


def tool_check(
    call: Call,
    session: Session,
    settings: MergedSettings,
    ctx: ToolContext,
    mode: str,
    choices: tuple[str, ...],
) -> Allow | Ask:
    """Allow or Ask by the call's own nature; `choices` are the rules an Ask offers."""
    if call.name in PERMISSIONLESS_TOOLS:
        return Allow("mode", f"{call.name} touches only the session's own state")
    if call.is_bash:
        if call.classification.read_only:
            # Nothing but the verdict allows it: the sandbox enforces the verdict.
            return Allow("classifier", "read-only command", sandbox=SandboxMode.READ_ONLY)
        return Ask("classifier", bash_reasons(call), choices)
    if call.path:
        inside = _inside(call.path, session, settings)
        grants = grants_for(call, ctx)
        if call.access_mode == "write" or call.name in EDIT_TOOLS:
            if not inside:
                return Ask("mode", [f"writes {call.path}, outside the workspace"], choices, grants)
            if mode == "acceptEdits":
                return Allow("mode", "acceptEdits mode: a file edit inside the workspace", grants)
            return Ask("mode", [f"edits {call.path} ({mode} mode asks for edits)"], choices, grants)
        if inside or is_within(call.path, os.path.normpath(ctx.state_dir)):
            return Allow("mode", "a read inside the workspace", grants)
        return Ask("mode", [f"reads {call.path}, outside the workspace"], choices, grants)
    if call.url:
        return Ask("mode", [f"fetches from {url_host(call.url) or call.url}"], choices)
    if call.read_only():
        return Allow("mode", "read-only tool")
    return Ask("mode", [f"{call.name} is not read-only"], choices)


def grants_for(call: Call, ctx: ToolContext) -> list[str]:
    """The path a file call needs granted when it lies outside the call's roots."""
    if not call.path:
        return []
    roots = ctx.roots("write" if call.access_mode == "write" else "read")
    if any(is_within(call.path, os.path.normpath(r)) for r in roots):
        return []
    return [call.path]


def bash_reasons(call: Call) -> list[str]:
    """Why a Bash command is not read-only, as the classifier said it; [] for other tools."""
    if call.is_bash:
        return list(call.classification.reasons) or ["the command is not read-only"]
    return []


def _inside(path: str, session: Session, settings: MergedSettings) -> bool:
    roots = [*session.workspace_roots, *session.additional_dirs, *settings.additional_dirs]
    return any(is_within(path, os.path.normpath(r)) for r in roots)
