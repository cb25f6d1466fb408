"""Where rules, modes and hooks come from, merged for one session.

Sources, each rule keeping its source for messages and the journal:
  - the daemon's config (allow_rules, deny_rules, ask_rules);
  - each workspace root's `.claude/settings.json` and `.claude/settings.local.json`,
    read afresh for every call (trust.read_settings: safely, off the event loop);
  - the session's own rules, added by clients.

A workspace settings file is hostile input: a cloned repository ships it, a sandboxed
command can write it. So each file is split in two (`split_settings`):
  - what restricts always applies: `permissions.deny`, `permissions.ask`, and a
    `permissions.defaultMode` that narrows (`default`, `plan`, `dontAsk`);
  - everything else widens, and applies only while the file's exact content is trusted
    (trust.py): allow rules (WebFetch domains included), `additionalDirectories`, a
    widening defaultMode (`acceptEdits`, `bypassPermissions`), hooks. The split is a
    list of what restricts, not of what widens: a key added later, or one agentd does
    not know, counts as widening until someone puts it on the restricting list.
An untrusted file's widening parts are never applied; MergedSettings.untrusted names
them, for the event log, `session show` and the "trust these settings?" prompt.
A file that cannot be read or parsed, and a rule in it that does not parse, are logged
and skipped: a typo in one rule must not disable the others. A bad rule in the daemon's
config raises InvalidRequest at start-up instead.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from agentd.foundation.config import Config
from agentd.foundation.errors import InvalidRequest
from agentd.permissions.rules import SourcedRule, parse_rule
from agentd.permissions.trust import (
    SETTINGS_FILES,
    SettingsBytes,
    TrustStore,
    read_settings_files,
    stamp,
)
from agentd.sessions.session import PERMISSION_MODES, Session

log = logging.getLogger(__name__)

HOOK_EVENTS = ("PreToolUse", "PostToolUse")
DEFAULT_HOOK_TIMEOUT = 60.0
# Modes that only narrow what `default` allows: plan denies whatever is not read-only,
# dontAsk turns every ask into a deny. acceptEdits and bypassPermissions widen.
RESTRICTING_MODES = frozenset({"default", "plan", "dontAsk"})
# The keys that always apply; everything else in a settings file widens.
RESTRICTING_PERMISSION_KEYS = frozenset({"deny", "ask"})
# Keys that say nothing about permissions at all.
NEUTRAL_KEYS = frozenset({"$schema"})
# Parsed files remembered, by (path, sha256).
_PARSED_CACHE = 256


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


@dataclass(frozen=True, slots=True)
class FileSettings:
    """One settings file, parsed and split into what restricts and what widens."""

    path: str
    sha256: str = ""
    # always applied
    deny: tuple[SourcedRule, ...] = ()
    ask: tuple[SourcedRule, ...] = ()
    restricting_mode: str = ""
    # sandbox.network.deniedDomains: hosts its sandbox's proxy refuses; and
    # deniedDomainReasons: the sentence a refusal by one of them passes on
    denied_domains: tuple[str, ...] = ()
    denied_domain_reasons: dict[str, str] = field(default_factory=dict)
    # sandbox.credentials entries with mode "deny": (kind, entry) with kind "envVars"/"files"
    credentials_denied: tuple[tuple[str, dict[str, Any]], ...] = ()
    # applied only while (path, sha256) is trusted
    allow: tuple[SourcedRule, ...] = ()
    widening_mode: str = ""
    additional_dirs: tuple[str, ...] = ()
    hooks: dict[str, tuple[HookGroup, ...]] = field(default_factory=dict)
    # sandbox.network.allowedDomains: hosts its sandbox's proxy lets through
    allowed_domains: tuple[str, ...] = ()
    # sandbox.credentials entries with any other mode ("mask"): (kind, entry)
    credentials_masked: tuple[tuple[str, dict[str, Any]], ...] = ()
    # The file's widening parts as written (restricting and neutral keys removed): what
    # a person approves, shown as is. Empty: the file widens nothing.
    widens: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UntrustedFile:
    """A settings file whose widening parts are not applied: its content is not trusted."""

    path: str
    sha256: str
    widens: dict[str, Any]


@dataclass(slots=True)
class MergedSettings:
    """Everything that applies to one session's next call."""

    allow: list[SourcedRule] = field(default_factory=list)
    deny: list[SourcedRule] = field(default_factory=list)
    ask: list[SourcedRule] = field(default_factory=list)
    # The workspace's defaultMode ("" if none); settings.local.json wins over settings.json.
    default_mode: str = ""
    additional_dirs: list[str] = field(default_factory=list)
    # sandbox.network entries as (entry, the file it came from): denied from every file,
    # allowed from trusted content only.
    allowed_domains: list[tuple[str, str]] = field(default_factory=list)
    denied_domains: list[tuple[str, str]] = field(default_factory=list)
    # (deniedDomains entry, its file) -> the reason its file gives
    denied_domain_reasons: dict[tuple[str, str], str] = field(default_factory=dict)
    # sandbox.credentials entries as (kind, entry, the file it came from): "deny" ones
    # from every file, the others from trusted content only.
    credentials: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    # Hooks of trusted settings content only.
    hooks: dict[str, list[HookGroup]] = field(default_factory=dict)
    # Files whose widening parts were left out, and files that could not be read.
    untrusted: list[UntrustedFile] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)


