"""What a permission check concludes, carried out: the journal entry, the Decision, and
for an ask, the question put to the people attached (or the deny that replaces it).
"""

from __future__ import annotations

import logging
import shlex
from typing import Any

from agentd.permissions.asker import Asker, waiting
from agentd.permissions.call import Ask, Call
from agentd.permissions.decision import Behavior, Decision
from agentd.sandboxing.mode import SandboxMode
from agentd.sessions.event_types import PermissionDecided
from agentd.sessions.session import Session, SessionManager
from agentd.tools.base import ToolContext

log = logging.getLogger("agentd.permissions.engine")


class Outcomes:
    """Records every decision and turns an ask into an answer."""

    def __init__(self, sessions: SessionManager, asker: Asker) -> None:
        self.sessions = sessions
        self.asker = asker

    def record(
        self,
        session: Session,
        ctx: ToolContext,
        tool_name: str,
        behavior: Behavior,
        by: str,
        why: str,
    ) -> None:
        self.sessions.log(session.id).emit(
            PermissionDecided(
                tool_use_id=ctx.tool_use_id,
                tool_name=tool_name,
                behavior=behavior,
                decided_by=by,
                reason=why,
            )
        )
        # Every decision is in the journal (above). The daemon's log names denials and what
        # a person decided; an automatic allow (mode, rule, classifier, hook) is a debug
        # line: an INFO line on every call cost ~0.4 ms of the loop's time (the record
        # crosses to the log thread and contends for the GIL).
        automatic = behavior is Behavior.ALLOW and by != "person"
        log.log(
            logging.DEBUG if automatic else logging.INFO,
            "session %s: %s %s: %s by %s (%s)",
            session.id,
            tool_name,
            ctx.tool_use_id,
            behavior,
            by,
            why,
        )

    def deny(
        self, session: Session, ctx: ToolContext, tool_name: str, by: str, reason: str
    ) -> Decision:
        self.record(session, ctx, tool_name, Behavior.DENY, by, reason)
        return Decision(Behavior.DENY, reason=reason, decided_by=by)

    def allow(
        self,
        session: Session,
        ctx: ToolContext,
        call: Call,
        by: str,
        reason: str,
        updated: dict[str, Any] | None,
        grants: list[str],
        *,
        sandbox: SandboxMode = SandboxMode.NORMAL,
        mode: str = "",
    ) -> Decision:
        for path in grants:
            if path not in ctx.granted_paths:
                ctx.granted_paths.append(path)
        if (
            call.is_bash
            and mode == "plan"
            and sandbox
            in (
                SandboxMode.NORMAL,
                SandboxMode.NEUTRALISED,
            )
        ):
            # Plan mode let the command through only because it is read-only: hold it to that.
            sandbox = SandboxMode.READ_ONLY
        if sandbox is not SandboxMode.NORMAL:
            how = {SandboxMode.NEUTRALISED: "with the repository's git config neutralised"}
            reason = f"{reason}; runs {how.get(sandbox, sandbox.replace('_', '-'))}"
        self.record(session, ctx, call.name, Behavior.ALLOW, by, reason)
        return Decision(
            Behavior.ALLOW, reason=reason, decided_by=by, updated_input=updated, sandbox=sandbox
        )

    async def ask(
        self,
        session: Session,
        ctx: ToolContext,
        call: Call,
        ask: Ask,
        mode: str,
        updated: dict[str, Any] | None,
    ) -> Decision:
        why = "; ".join(ask.reasons) or "needs approval"
        if mode == "dontAsk":
            how = (
                f" The user can allow it with `agentctl perms --session {session.id} "
                f"--allow {shlex.quote(ask.suggested_rule)}`."
                if ask.suggested_rule
                else ""
            )
            return self.deny(
                session,
                ctx,
                call.name,
                "mode",
                f"Permission to use {call.describe()} was not granted: it needs approval "
                f"({why}) and the session is in dontAsk mode, where that is a deny.{how} "
                "Try another way that needs no approval.",
            )
        self.record(session, ctx, call.name, Behavior.ASK, ask.decided_by, why)
        if not self.asker.has_listeners(session.id):
            ways = [f"attach with `agentctl attach {session.id}` and answer the prompt"]
            if ask.suggested_rule:
                ways.append(
                    f"add a rule with `agentctl perms --session {session.id} "
                    f"--allow {shlex.quote(ask.suggested_rule)}`"
                )
            ways.append(f"switch mode with `agentctl perms --session {session.id} --mode MODE`")
            return self.deny(
                session,
                ctx,
                call.name,
                "nobody-attached",
                f"Permission to use {call.describe()} is needed ({why}), but no client is "
                f"attached to session {session.id} to answer. The user can allow it: "
                + "; or ".join(ways)
                + ". Tell the user, or do something that needs no approval.",
            )
        answer = await self.asker.ask(
            session.id,
            tool_use_id=ctx.tool_use_id,
            tool_name=call.name,
            tool_input=call.args,
            reasons=ask.reasons,
            rule_choices=ask.rule_choices,
            cancelled=ctx.cancelled,
            announce=waiting(ctx, "waiting for permission"),
            timeout=ctx.ask_timeout,
        )
        if answer.scope == "always" and (rule := answer.rule or ask.suggested_rule):
            allow = answer.decision is Behavior.ALLOW
            rules = session.allow_rules if allow else session.deny_rules
            if rule not in rules:
                rules.append(rule)
                self.sessions.save(session)
        if answer.decision is Behavior.ALLOW:
            return self.allow(
                session,
                ctx,
                call,
                answer.decided_by,
                f"approved ({answer.scope})",
                updated,
                ask.grants,
                sandbox=ask.sandbox,
                mode=mode,
            )
        if answer.decided_by == "timeout":
            reason = (
                f"Permission to use {call.describe()} was not granted: nobody answered within "
                f"{self.asker.timeout_for(session.id, ctx.ask_timeout):g}s, so it is denied. "
                "Ask the user to approve it "
                "or to add an allow rule, or do something that needs no approval."
            )
        elif answer.decided_by == "cancelled":
            reason = "The call was cancelled while waiting for permission."
        else:
            reason = (
                f"The user denied permission to use {call.describe()}. Do not retry it; "
                "ask the user how to proceed, or take another approach."
            )
        return self.deny(session, ctx, call.name, answer.decided_by, reason)
