"""The network rules of a session, from every source, and the network ask.

Sources: the daemon's config (network_allowed_domains, network_denied_domains, the
network_presets), every `WebFetch(domain:…)` allow and deny rule that applies to the
session (config, trusted workspace settings, the session's own), and the workspace's
`sandbox.network` entries: deniedDomains always, allowedDomains only from trusted
content (settings.py splits them so). Deny wins (agentd/network/service.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from agentd.foundation.config import Config
from agentd.foundation.errors import InvalidRequest
from agentd.network.decide import AskFn
from agentd.network.rules import NetworkRules, Sourced, parse_pattern, presets, reason_text
from agentd.network.state import AskAnswer
from agentd.permissions.asker import Answer, Asker
from agentd.permissions.decision import Behavior
from agentd.permissions.rules import SourcedRule
from agentd.permissions.settings import SettingsLoader
from agentd.sessions.session import Session, SessionManager


def _configured(config: Config) -> tuple[list[Sourced], list[Sourced]]:
    """The config's entries and presets, parsed; InvalidRequest names a bad one."""
    allowed: list[Sourced] = []
    denied: list[Sourced] = []
    known = presets()
    for name in config.network_presets:
        if name not in known:
            raise InvalidRequest(
                f"config network_presets: unknown preset {name!r}; there are "
                + ", ".join(sorted(known))
            )
        allowed += [Sourced(parse_pattern(d), f"preset {name}") for d in known[name][1]]
    reasons = config.network_denied_domain_reasons
    for key, out in (("allowed", allowed), ("denied", denied)):
        for entry in getattr(config, f"network_{key}_domains"):
            why = reason_text(reasons.get(entry, "")) if key == "denied" else ""
            try:
                out.append(Sourced(parse_pattern(entry), "daemon config", why))
            except ValueError as exc:
                raise InvalidRequest(f"config network_{key}_domains: {exc}") from None
    for entry in reasons:
        if entry not in config.network_denied_domains:
            raise InvalidRequest(
                f"config network_denied_domain_reasons: {entry!r} is not an entry of "
                "network_denied_domains (a reason is given for a denied entry as written)"
            )
    return allowed, denied


def _domain_rules(rules: list[SourcedRule]) -> list[Sourced]:
    out: list[Sourced] = []
    for sourced in rules:
        rule = sourced.rule
        if rule.tool != "WebFetch" or not rule.specifier:
            continue
        if rule.specifier.startswith("preset:"):
            name = rule.specifier.removeprefix("preset:").strip()
            hosts = presets().get(name, ("", ()))[1]
            out += [Sourced(parse_pattern(h), f"{rule.text}, {sourced.source}") for h in hosts]
            continue
        try:
            pattern = parse_pattern(rule.specifier.removeprefix("domain:"))
        except ValueError:
            continue
        out.append(Sourced(dataclasses.replace(pattern, text=rule.text), sourced.source))
    return out


def _entries(
    entries: list[tuple[str, str]], reasons: dict[tuple[str, str], str] | None = None
) -> list[Sourced]:
    out: list[Sourced] = []
    for entry, source in entries:
        why = reason_text((reasons or {}).get((entry, source), ""))
        try:
            out.append(Sourced(parse_pattern(entry), source, why))
        except ValueError:
            continue  # a typo in a workspace file drops that entry only
    return out


class NetworkRulesSource:
    """A session's NetworkRules, read afresh for each new connection (rules added by a
    person or a file changed meanwhile apply at once)."""

    def __init__(self, config: Config, settings: Callable[[], SettingsLoader]) -> None:
        self._allowed, self._denied = _configured(config)
        self._settings = settings

    def checked(self, config: Config) -> Callable[[], None]:
        """The config's entries and presets parsed (InvalidRequest names a bad one), and
        what puts them in place: a reload checks every part before it changes any."""
        allowed, denied = _configured(config)

        def apply() -> None:
            self._allowed, self._denied = allowed, denied

        return apply

    async def __call__(self, session: Session) -> NetworkRules:
        merged = await self._settings().for_session(session)
        return NetworkRules(
            allowed=[
                *self._allowed,
                *_domain_rules(merged.allow),
                *_entries(merged.allowed_domains),
            ],
            denied=[
                *self._denied,
                *_domain_rules(merged.deny),
                *_entries(merged.denied_domains, merged.denied_domain_reasons),
            ],
        )


def network_asker(asker: Asker, sessions: SessionManager) -> AskFn:
    """The ask for an unknown host, in the shape of a tool call's (tool "Network"), so
    every attached terminal shows it; "always" adds a WebFetch(domain:) rule."""

    async def ask(
        session: Session, tool_use_id: str, command: str, host: str, port: int, entry: str
    ) -> AskAnswer:
        rule = f"WebFetch(domain:{host})"
        who = f"`{command}` ({tool_use_id})" if command else "a sandboxed command"
        answer = await asker.ask(
            session.id,
            tool_use_id=tool_use_id,
            tool_name="Network",
            tool_input={"host": host, "port": port, "command": command},
            reasons=[
                f"{who} wants to reach {host}:{port}",
                f"always: adds {rule} (the sandbox.network.allowedDomains entry {entry!r})",
            ],
            rule_choices=(rule,),
        )
        return settled(answer, session, sessions, rule)

    return ask


def settled(answer: Answer, session: Session, sessions: SessionManager, rule: str) -> AskAnswer:
    """A person's answer to an ask that offered `rule`: "always" keeps the rule (or the
    one they chose) with the session's allow or deny rules; how it was decided, in words."""
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