def _pruned(value: Any) -> Any:
    """`value` without empty containers and nulls, which widen nothing."""
    if isinstance(value, dict):
        out = {k: v for k, v in ((k, _pruned(v)) for k, v in value.items()) if v is not None}
        return out or None
    if isinstance(value, list):
        return value or None
    return value


def widening_parts(body: dict[str, Any]) -> dict[str, Any]:
    """The file's JSON minus what restricts and what is neutral: what trust would add."""
    widens = {k: copy.deepcopy(v) for k, v in body.items() if k not in NEUTRAL_KEYS}
    perms = widens.get("permissions")
    if isinstance(perms, dict):
        for key in RESTRICTING_PERMISSION_KEYS:
            perms.pop(key, None)
        if perms.get("defaultMode") in RESTRICTING_MODES:
            perms.pop("defaultMode")
    sandbox = widens.get("sandbox")
    network = sandbox.get("network") if isinstance(sandbox, dict) else None
    if isinstance(network, dict):
        network.pop("deniedDomains", None)  # it only narrows
        network.pop("deniedDomainReasons", None)  # words for what narrows
    credentials = sandbox.get("credentials") if isinstance(sandbox, dict) else None
    if isinstance(credentials, dict):
        for kind in CREDENTIAL_KINDS:
            entries = credentials.get(kind)
            if isinstance(entries, list):  # a "deny" entry only narrows
                credentials[kind] = [e for e in entries if _credential_mode(e) != "deny"]
    return _pruned(widens) or {}


CREDENTIAL_KINDS = ("envVars", "files")


def _credential_mode(entry: Any) -> str:
    return str(entry.get("mode", "")) if isinstance(entry, dict) else ""


