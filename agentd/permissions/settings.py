"""Where rules, modes and hooks come from, merged for one session.

Sources, each rule keeping its source for messages and the journal:
  - the daemon's config (allow_rules, deny_rules, ask_rules);
  - each workspace root's `.claude/settings.json` and `.claude/settings.local.json`
    (`permissions.allow/deny/ask`, `permissions.defaultMode`,
    `permissions.additionalDirectories`, `hooks`), re-read when a file's mtime or size
    changes, so an edit applies to the next call without a restart;
  - the session's own rules, added by clients.

A workspace's hooks are commands that run on the host, unsandboxed: they are taken
only from workspaces listed in `config.trusted_workspaces` (or under one), so a cloned
repository cannot run code here by shipping a settings file. For the same reason a
workspace's `defaultMode: bypassPermissions` counts only when the workspace is trusted.
A settings file that cannot be read or parsed, and a rule in it that does not parse,
are logged and skipped: a typo in one rule must not disable the others. A bad rule in
the daemon's config raises InvalidRequest at start-up instead.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any

from agentd.config import Config
from agentd.errors import InvalidRequest
from agentd.permissions.rules import SourcedRule, parse_rule
from agentd.sessions import PERMISSION_MODES, Session

log = logging.getLogger(__name__)

SETTINGS_FILES = (".claude/settings.json", ".claude/settings.local.json")
HOOK_EVENTS = ("PreToolUse", "PostToolUse")
DEFAULT_HOOK_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class HookCommand:
    command: str
    timeout: float
    source: str
    # The workspace root the hook came from ($CLAUDE_PROJECT_DIR).
    project_dir: str = ""


@dataclass(frozen=True, slots=True)
class HookGroup:
    """One `{"matcher": ..., "hooks": [...]}` entry: commands for the tools the matcher names."""

    matcher: str
    hooks: tuple[HookCommand, ...]

    def matches(self, tool_name: str) -> bool:
        if self.matcher in ("", "*"):
            return True
        try:
            return re.fullmatch(self.matcher, tool_name) is not None
        except re.error:
            return self.matcher == tool_name


@dataclass(frozen=True, slots=True)
class FileSettings:
    """One settings file, parsed."""

    path: str
    allow: tuple[SourcedRule, ...] = ()
    deny: tuple[SourcedRule, ...] = ()
    ask: tuple[SourcedRule, ...] = ()
    default_mode: str = ""
    additional_dirs: tuple[str, ...] = ()
    hooks: dict[str, tuple[HookGroup, ...]] = field(default_factory=dict)


@dataclass(slots=True)
class MergedSettings:
    """Everything that applies to one session's next call."""

    allow: list[SourcedRule] = field(default_factory=list)
    deny: list[SourcedRule] = field(default_factory=list)
    ask: list[SourcedRule] = field(default_factory=list)
    # The workspace's defaultMode ("" if none); settings.local.json wins over settings.json.
    default_mode: str = ""
    additional_dirs: list[str] = field(default_factory=list)
    # Hooks of trusted workspaces only.
    hooks: dict[str, list[HookGroup]] = field(default_factory=dict)


def _parse_rules(values: Any, source: str, base: str) -> tuple[SourcedRule, ...]:
    if values is None:
        return ()
    if not isinstance(values, list):
        log.warning("%s: permission rules must be a list, ignored", source)
        return ()
    out: list[SourcedRule] = []
    for value in values:
        try:
            out.append(SourcedRule(parse_rule(value), source, base))
        except InvalidRequest as exc:
            log.warning("%s: %s (rule ignored)", source, exc)
    return tuple(out)


def _parse_hooks(values: Any, source: str, root: str) -> dict[str, tuple[HookGroup, ...]]:
    if not isinstance(values, dict):
        return {}
    out: dict[str, tuple[HookGroup, ...]] = {}
    for event in HOOK_EVENTS:
        groups: list[HookGroup] = []
        for entry in values.get(event) or []:
            if not isinstance(entry, dict):
                continue
            commands: list[HookCommand] = []
            for hook in entry.get("hooks") or []:
                if not isinstance(hook, dict) or hook.get("type", "command") != "command":
                    continue
                command = hook.get("command")
                if not isinstance(command, str) or not command.strip():
                    continue
                timeout = hook.get("timeout", DEFAULT_HOOK_TIMEOUT)
                if not isinstance(timeout, int | float) or timeout <= 0:
                    timeout = DEFAULT_HOOK_TIMEOUT
                commands.append(HookCommand(command, float(timeout), source, root))
            matcher = entry.get("matcher") or ""
            if commands and isinstance(matcher, str):
                groups.append(HookGroup(matcher, tuple(commands)))
        if groups:
            out[event] = tuple(groups)
    return out


