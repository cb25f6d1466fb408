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
    repo_configured: the program reads configuration from the workspace that can make it
      run programs or write (git's .git/config…); run unasked, that must be neutralised.
    """

    argv: tuple[str | None, ...]
    program: str | None
    prefix: str
    text: str
    wrappers: tuple[str, ...] = ()
    repo_configured: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv),
            "program": self.program,
            "prefix": self.prefix,
            "text": self.text,
            "wrappers": list(self.wrappers),
            "repo_configured": self.repo_configured,
        }


@dataclass(frozen=True, slots=True)
class Classification:
    """What a bash command does, read from its syntax tree without running it.

    repo_configured: the programs in it whose behaviour the workspace's own configuration
    decides (git); a read-only verdict for them holds only with that configuration
    neutralised (for git: GIT_CONFIG_* overrides of core.fsmonitor, core.pager…).
    """

    read_only: bool
    categories: frozenset[str]
    commands: tuple[SimpleCommand, ...]
    writes: tuple[str, ...]
    cd_targets: tuple[str, ...]
    reasons: tuple[str, ...]
    parse_ok: bool
    repo_configured: frozenset[str] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        return {
            "read_only": self.read_only,
            "categories": sorted(self.categories),
            "commands": [c.to_dict() for c in self.commands],
            "writes": list(self.writes),
            "cd_targets": list(self.cd_targets),
            "reasons": list(self.reasons),
            "parse_ok": self.parse_ok,
            "repo_configured": sorted(self.repo_configured),
        }


# The generated __init__ of a frozen dataclass sets each field through object.__setattr__
# and, with keywords, costs more than tree-sitter's parse of a short command. The
# classifier builds these objects on every call, so it sets the slots directly: the same
# frozen objects, built in a third of the time.
_new = object.__new__
_sc = tuple(SimpleCommand.__dict__[n].__set__ for n in SimpleCommand.__slots__)
_cl = tuple(Classification.__dict__[n].__set__ for n in Classification.__slots__)
_SC_FIELDS = ("argv", "program", "prefix", "text", "wrappers", "repo_configured")
_CL_FIELDS = ("read_only", "categories", "commands", "writes", "cd_targets", "reasons",
              "parse_ok", "repo_configured")  # fmt: skip
assert SimpleCommand.__slots__ == _SC_FIELDS and Classification.__slots__ == _CL_FIELDS


def new_simple_command(
    argv: tuple[str | None, ...],
    program: str | None,
    prefix: str,
    text: str,
    wrappers: tuple[str, ...],
    repo_configured: bool,
) -> SimpleCommand:
    obj = _new(SimpleCommand)
    _sc[0](obj, argv)
    _sc[1](obj, program)
    _sc[2](obj, prefix)
    _sc[3](obj, text)
    _sc[4](obj, wrappers)
    _sc[5](obj, repo_configured)
    return obj


def new_classification(
    read_only: bool,
    categories: frozenset[str],
    commands: tuple[SimpleCommand, ...],
    writes: tuple[str, ...],
    cd_targets: tuple[str, ...],
    reasons: tuple[str, ...],
    parse_ok: bool,
    repo_configured: frozenset[str],
) -> Classification:
    obj = _new(Classification)
    _cl[0](obj, read_only)
    _cl[1](obj, categories)
    _cl[2](obj, commands)
    _cl[3](obj, writes)
    _cl[4](obj, cd_targets)
    _cl[5](obj, reasons)
    _cl[6](obj, parse_ok)
    _cl[7](obj, repo_configured)
    return obj
