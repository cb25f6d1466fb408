"""The classifier's answer: Classification and the SimpleCommands inside it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One simple command as it will run, after wrappers (sudo, env, xargs…) are removed.

    argv: the words of the command, wrappers and VAR= assignments removed; a word only
      known at run time is None (xargs adds one None for the words it reads from stdin).
    program: the resolved program name (/usr/bin/rm -> rm), None if built at run time.
    prefix: the program and its subcommand words, for rules such as `Bash(npm run test:*)`.
    text: the source text of the command from its program word on.
    wrappers: the wrapper programs stripped in front of it, outermost first.
    """

    argv: tuple[str | None, ...]
    program: str | None
    prefix: str
    text: str
    wrappers: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv),
            "program": self.program,
            "prefix": self.prefix,
            "text": self.text,
            "wrappers": list(self.wrappers),
        }


@dataclass(frozen=True, slots=True)
class Classification:
    """What a bash command does, read from its syntax tree without running it."""

    read_only: bool
    categories: frozenset[str]
    commands: tuple[SimpleCommand, ...]
    writes: tuple[str, ...]
    cd_targets: tuple[str, ...]
    reasons: tuple[str, ...]
    parse_ok: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "read_only": self.read_only,
            "categories": sorted(self.categories),
            "commands": [c.to_dict() for c in self.commands],
            "writes": list(self.writes),
            "cd_targets": list(self.cd_targets),
            "reasons": list(self.reasons),
            "parse_ok": self.parse_ok,
        }
