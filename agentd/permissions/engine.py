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
 4. A write to a protected path (agentd/protected.py: `.git/`, `.claude/`, shell rc
    files...) asks, in every mode, unless an allow rule names that path explicitly
    (no wildcard). A recursive or forced `rm` (or `find -delete`/`-exec rm`) of /, the
    home directory, a workspace root or one of its parents, as bash would resolve it,
    asks in every mode, whatever the allow rules say (permissions/critical.py). A Bash
    call with `dangerouslyDisableSandbox` asks a person here too, whatever the mode
    and rules.
 5. A hook's ask asks; a hook's allow allows.
 6. bypassPermissions allows.
 7. Ask rules ask.
 8. Allow rules allow. A Bash command is allowed by rules only if some simple command's
    literal text begins with an allow rule's prefix and everything the rules did not see
    (other commands, VAR= prefixes, wrappers, options before the subcommand, redirects,
    expansions) is read-only on its own (permissions/bashrules.py).
 9. The tool's own check: tools that only touch the session's own state run; Bash runs
    when the classifier says read-only; file reads inside the workspace, the
    additional directories or the session's state dir run; file writes inside the
    workspace run in acceptEdits; everything else asks (paths outside the workspace,
    writes in default mode, commands that change things, WebFetch). A Bash command
    allowed here, by the classifier's verdict alone, runs read-only (Decision.sandbox):
    the workspace read-only, no network; so does every Bash command in plan mode. A
    read-only command an allow rule lets run keeps the workspace writable but runs with
    the repository's git config neutralised (step 8).
10. An ask becomes a deny in dontAsk mode, and when no client is attached to answer;
    otherwise it is a PermissionRequested event and waits for the first answer, or
    the timeout (a deny).

Every decision goes to the journal as `permission_decided` and to the daemon's log.
A path outside the roots that a decision allows is added to `ctx.granted_paths`.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentd import sandboxing
from agentd.config import Config
from agentd.executor import Decision
from agentd.permissions import bashrules
from agentd.permissions import hooks as hook_runner
from agentd.permissions.approvals import Approvals
from agentd.permissions.asker import Asker
from agentd.permissions.critical import critical_rm
from agentd.permissions.paths import is_within
from agentd.permissions.rules import (
    EDIT_TOOLS,
    Rule,
    SourcedRule,
    bash_spec_matches,
    domain_matches,
    path_matches,
    url_host,
)
from agentd.permissions.settings import MergedSettings, SettingsLoader
from agentd.protected import protected_name
from agentd.sessions import Session, SessionManager
from agentd.tools.base import TextBlock, Tool, ToolContext, ToolResult

log = logging.getLogger(__name__)

# Tools that touch nothing but the session's own state (its todo list, its own tasks'
# output): Claude Code never asks for them, and plan mode lets them run.
PERMISSIONLESS_TOOLS = frozenset({"TodoWrite", "BashOutput", "TaskStop", "KillShell", "KillBash"})
_GLOB_CHARS = frozenset("*?[")
_REMEMBERED_POST_HOOKS = 1024


@dataclass
class _Call:
    """One call, described once for every check."""

    tool: Tool
    args: dict[str, Any]
    # Bash
    command: str = ""
    classification: Any = None
    # File tools: the absolute path as the session means it, and where it really leads.
    access_mode: str = ""
    path: str = ""
    real_path: str = ""
    # WebFetch
    url: str = ""

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def is_bash(self) -> bool:
        return self.classification is not None

    def read_only(self) -> bool:
        if self.name in PERMISSIONLESS_TOOLS:
            return True
        if self.is_bash:
            return bool(self.classification.read_only)
        try:
            return bool(self.tool.is_read_only(self.args))
        except Exception:
            return False

    def describe(self) -> str:
        if self.is_bash:
            return f"the command `{self.command}`"
        if self.path:
            return f"{self.name} on {self.path}"
        if self.url:
            return f"{self.name} of {self.url}"
        return f"the {self.name} tool"


