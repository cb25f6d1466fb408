"""The permission engine: one decision per tool call, and PostToolUse hooks after it.

The order, first match wins:

 0. The workspace's settings files are read; what they restrict applies, what they
    widen only while their exact content is trusted (settings.py, trust.py). An
    untrusted widening part is reported once per content (a `settings_ignored` event)
    and, when a person is attached, offered for trust ("trust these settings?").
 1. PreToolUse hooks (trusted settings content only) run, in the session's sandbox; an
    `updatedInput` replaces those keys of the input for everything below. A hook's deny
    (or exit 2) denies.
 2. Deny rules deny. A Bash command is denied if the whole command or any of its
    simple commands (wrappers and VAR= prefixes seen through) matches.
 3. Plan mode denies anything that is not read-only.
 4. A write to a protected path (agentd/sandboxing/protected.py: `.git/`, `.claude/`, shell rc
    files...) asks, in every mode, unless an allow rule names that path explicitly (no
    wildcard; permissions/protected_paths.py). A recursive or forced `rm` (or
    `find -delete`/`-exec rm`) of /, the home directory, a workspace root or one of its
    parents, as bash would resolve it, asks in every mode, whatever the allow rules say
    (permissions/critical.py). A Bash call with `dangerouslyDisableSandbox` asks a
    person here too, whatever the mode and rules.
 5. A hook's ask asks; a hook's allow allows.
 6. bypassPermissions allows.
 7. Ask rules ask.
 8. Allow rules allow. A Bash command is allowed by rules only if some simple command's
    literal text begins with an allow rule's prefix and everything the rules did not see
    (other commands, VAR= prefixes, wrappers, options before the subcommand, redirects,
    expansions) is read-only on its own (permissions/bashrules.py).
 9. The tool's own check (permissions/tool_check.py): tools that only touch the
    session's own state run; Bash runs when the classifier says read-only; file reads
    inside the workspace, the additional directories or the session's state dir run;
    file writes inside the workspace run in acceptEdits; everything else asks (paths
    outside the workspace, writes in default mode, commands that change things,
    WebFetch). A Bash command allowed here, by the classifier's verdict alone, runs
    read-only (Decision.sandbox): the workspace read-only, no network; so does every
    Bash command in plan mode. A read-only command an allow rule lets run keeps the
    workspace writable but runs with the repository's git config neutralised (step 8).
10. An ask becomes a deny in dontAsk mode, and when no client is attached to answer;
    otherwise it is a PermissionRequested event and waits for the first answer, or
    the timeout (a deny).

Every decision goes to the journal as `permission_decided` and to the daemon's log.
A path outside the roots that a decision allows is added to `ctx.granted_paths`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from agentd.foundation.config import Config
from agentd.permissions import hooks as hook_runner
from agentd.permissions.approvals import Approvals
from agentd.permissions.asker import Asker
from agentd.permissions.call import Allow, Ask, Call, describe_call, rule_note
from agentd.permissions.critical import critical_rm
from agentd.permissions.decision import Behavior, Decision
from agentd.permissions.matching import RuleMatcher
from agentd.permissions.offered import rule_choices
from agentd.permissions.outcomes import Outcomes
from agentd.permissions.paths import is_within
from agentd.permissions.protected_edits import explicit_allow, protected_reason
from agentd.permissions.settings import MergedSettings, SettingsLoader
from agentd.permissions.tool_check import bash_reasons, grants_for, tool_check
from agentd.sandboxing import policy as sandbox_policy
from agentd.sandboxing.mode import SandboxMode
from agentd.sessions.session import Session, SessionManager
from agentd.tools.base import TextBlock, Tool, ToolContext, ToolResult

log = logging.getLogger(__name__)

_REMEMBERED_POST_HOOKS = 1024


class PermissionEngine:
    """The executor's PermissionChecker."""

    def __init__(
        self,
        config: Config,
        sessions: SessionManager,
        asker: Asker | None = None,
        *,
        settings: SettingsLoader | None = None,
        classify: Callable[[str], Any] | None = None,
        approvals: Approvals | None = None,
    ) -> None:
        self.config = config
        self.sessions = sessions
        self.asker = asker or Asker(sessions, config.permission_timeout_seconds)
        self.settings = settings or SettingsLoader(config)
        if classify is None:
            from agentd.bashsec import classify as bashsec_classify

            classify = bashsec_classify
        self.classify = classify
        self.approvals = approvals or Approvals(self.sessions, self.asker, self.settings)
        self.outcomes = Outcomes(sessions, self.asker)
        self.rules = RuleMatcher(self.classify)
        # (session id, tool_use_id) -> the PostToolUse hooks the decision saw, for
        # after_call: the call's hooks come from the settings it was decided under, and
        # a call without any costs no second read. Bounded: a denied call never comes back.
        self._post_hooks: OrderedDict[tuple[str, str], tuple[list[Any], str]] = OrderedDict()

    # --- the protocol ---------------------------------------------------------------------

    async def decide(
        self, session: Session, tool: Tool, args: dict[str, Any], ctx: ToolContext
    ) -> Decision:
        settings = await self.settings.for_session(session)
        if settings.untrusted or settings.unreadable:
            settings = await self.approvals.settle(session, ctx, settings)
        mode = self.effective_mode(session, settings)
        if post := settings.hooks.get("PostToolUse"):
            self._post_hooks[(session.id, ctx.tool_use_id)] = (post, mode)
            while len(self._post_hooks) > _REMEMBERED_POST_HOOKS:
                self._post_hooks.popitem(last=False)

        verdict = hook_runner.PreVerdict()
        pre_hooks = settings.hooks.get("PreToolUse", [])
        if pre_hooks:
            payload = self._hook_payload(session, tool, args, ctx, mode, "PreToolUse")
            verdict = await hook_runner.run_pre_hooks(
                pre_hooks, tool.name, payload, self._hook_sandbox(session, ctx)
            )
        updated: dict[str, Any] | None = None
        if verdict.updated_input is not None:
            updated = {**args, **verdict.updated_input}
            args = updated
        if verdict.behavior is Behavior.DENY:
            reason = f"A PreToolUse hook blocked this call: {verdict.reason}"
            return self.outcomes.deny(session, ctx, tool.name, "hook", reason)

        call = describe_call(session, tool, args, self.classify)
        # A trusted additionalDirectory is a root the call may use once allowed, as the
        # session's own are (a grant only takes effect if the call runs).
        for extra in settings.additional_dirs:
            if call.path and is_within(call.path, extra) and extra not in ctx.granted_paths:
                ctx.granted_paths.append(extra)

        if rule := self.rules.first(settings.deny, call, session, kind="deny"):
            return self.outcomes.deny(
                session,
                ctx,
                tool.name,
                "rule",
                f"Permission to use {call.describe()} has been denied by the rule "
                f"{rule_note(rule)}. Do not try to get around it; do something else, "
                "or ask the user to change the rule.",
            )

        if mode == "plan" and not call.read_only():
            return self.outcomes.deny(
                session,
                ctx,
                tool.name,
                "mode",
                f"The session is in plan mode, so only read-only work runs (reading, "
                f"searching, read-only commands); {call.describe()} would change things. "
                "Finish the plan and present it; the user switches the mode to carry it out.",
            )

        if call.is_bash and args.get("dangerouslyDisableSandbox"):
            return await self._ask_unsandboxed(session, ctx, call, mode, updated)

        ask: Ask | None = None
        if protected := protected_reason(call, session):
            if rule := explicit_allow(call, settings, session, self.rules):
                return self.outcomes.allow(
                    session,
                    ctx,
                    call,
                    "rule",
                    f"allow rule {rule_note(rule)} names the protected path",
                    updated,
                    grants_for(call, ctx),
                )
            ask = Ask(
                "protected",
                [protected],
                rule_choices(call, session, self.rules, protected=True),
                grants_for(call, ctx),
            )
        elif call.is_bash and (critical := self._critical_rm(call, session)):
            ask = Ask("classifier", [critical, *call.classification.reasons])
        elif verdict.behavior is Behavior.ASK:
            # No "always": the hook asks before any allow rule is looked at.
            ask = Ask(
                "hook",
                [f"a PreToolUse hook asks: {verdict.reason or verdict.hook}"],
                grants=grants_for(call, ctx),
            )
        elif verdict.behavior is Behavior.ALLOW:
            return self.outcomes.allow(
                session,
                ctx,
                call,
                "hook",
                f"allowed by PreToolUse hook {verdict.hook!r}",
                updated,
                grants_for(call, ctx),
                mode=mode,
            )
        elif mode == "bypassPermissions":
            return self.outcomes.allow(
                session,
                ctx,
                call,
                "mode",
                "bypassPermissions mode",
                updated,
                grants_for(call, ctx),
                mode=mode,
            )
        elif rule := self.rules.first(settings.ask, call, session, kind="ask"):
            # No "always": ask rules come before allow rules.
            ask = Ask(
                "rule",
                [f"matches the ask rule {rule_note(rule)}", *bash_reasons(call)],
                grants=grants_for(call, ctx),
            )
        elif rule := self.rules.allowed(call, settings, session):
            return self.outcomes.allow(
                session,
                ctx,
                call,
                "rule",
                f"allow rule {rule_note(rule)}",
                updated,
                grants_for(call, ctx),
                # A read-only command a rule lets run unasked still runs with the
                # repository's git config cut to inert keys: the workspace may be hostile.
                sandbox=(
                    SandboxMode.NEUTRALISED
                    if call.is_bash and call.read_only()
                    else SandboxMode.NORMAL
                ),
                mode=mode,
            )
        else:
            choices = rule_choices(call, session, self.rules)
            outcome = tool_check(call, session, settings, ctx, mode, choices)
            if isinstance(outcome, Allow):
                return self.outcomes.allow(
                    session,
                    ctx,
                    call,
                    outcome.decided_by,
                    outcome.reason,
                    updated,
                    outcome.grants,
                    sandbox=outcome.sandbox,
                    mode=mode,
                )
            ask = outcome
        return await self.outcomes.ask(session, ctx, call, ask, mode, updated)

    async def after_call(
        self,
        session: Session,
        tool: Tool,
        args: dict[str, Any],
        result: ToolResult,
        ctx: ToolContext,
    ) -> None:
        """PostToolUse hooks; what they block with is added to the result for the model."""
        # The hooks and mode of the settings the call was decided under: no second load.
        post_hooks, mode = self._post_hooks.pop((session.id, ctx.tool_use_id), ((), ""))
        if not post_hooks:
            return
        payload = self._hook_payload(session, tool, args, ctx, mode, "PostToolUse")
        payload["tool_response"] = result.data if result.data is not None else result.text_content()
        notes = await hook_runner.run_post_hooks(
            post_hooks, tool.name, payload, self._hook_sandbox(session, ctx)
        )
        for note in notes:
            result.content.append(TextBlock(f"\n\nPostToolUse hook feedback:\n{note}"))

    # --- pieces ---------------------------------------------------------------------------

    def _hook_sandbox(self, session: Session, ctx: ToolContext) -> hook_runner.PolicyFactory:
        """The session's sandbox for its hooks, built with the call's runtime."""
        runtime = ctx.services.sandbox

        def policy() -> Any:
            tmp_dir = sandbox_policy.session_tmp_dir(session, self.config, runtime)
            return sandbox_policy.policy_for(session, self.config, tmp_dir, runtime)

        return policy

    def effective_mode(self, session: Session, settings: MergedSettings) -> str:
        """The session's mode; a session in `default` takes its workspace's defaultMode."""
        if session.permission_mode == "default" and settings.default_mode:
            return settings.default_mode
        return session.permission_mode

    def _hook_payload(
        self,
        session: Session,
        tool: Tool,
        args: dict[str, Any],
        ctx: ToolContext,
        mode: str,
        event: str,
    ) -> dict[str, Any]:
        return {
            "session_id": session.id,
            "transcript_path": "",
            "cwd": session.cwd,
            "hook_event_name": event,
            "tool_name": tool.name,
            "tool_input": args,
            "tool_use_id": ctx.tool_use_id,
            "permission_mode": mode,
        }

    def _critical_rm(self, call: Call, session: Session) -> str:
        """A reason when the command recursively or forcibly removes a critical path."""
        return critical_rm(
            call.classification, session.cwd, session.home, list(session.workspace_roots)
        )

    async def _ask_unsandboxed(
        self,
        session: Session,
        ctx: ToolContext,
        call: Call,
        mode: str,
        updated: dict[str, Any] | None,
    ) -> Decision:
        """`dangerouslyDisableSandbox`: a person approves this exact call, in every mode,
        whatever the rules say; it offers no "always" rule."""
        if not session.allow_unsandboxed or mode == "plan":
            why = (
                "the session is in plan mode"
                if session.allow_unsandboxed
                else "this session's policy does not allow unsandboxed commands"
            )
            return self.outcomes.deny(
                session,
                ctx,
                call.name,
                "mode",
                f"The command was not run outside the sandbox: {why}. Run it sandboxed "
                "(drop dangerouslyDisableSandbox).",
            )
        reasons = ["asks to run outside the sandbox (dangerouslyDisableSandbox)"]
        if critical := self._critical_rm(call, session):
            reasons.append(critical)
        reasons += bash_reasons(call) if not call.read_only() else []
        ask = Ask("sandbox", reasons, sandbox=SandboxMode.UNSANDBOXED)
        return await self.outcomes.ask(session, ctx, call, ask, mode, updated)
