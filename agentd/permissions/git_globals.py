"""git's options before its subcommand (`git -C dir -c user.name=x commit`), as far as an
offered rule may carry them.

An allow rule matches a command's literal text, as Claude Code's prefix rules do, so
`Bash(git commit:*)` never allows `git -c k=v commit` nor `git -C dir commit`. Instead
the ask offers the narrower rule written as the command was, `Bash(git -C dir commit:*)`,
which allows that spelling and no other. A `-c` can name a program git runs
(`core.pager`, `core.hooksPath`, `core.sshCommand`, `alias.*`, `diff.external`...): a
rule is offered with a `-c` only when its key is one of the inert ones below, which
name no program and read no other file; with any other key only the exact command is.
"""

from __future__ import annotations

from collections.abc import Sequence

# `-c` keys (section.key, compared lower-cased, no subsection) that run nothing.
INERT_KEYS: frozenset[str] = frozenset(
    {
        "user.name",
        "user.email",
        "author.name",
        "author.email",
        "committer.name",
        "committer.email",
        "color.ui",
        "core.quotepath",
        "core.abbrev",
        "init.defaultbranch",
        "status.short",
        "status.branch",
        "status.showuntrackedfiles",
        "diff.renames",
        "diff.algorithm",
        "diff.mnemonicprefix",
        "diff.noprefix",
        "log.decorate",
        "column.ui",
        "advice.detachedhead",
    }
)
# Options before the subcommand that take no value and run nothing.
_FLAGS = frozenset({"--no-pager", "-P", "--no-optional-locks", "--no-replace-objects"})


def inert_config(assignment: str) -> bool:
    """Whether `-c assignment` (`key=value` or a bare `key`) sets an inert key."""
    key = assignment.partition("=")[0]
    return key.lower() in INERT_KEYS


def subcommand_at(argv: Sequence[str | None]) -> int | None:
    """The index of git's subcommand in `argv` (a `git` command's words) past options a
    rule may carry (`-C dir`, `-c` with an inert key, harmless flags); None when an
    option there is not one of those or a word is known only at run time."""
    if not argv or argv[0] != "git":
        return None
    i = 1
    while i < len(argv):
        word = argv[i]
        if word is None:
            return None
        if word in ("-C", "-c"):
            value = argv[i + 1] if i + 1 < len(argv) else None
            if value is None or (word == "-c" and not inert_config(value)):
                return None
            i += 2
        elif word in _FLAGS:
            i += 1
        elif word.startswith("-"):
            return None
        else:
            return i
    return None