@dataclass
class _Allow:
    decided_by: str
    reason: str
    grants: list[str] = field(default_factory=list)
    # Decision.sandbox: "read_only" when only the classifier's verdict allows the call.
    sandbox: str = "normal"


@dataclass
class _Ask:
    decided_by: str
    reasons: list[str]
    suggested_rule: str
    # Paths to grant the call if a person allows it.
    grants: list[str] = field(default_factory=list)
    # Decision.sandbox if a person allows it.
    sandbox: str = "normal"


def _rule_note(rule: SourcedRule) -> str:
    return f"`{rule.rule.text}` ({rule.source})"


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
            from agentd.bashsec import classify as classify
        self.classify = classify
        self.approvals = approvals or Approvals(self.sessions, self.asker, self.settings)
        # (session id, tool_use_id) -> the PostToolUse hooks the decision saw, for
        # after_call: the call's hooks come from the settings it was decided under, and
        # a call without any costs no second read. Bounded: a denied call never comes back.
        self._post_hooks: OrderedDict[tuple[str, str], list[Any]] = OrderedDict()

    # --- the protocol ---------------------------------------------------------------------

    async def decide(
        self, session: Session, tool: Tool, args: dict[str, Any], ctx: ToolContext
    ) -> Decision:
        settings = await self.settings.for_session(session)
        if settings.untrusted or settings.unreadable:
            settings = await self.approvals.settle(session, ctx, settings)
        mode = self.effective_mode(session, settings)
        if post := settings.hooks.get("PostToolUse"):
            self._post_hooks[(session.id, ctx.tool_use_id)] = post
            while len(self._post_hooks) > _REMEMBERED_POST_HOOKS:
                self._post_hooks.popitem(last=False)

        verdict = hook_runner.PreVerdict()
        pre_hooks = settings.hooks.get("PreToolUse", [])
        if pre_hooks:
            payload = self._hook_payload(session, tool, args, ctx, mode, "PreToolUse")
            verdict = await hook_runner.run_pre_hooks(
                pre_hooks, tool.name, payload, self._hook_sandbox(session)
            )
        updated: dict[str, Any] | None = None
        if verdict.updated_input is not None:
            updated = {**args, **verdict.updated_input}
            args = updated
        if verdict.behavior == "deny":
            reason = f"A PreToolUse hook blocked this call: {verdict.reason}"
            return self._deny(session, ctx, tool.name, "hook", reason)

        call = self._describe(session, tool, args)
        # A trusted additionalDirectory is a root the call may use once allowed, as the
        # session's own are (a grant only takes effect if the call runs).
        for extra in settings.additional_dirs:
            if call.path and is_within(call.path, extra) and extra not in ctx.granted_paths:
                ctx.granted_paths.append(extra)

        if rule := self._first_match(settings.deny, call, session, kind="deny"):
            return self._deny(
                session,
                ctx,
                tool.name,
                "rule",
                f"Permission to use {call.describe()} has been denied by the rule "
                f"{_rule_note(rule)}. Do not try to get around it; do something else, "
                "or ask the user to change the rule.",
            )

        if mode == "plan" and not call.read_only():
            return self._deny(
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

        ask: _Ask | None = None
        if protected := self._protected(call, session):
            if rule := self._explicit_allow(call, settings, session):
                return self._allow(
                    session,
                    ctx,
                    call,
                    "rule",
                    f"allow rule {_rule_note(rule)} names the protected path",
                    updated,
                    self._grants(call, ctx),
                )
            ask = _Ask(
                "protected",
                [protected],
                self._suggest(call, settings, session),
                self._grants(call, ctx),
            )
        elif call.is_bash and (critical := self._critical_rm(call, session)):
            ask = _Ask("classifier", [critical, *call.classification.reasons], "")
        elif verdict.behavior == "ask":
            ask = _Ask(
                "hook",
                [f"a PreToolUse hook asks: {verdict.reason or verdict.hook}"],
                self._suggest(call, settings, session),
                self._grants(call, ctx),
            )
        elif verdict.behavior == "allow":
            return self._allow(
                session,
                ctx,
                call,
                "hook",
                f"allowed by PreToolUse hook {verdict.hook!r}",
                updated,
                self._grants(call, ctx),
                mode=mode,
            )
        elif mode == "bypassPermissions":
            return self._allow(
                session,
                ctx,
                call,
                "mode",
                "bypassPermissions mode",
                updated,
                self._grants(call, ctx),
                mode=mode,
            )
        elif rule := self._first_match(settings.ask, call, session, kind="ask"):
            ask = _Ask(
                "rule",
                [f"matches the ask rule {_rule_note(rule)}", *self._reasons(call)],
                self._suggest(call, settings, session),
                self._grants(call, ctx),
            )
        elif rule := self._allowed_by_rules(call, settings, session):
            return self._allow(
                session,
                ctx,
                call,
                "rule",
                f"allow rule {_rule_note(rule)}",
                updated,
                self._grants(call, ctx),
                # A read-only command a rule lets run unasked still runs with the
                # repository's git config cut to inert keys: the workspace may be hostile.
                sandbox="neutralised" if call.is_bash and call.read_only() else "normal",
                mode=mode,
            )
        else:
            outcome = self._tool_check(call, session, settings, ctx, mode)
            if isinstance(outcome, _Allow):
                return self._allow(
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
        return await self._ask(session, ctx, call, ask, mode, updated)

    async def after_call(
        self,
        session: Session,
        tool: Tool,
        args: dict[str, Any],
        result: ToolResult,
        ctx: ToolContext,
    ) -> None:
        """PostToolUse hooks; what they block with is added to the result for the model."""
        post_hooks = self._post_hooks.pop((session.id, ctx.tool_use_id), None)
        if not post_hooks:
            return
        settings = await self.settings.for_session(session)
        mode = self.effective_mode(session, settings)
        payload = self._hook_payload(session, tool, args, ctx, mode, "PostToolUse")
        payload["tool_response"] = result.data if result.data is not None else result.text_content()
        notes = await hook_runner.run_post_hooks(
            post_hooks, tool.name, payload, self._hook_sandbox(session)
        )
        for note in notes:
            result.content.append(TextBlock(f"\n\nPostToolUse hook feedback:\n{note}"))

    # --- trust and protected paths ---------------------------------------------------------

    def _protected(self, call: _Call, session: Session) -> str:
        """Why a file write touches a protected path, or ""; judged below the workspace root
        (a `.git` or `.claude` above the root does not count) and on where links lead."""
        if not call.path or not (call.access_mode == "write" or call.name in EDIT_TOOLS):
            return ""
        for path in dict.fromkeys((call.path, call.real_path)):
            roots = [
                os.path.normpath(r)
                for r in session.workspace_roots
                if is_within(path, os.path.normpath(r))
            ]
            rel = os.path.relpath(path, max(roots, key=len)) if roots else path
            if name := protected_name(rel):
                return (
                    f"{path} is a protected path ({name} holds configuration that makes code "
                    "run later), so a change to it always needs a person's approval"
                )
        return ""

    def _explicit_allow(
        self, call: _Call, settings: MergedSettings, session: Session
    ) -> SourcedRule | None:
        """An allow rule that names this very path (no wildcard, same file name)."""
        name = os.path.basename(call.path)
        for r in settings.allow:
            spec = r.rule.specifier
            if not spec or _GLOB_CHARS & set(spec) or os.path.basename(spec.rstrip("/")) != name:
                continue
            if self._rule_matches(r, call, session, kind="allow"):
                return r
        return None

    def _hook_sandbox(self, session: Session) -> hook_runner.PolicyFactory:
        def policy() -> Any:
            tmp_dir = sandboxing.session_tmp_dir(session, self.config)
            return sandboxing.policy_for(session, self.config, tmp_dir)

        return policy

    # --- pieces ---------------------------------------------------------------------------

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

    def _describe(self, session: Session, tool: Tool, args: dict[str, Any]) -> _Call:
        call = _Call(tool, args)
        if tool.name == "Bash":
            call.command = str(args.get("command", ""))
            call.classification = self.classify(call.command)
            return call
        if tool.name == "WebFetch":
            call.url = str(args.get("url", ""))
        try:
            access = tool.file_access(args)
        except Exception:
            access = None
        if access is not None and access.path and "\0" not in access.path:
            raw = access.path
            if raw == "~" or raw.startswith("~/"):
                raw = session.home + raw[1:]
            call.access_mode = access.mode
            call.path = os.path.normpath(os.path.join(session.cwd, raw))
            call.real_path = os.path.realpath(call.path)
        return call

    # rules

    def _rule_matches(
        self, sourced: SourcedRule, call: _Call, session: Session, *, kind: str
    ) -> bool:
        rule: Rule = sourced.rule
        if not rule.covers_tool(call.name):
            return False
        spec = rule.specifier
        if spec is None:
            return True
        if call.is_bash:
            if bash_spec_matches(spec, call.command):
                return True
            # deny and ask rules see into compound commands: any part counts.
            for cmd in call.classification.commands:
                if bash_spec_matches(spec, cmd.text, cmd.prefix):
                    return True
                if None not in cmd.argv and bash_spec_matches(spec, " ".join(cmd.argv)):
                    return True
            return False
        if call.url and spec.startswith("domain:"):
            return domain_matches(spec, call.url)
        if call.path:
            bases = [sourced.base] if sourced.base else list(session.workspace_roots)
            return any(
                path_matches(spec, p, bases=bases, cwd=session.cwd, home=session.home)
                for p in {call.path, call.real_path}
            )
        return False

    def _first_match(
        self, rules: list[SourcedRule], call: _Call, session: Session, *, kind: str
    ) -> SourcedRule | None:
        return next((r for r in rules if self._rule_matches(r, call, session, kind=kind)), None)

    def _allowed_by_rules(
        self, call: _Call, settings: MergedSettings, session: Session
    ) -> SourcedRule | None:
        if not call.is_bash:
            return self._first_match(settings.allow, call, session, kind="allow")
        bash_rules = [r for r in settings.allow if r.rule.covers_tool("Bash")]
        if not bash_rules:
            return None
        for r in bash_rules:
            spec = r.rule.specifier
            # A bare `Bash` rule, or an exact rule naming the whole compound command.
            if spec is None or ("*" not in spec and bash_spec_matches(spec, call.command)):
                return r
        cls = call.classification
        if not cls.parse_ok or not cls.commands:
            return None
        used: list[SourcedRule] = []
        texts = sorted({c.text for c in cls.commands if c.text}, key=len, reverse=True)

        def matching(text: str) -> SourcedRule | None:
            return next(
                (r for r in bash_rules if bash_spec_matches(r.rule.specifier or "", text)), None
            )

        def covered(literal: str) -> bool:
            rule = matching(literal)
            if rule is None:
                # `FOO=1 timeout 5 npm test`: the rule sees the command from its program
                # word on; the VAR= prefixes and wrappers in front must be harmless alone.
                for text in texts:
                    if literal != text and literal.endswith(text) and (rule := matching(text)):
                        unseen = literal[: -len(text)]
                        if not self.classify(unseen + " true").read_only:
                            rule = None
                        break
            if rule is not None and rule not in used:
                used.append(rule)
            return rule is not None

        rest = bashrules.neutralise(call.command, covered)
        if rest is None or rest[1] == 0:
            return None
        # What the rules did not see must be read-only on its own.
        if not self.classify(rest[0]).read_only:
            return None
        return used[0]

    # the critical rm check

    def _critical_rm(self, call: _Call, session: Session) -> str:
        """A reason when the command recursively or forcibly removes a critical path."""
        return critical_rm(
            call.classification, session.cwd, session.home, list(session.workspace_roots)
        )

    # the tool's own check

    def _inside(self, path: str, session: Session, settings: MergedSettings) -> bool:
        roots = [*session.workspace_roots, *session.additional_dirs, *settings.additional_dirs]
        return any(is_within(path, os.path.normpath(r)) for r in roots)

    def _grants(self, call: _Call, ctx: ToolContext) -> list[str]:
        """The path a file call needs granted when it lies outside the call's roots."""
        if not call.path:
            return []
        mode = "write" if call.access_mode == "write" else "read"
        if any(is_within(call.path, os.path.normpath(r)) for r in ctx.roots(mode)):
            return []
        return [call.path]

    def _tool_check(
        self,
        call: _Call,
        session: Session,
        settings: MergedSettings,
        ctx: ToolContext,
        mode: str,
    ) -> _Allow | _Ask:
        suggested = self._suggest(call, settings, session)
        if call.name in PERMISSIONLESS_TOOLS:
            return _Allow("mode", f"{call.name} touches only the session's own state")
        if call.is_bash:
            if call.classification.read_only:
                # Nothing but the verdict allows it: the sandbox enforces the verdict.
                return _Allow("classifier", "read-only command", sandbox="read_only")
            return _Ask("classifier", self._reasons(call), suggested)
        if call.path:
            inside = self._inside(call.path, session, settings)
            grants = self._grants(call, ctx)
            if call.access_mode == "write" or call.name in EDIT_TOOLS:
                if not inside:
                    return _Ask(
                        "mode", [f"writes {call.path}, outside the workspace"], suggested, grants
                    )
                if mode == "acceptEdits":
                    return _Allow(
                        "mode", "acceptEdits mode: a file edit inside the workspace", grants
                    )
                return _Ask(
                    "mode", [f"edits {call.path} ({mode} mode asks for edits)"], suggested, grants
                )
            if inside or is_within(call.path, os.path.normpath(ctx.state_dir)):
                return _Allow("mode", "a read inside the workspace", grants)
            return _Ask("mode", [f"reads {call.path}, outside the workspace"], suggested, grants)
        if call.url:
            return _Ask("mode", [f"fetches from {url_host(call.url) or call.url}"], suggested)
        if call.read_only():
            return _Allow("mode", "read-only tool")
        return _Ask("mode", [f"{call.name} is not read-only"], suggested)

    def _reasons(self, call: _Call) -> list[str]:
        if call.is_bash:
            return list(call.classification.reasons) or ["the command is not read-only"]
        return []

    def _suggest(self, call: _Call, settings: MergedSettings, session: Session) -> str:
        """The rule an "always" answer adds."""
        if call.is_bash:
            for cmd in call.classification.commands:
                if self.classify(cmd.text).read_only:
                    continue
                # A prefix rule covers only a command whose text begins with it: not
                # `git -c x status` (options before the subcommand); name that one exactly.
                if cmd.program and cmd.prefix and bash_spec_matches(f"{cmd.prefix}:*", cmd.text):
                    return f"Bash({cmd.prefix}:*)"
                return f"Bash({cmd.text})"
            return f"Bash({call.command})"
        if call.path:
            group = "Edit" if call.access_mode == "write" or call.name in EDIT_TOOLS else "Read"
            return f"{group}(/{call.path})"
        if call.url and (host := url_host(call.url)):
            return f"WebFetch(domain:{host})"
        return call.name

    # outcomes

    def _record(
        self, session: Session, ctx: ToolContext, tool_name: str, behavior: str, by: str, why: str
    ) -> None:
        self.sessions.log(session.id).emit(
            "permission_decided",
            tool_use_id=ctx.tool_use_id,
            tool_name=tool_name,
            behavior=behavior,
            decided_by=by,
            reason=why,
        )
        log.info(
            "session %s: %s %s: %s by %s (%s)",
            session.id,
            tool_name,
            ctx.tool_use_id,
            behavior,
            by,
            why,
        )

    def _deny(
        self, session: Session, ctx: ToolContext, tool_name: str, by: str, reason: str
    ) -> Decision:
        self._record(session, ctx, tool_name, "deny", by, reason)
        return Decision("deny", reason=reason, decided_by=by)

    def _allow(
        self,
        session: Session,
        ctx: ToolContext,
        call: _Call,
        by: str,
        reason: str,
        updated: dict[str, Any] | None,
        grants: list[str],
        *,
        sandbox: str = "normal",
        mode: str = "",
    ) -> Decision:
        for path in grants:
            if path not in ctx.granted_paths:
                ctx.granted_paths.append(path)
        if call.is_bash and mode == "plan" and sandbox in ("normal", "neutralised"):
            # Plan mode let the command through only because it is read-only: hold it to that.
            sandbox = "read_only"
        if sandbox != "normal":
            how = {"neutralised": "with the repository's git config neutralised"}
            reason = f"{reason}; runs {how.get(sandbox, sandbox.replace('_', '-'))}"
        self._record(session, ctx, call.name, "allow", by, reason)
        return Decision(
            "allow", reason=reason, decided_by=by, updated_input=updated, sandbox=sandbox
        )

    async def _ask_unsandboxed(
        self,
        session: Session,
        ctx: ToolContext,
        call: _Call,
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
            return self._deny(
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
        reasons += self._reasons(call) if not call.read_only() else []
        ask = _Ask("sandbox", reasons, "", sandbox="unsandboxed")
        return await self._ask(session, ctx, call, ask, mode, updated)

    async def _ask(
        self,
        session: Session,
        ctx: ToolContext,
        call: _Call,
        ask: _Ask,
        mode: str,
        updated: dict[str, Any] | None,
    ) -> Decision:
        why = "; ".join(ask.reasons) or "needs approval"
        if mode == "dontAsk":
            how = (
                f" The user can allow it with `agentctl perms --session {session.id} "
                f"--allow '{ask.suggested_rule}'`."
                if ask.suggested_rule
                else ""
            )
            return self._deny(
                session,
                ctx,
                call.name,
                "mode",
                f"Permission to use {call.describe()} was not granted: it needs approval "
                f"({why}) and the session is in dontAsk mode, where that is a deny.{how} "
                "Try another way that needs no approval.",
            )
        self._record(session, ctx, call.name, "ask", ask.decided_by, why)
        if not self.asker.has_listeners(session.id):
            how = [f"attach with `agentctl attach {session.id}` and answer the prompt"]
            if ask.suggested_rule:
                how.append(
                    f"add a rule with `agentctl perms --session {session.id} "
                    f"--allow '{ask.suggested_rule}'`"
                )
            how.append(f"switch mode with `agentctl perms --session {session.id} --mode MODE`")
            return self._deny(
                session,
                ctx,
                call.name,
                "nobody-attached",
                f"Permission to use {call.describe()} is needed ({why}), but no client is "
                f"attached to session {session.id} to answer. The user can allow it: "
                + "; or ".join(how)
                + ". Tell the user, or do something that needs no approval.",
            )
        await ctx.progress(message="waiting for permission")
        answer = await self.asker.ask(
            session.id,
            tool_use_id=ctx.tool_use_id,
            tool_name=call.name,
            tool_input=call.args,
            reasons=ask.reasons,
            suggested_rule=ask.suggested_rule,
            cancelled=ctx.cancelled,
        )
        if answer.scope == "always" and (rule := answer.rule or ask.suggested_rule):
            rules = session.allow_rules if answer.decision == "allow" else session.deny_rules
            if rule not in rules:
                rules.append(rule)
                self.sessions.save(session)
        if answer.decision == "allow":
            return self._allow(
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
                f"{self.asker.timeout_seconds:g}s, so it is denied. Ask the user to approve it "
                "or to add an allow rule, or do something that needs no approval."
            )
        elif answer.decided_by == "cancelled":
            reason = "The call was cancelled while waiting for permission."
        else:
            reason = (
                f"The user denied permission to use {call.describe()}. Do not retry it; "
                "ask the user how to proceed, or take another approach."
            )
        return self._deny(session, ctx, call.name, answer.decided_by, reason)