def _credentials(body: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    """sandbox.credentials.envVars and .files: the tables of each list, with their kind
    (anything else logged, skipped; each entry is checked where it is used)."""
    sandbox = body.get("sandbox")
    credentials = sandbox.get("credentials") if isinstance(sandbox, dict) else None
    if not isinstance(credentials, dict):
        return []
    out: list[tuple[str, dict[str, Any]]] = []
    for kind in CREDENTIAL_KINDS:
        entries = credentials.get(kind)
        if entries is None:
            continue
        if not isinstance(entries, list):
            log.warning("%s: sandbox.credentials.%s is not a list (ignored)", path, kind)
            continue
        out += [(kind, copy.deepcopy(e)) for e in entries if isinstance(e, dict)]
    return out


def _reasons(body: dict[str, Any], path: str) -> dict[str, str]:
    """sandbox.network.deniedDomainReasons: {entry: sentence}, strings only."""
    sandbox = body.get("sandbox")
    network = sandbox.get("network") if isinstance(sandbox, dict) else None
    values = network.get("deniedDomainReasons") if isinstance(network, dict) else None
    if values is None:
        return {}
    if not isinstance(values, dict):
        log.warning("%s: sandbox.network.deniedDomainReasons is not a table (ignored)", path)
        return {}
    return {k: v for k, v in values.items() if isinstance(k, str) and isinstance(v, str)}


def _domains(body: dict[str, Any], key: str, path: str) -> tuple[str, ...]:
    """sandbox.network.<key>: the strings of the list (anything else logged, skipped)."""
    sandbox = body.get("sandbox")
    network = sandbox.get("network") if isinstance(sandbox, dict) else None
    values = network.get(key) if isinstance(network, dict) else None
    if values is None:
        return ()
    if not isinstance(values, list):
        log.warning("%s: sandbox.network.%s is not a list (ignored)", path, key)
        return ()
    return tuple(v for v in values if isinstance(v, str) and v and "\0" not in v)


def parse_settings(data: bytes, path: str, root: str, sha256: str = "") -> FileSettings:
    """Parse one settings file's bytes; problems are logged, never raised."""
    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        log.warning("cannot parse settings file %s: %s (ignored)", path, exc)
        return FileSettings(path, sha256)
    if not isinstance(body, dict):
        log.warning("settings file %s does not hold a JSON object (ignored)", path)
        return FileSettings(path, sha256)
    found = body.get("permissions")
    perms: dict[str, Any] = found if isinstance(found, dict) else {}
    mode = perms.get("defaultMode") or ""
    if mode and mode not in PERMISSION_MODES:
        log.warning("%s: unknown defaultMode %r (ignored)", path, mode)
        mode = ""
    dirs: list[str] = []
    for raw in perms.get("additionalDirectories") or []:
        if isinstance(raw, str) and raw and "\0" not in raw:
            expanded = os.path.expanduser(raw)
            dirs.append(os.path.normpath(os.path.join(root, expanded)))
    credentials = _credentials(body, path)
    return FileSettings(
        path,
        sha256,
        credentials_denied=tuple(c for c in credentials if _credential_mode(c[1]) == "deny"),
        credentials_masked=tuple(c for c in credentials if _credential_mode(c[1]) != "deny"),
        deny=_parse_rules(perms.get("deny"), path, root),
        ask=_parse_rules(perms.get("ask"), path, root),
        restricting_mode=mode if mode in RESTRICTING_MODES else "",
        denied_domains=_domains(body, "deniedDomains", path),
        denied_domain_reasons=_reasons(body, path),
        allowed_domains=_domains(body, "allowedDomains", path),
        allow=_parse_rules(perms.get("allow"), path, root),
        widening_mode=mode if mode and mode not in RESTRICTING_MODES else "",
        additional_dirs=tuple(dirs),
        hooks=_parse_hooks(body.get("hooks"), path, root),
        widens=widening_parts(body),
    )


class SettingsLoader:
    """Merges the sources for a session, applying a file's widening parts only if trusted."""

    def __init__(self, config: Config, trust: TrustStore | None = None) -> None:
        self.config = config
        self.trust = trust or TrustStore(config)
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
        self._parsed: OrderedDict[tuple[str, str], FileSettings] = OrderedDict()
        self._unreadable_logged: set[tuple[str, str]] = set()
        # Each open session's sandbox.credentials as last read (every call reads its
        # settings before its sandbox is built): what `credentials_of` answers at once.
        self._credentials: dict[str, list[tuple[str, dict[str, Any], str]]] = {}
        # path -> its last settled read (see files)
        self._settled: OrderedDict[str, SettingsBytes] = OrderedDict()

    def parsed(self, read: SettingsBytes) -> FileSettings:
        """The file as read, parsed once per content."""
        key = (read.path, read.sha256)
        cached = self._parsed.get(key)
        if cached is not None:
            self._parsed.move_to_end(key)
            return cached
        parsed = parse_settings(read.data, read.path, read.root, read.sha256)
        self._parsed[key] = parsed
        while len(self._parsed) > _PARSED_CACHE:
            self._parsed.popitem(last=False)
        return parsed

    async def files(self, roots: list[str]) -> list[SettingsBytes]:
        """Every settings file of `roots`, read (settings.json before settings.local.json).

        An lstat on the loop answers the usual cases without a thread: no file, or a
        file whose stamp equals that of its last settled read (trust.stamp), whose bytes
        and hash are reused. Anything else is read afresh in a worker thread.
        """
        pairs = [(root, name) for root in roots for name in SETTINGS_FILES]
        out: list[SettingsBytes | None] = [None] * len(pairs)
        pending: list[int] = []
        for i, (root, name) in enumerate(pairs):
            path = os.path.join(root, name)
            try:
                marks = stamp(root, name, os.lstat(path))
            except (FileNotFoundError, NotADirectoryError):
                out[i] = SettingsBytes(path, root)
                continue
            except OSError:
                marks = ()
            cached = self._settled.get(path)
            if marks and cached is not None and cached.stamp == marks:
                out[i] = cached
            else:
                pending.append(i)
        if pending:
            reads = await read_settings_files([pairs[i] for i in pending])
            for i, read in zip(pending, reads, strict=True):
                out[i] = read
                if read.stamp:
                    self._settled[read.path] = read
                    self._settled.move_to_end(read.path)
                    while len(self._settled) > _PARSED_CACHE:
                        self._settled.popitem(last=False)
                else:
                    self._settled.pop(read.path, None)
        return [r for r in out if r is not None]

    async def for_session(self, session: Session) -> MergedSettings:
        merged = MergedSettings()
        for kind in ("allow", "deny", "ask"):
            getattr(merged, kind).extend(self._config_rules[kind])
        for read in await self.files(session.workspace_roots):
            if read.error:
                merged.unreadable.append((read.path, read.error))
                if (read.path, read.error) not in self._unreadable_logged:
                    self._unreadable_logged.add((read.path, read.error))
                    log.warning("settings file %s %s (ignored)", read.path, read.error)
                continue
            if not read.sha256:
                continue  # no such file
            parsed = self.parsed(read)
            merged.deny.extend(parsed.deny)
            merged.ask.extend(parsed.ask)
            merged.denied_domains.extend((d, parsed.path) for d in parsed.denied_domains)
            merged.denied_domain_reasons.update(
                ((d, parsed.path), why) for d, why in parsed.denied_domain_reasons.items()
            )
            merged.credentials.extend((k, e, parsed.path) for k, e in parsed.credentials_denied)
            if parsed.restricting_mode:
                merged.default_mode = parsed.restricting_mode
            if not parsed.widens:
                continue
            if self.trust.trusted(parsed.path, parsed.sha256) is None:
                merged.untrusted.append(UntrustedFile(parsed.path, parsed.sha256, parsed.widens))
                continue
            merged.allow.extend(parsed.allow)
            merged.allowed_domains.extend((d, parsed.path) for d in parsed.allowed_domains)
            merged.credentials.extend((k, e, parsed.path) for k, e in parsed.credentials_masked)
            merged.additional_dirs.extend(parsed.additional_dirs)
            if parsed.widening_mode:
                merged.default_mode = parsed.widening_mode
            for event, groups in parsed.hooks.items():
                merged.hooks.setdefault(event, []).extend(groups)
        for kind in ("allow", "deny", "ask"):
            for text in getattr(session, f"{kind}_rules"):
                try:
                    getattr(merged, kind).append(
                        SourcedRule(parse_rule(text), f"session {session.id}", "")
                    )
                except InvalidRequest as exc:
                    log.warning("session %s: %s (rule ignored)", session.id, exc)
        self._credentials[session.id] = merged.credentials
        return merged

    def credentials_of(self, session: Session) -> list[tuple[str, dict[str, Any], str]]:
        """The session's sandbox.credentials entries as its settings were last read."""
        return self._credentials.get(session.id, [])

    def forget(self, session_id: str) -> None:
        """The session closed."""
        self._credentials.pop(session_id, None)
