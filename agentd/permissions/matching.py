"""Which rules match a call (the rules an "always" answer offers: offered.py).

Deny and ask rules see into a compound Bash command: any part that matches counts.
Allow rules cover a Bash command only by what will run (bashrules.py): every part is
covered by a rule or read-only on its own, and the rules must have seen the command
from its program word on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentd.permissions import bashrules
from agentd.permissions.call import Call
from agentd.permissions.rules import (
    Rule,
    SourcedRule,
    bash_spec_matches,
    domain_matches,
    path_matches,
)
from agentd.permissions.settings import MergedSettings
from agentd.sessions.session import Session


class RuleMatcher:
    """Rules against one described call; `classify` judges what the rules did not see."""

    def __init__(self, classify: Callable[[str], Any]) -> None:
        self.classify = classify

    def matches(self, sourced: SourcedRule, call: Call, session: Session, *, kind: str) -> bool:
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
        if call.url and spec.startswith(("domain:", "preset:")):
            return domain_matches(spec, call.url)
        if call.path:
            bases = [sourced.base] if sourced.base else list(session.workspace_roots)
            return any(
                path_matches(spec, p, bases=bases, cwd=session.cwd, home=session.home)
                for p in {call.path, call.real_path}
            )
        return False

    def first(
        self, rules: list[SourcedRule], call: Call, session: Session, *, kind: str
    ) -> SourcedRule | None:
        return next((r for r in rules if self.matches(r, call, session, kind=kind)), None)

    def allowed(self, call: Call, settings: MergedSettings, session: Session) -> SourcedRule | None:
        if not call.is_bash:
            return self.first(settings.allow, call, session, kind="allow")
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