def parse_settings_file(path: str, root: str) -> FileSettings:
    """Parse one settings file of workspace `root`; problems are logged, never raised."""
    try:
        with open(path, encoding="utf-8") as f:
            body = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        log.warning("cannot read settings file %s: %s (ignored)", path, exc)
        return FileSettings(path)
    if not isinstance(body, dict):
        log.warning("settings file %s does not hold a JSON object (ignored)", path)
        return FileSettings(path)
    perms = body.get("permissions") if isinstance(body.get("permissions"), dict) else {}
    mode = perms.get("defaultMode") or ""
    if mode and mode not in PERMISSION_MODES:
        log.warning("%s: unknown defaultMode %r (ignored)", path, mode)
        mode = ""
    dirs: list[str] = []
    for raw in perms.get("additionalDirectories") or []:
        if isinstance(raw, str) and raw and "\0" not in raw:
            expanded = os.path.expanduser(raw)
            dirs.append(os.path.normpath(os.path.join(root, expanded)))
    return FileSettings(
        path,
        allow=_parse_rules(perms.get("allow"), path, root),
        deny=_parse_rules(perms.get("deny"), path, root),
        ask=_parse_rules(perms.get("ask"), path, root),
        default_mode=mode,
        additional_dirs=tuple(dirs),
        hooks=_parse_hooks(body.get("hooks"), path, root),
    )


class SettingsLoader:
    """Merges the sources for a session; caches each file until its mtime or size changes."""

    def __init__(self, config: Config) -> None:
        self.config = config
        # A bad rule in the daemon's own config stops start-up: a deny rule silently
        # dropped would leave the operator believing something is denied.
        self._config_rules: dict[str, tuple[SourcedRule, ...]] = {}
        for kind in ("allow", "deny", "ask"):
            parsed: list[SourcedRule] = []
            for text in getattr(config, f"{kind}_rules"):
                try:
                    parsed.append(SourcedRule(parse_rule(text), "daemon config", ""))
                except InvalidRequest as exc:
                    raise InvalidRequest(f"config {kind}_rules: {exc}") from None
            self._config_rules[kind] = tuple(parsed)
        self._cache: dict[str, tuple[tuple[int, int], FileSettings]] = {}

    def is_trusted(self, root: str) -> bool:
        if not self.config.trusted_workspaces:
            return False  # the usual case; spares a realpath on every call
        real = os.path.realpath(root)
        for trusted in self.config.trusted_workspaces:
            t = os.path.realpath(os.path.expanduser(trusted))
            if real == t or real.startswith(t.rstrip("/") + "/"):
                return True
        return False

    def _file(self, path: str, root: str) -> FileSettings | None:
        try:
            st = os.stat(path)
        except OSError:
            self._cache.pop(path, None)
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        parsed = parse_settings_file(path, root)
        self._cache[path] = (stamp, parsed)
        return parsed

    def for_session(self, session: Session) -> MergedSettings:
        merged = MergedSettings()
        for kind in ("allow", "deny", "ask"):
            getattr(merged, kind).extend(self._config_rules[kind])
        for root in session.workspace_roots:
            trusted = self.is_trusted(root)
            for name in SETTINGS_FILES:
                parsed = self._file(os.path.join(root, name), root)
                if parsed is None:
                    continue
                merged.allow.extend(parsed.allow)
                merged.deny.extend(parsed.deny)
                merged.ask.extend(parsed.ask)
                merged.additional_dirs.extend(parsed.additional_dirs)
                if parsed.default_mode and (trusted or parsed.default_mode != "bypassPermissions"):
                    merged.default_mode = parsed.default_mode
                if trusted:
                    for event, groups in parsed.hooks.items():
                        merged.hooks.setdefault(event, []).extend(groups)
                elif parsed.hooks:
                    log.info(
                        "hooks in %s not run: workspace %s is not in trusted_workspaces",
                        parsed.path,
                        root,
                    )
        for kind in ("allow", "deny", "ask"):
            for text in getattr(session, f"{kind}_rules"):
                try:
                    getattr(merged, kind).append(
                        SourcedRule(parse_rule(text), f"session {session.id}", "")
                    )
                except InvalidRequest as exc:
                    log.warning("session %s: %s (rule ignored)", session.id, exc)
        return merged
