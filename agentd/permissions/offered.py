"""The rules an "always" answer may add: built from what the classifier parsed, and each
one offered only if it allows the very call it is offered for.

For a Bash call the candidates come from the first simple command that is not read-only
on its own, word by word as the classifier split its argv: its prefix for rule matching
(`npm run test`, only when those are its first words as written), that prefix and one or
two words more (`python3 -c`), that command exactly, and last the whole command exactly.
A word is written into a rule as it is written in the command, quotes and all, since
allow rules match a command's literal text; so `python3 -c 'from x import y; print(1)'`
offers `Bash(python3 -c:*)`, never a rule cut at the `;` inside the quotes. git's
options before its subcommand are kept as written (`Bash(git -C dir commit:*)`), since
`Bash(git commit:*)` does not match that spelling; a `-c` only with an inert key
(git_globals).

Every candidate is then parsed as a rule and matched against the call by the same code
that decides calls (matching.RuleMatcher.allowed), alone in the allow list: one that
does not parse back to itself, or would leave the call to be asked again (a prefix rule
for `cat a | python3 x.py > out`, where the redirection is not the rule's to allow; a
rule for one of two commands that both need approval), is not offered. For a file the
candidate is the path itself (`Edit(//abs/path)`), for WebFetch the host.

An ask that an allow rule cannot end (an ask rule, a hook's ask, a critical rm,
dangerouslyDisableSandbox) offers none: the engine passes no choices for it.
"""

from __future__ import annotations

import os
import threading

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from agentd.foundation.errors import InvalidRequest
from agentd.permissions import git_globals
from agentd.permissions.call import Call
from agentd.permissions.matching import RuleMatcher
from agentd.permissions.rules import EDIT_TOOLS, SourcedRule, parse_rule, url_host
from agentd.permissions.settings import MergedSettings
from agentd.sessions.session import Session

# Words after the classifier's prefix that a narrower prefix rule may take.
EXTRA_WORDS = 2
_GLOB_CHARS = frozenset("*?[")  # a path rule's wildcards (a Bash rule's only one is *)
_LANGUAGE = Language(tree_sitter_bash.language())
_local = threading.local()


def rule_choices(
    call: Call, session: Session, matcher: RuleMatcher, *, protected: bool = False
) -> tuple[str, ...]:
    """The rules an "always" answer to `call` may add, broadest first; each allows the
    call. `protected`: the call writes a protected path, which only a rule naming that
    very path allows (protected_edits.explicit_allow)."""
    if call.is_bash:
        candidates = _bash_candidates(call, matcher)
    elif call.path:
        group = "Edit" if call.access_mode == "write" or call.name in EDIT_TOOLS else "Read"
        candidates = [f"{group}(/{call.path})"]
    elif call.url and (host := url_host(call.url)):
        candidates = [f"WebFetch(domain:{host})"]
    else:
        candidates = [call.name]
    return tuple(
        text
        for text in dict.fromkeys(candidates)
        if _allows(text, call, session, matcher, protected=protected)
    )


def _allows(
    text: str, call: Call, session: Session, matcher: RuleMatcher, *, protected: bool
) -> bool:
    """Whether the rule `text` parses back to itself and, alone, allows `call`."""
    try:
        rule = parse_rule(text)
    except InvalidRequest:
        return False
    spec = rule.specifier or ""
    wild = "*" in spec.removesuffix(":*") if call.is_bash else bool(_GLOB_CHARS & set(spec))
    if rule.text != text or wild:
        # A `*` (or a path's ? and [) written into a rule would match more than the call
        # shown, under the call's own text: such a rule is not offered.
        return False
    sourced = SourcedRule(rule, "session")
    if call.is_bash:
        return matcher.allowed(call, MergedSettings(allow=[sourced]), session) is not None
    if protected and os.path.basename(spec.rstrip("/")) != os.path.basename(call.path):
        return False
    return matcher.matches(sourced, call, session, kind="allow")


def _bash_candidates(call: Call, matcher: RuleMatcher) -> list[str]:
    cls = call.classification
    out: list[str] = []
    needing = [c for c in cls.commands if not matcher.classify(c.text).read_only]
    if cls.parse_ok and needing:
        first = needing[0]
        words = _literal_words(first.text)
        prefix = first.prefix.split()
        n = len(prefix)
        # `git -C dir -c user.name=x commit`: the prefix as written carries the options
        # before the subcommand (git_globals says which may be carried).
        at = git_globals.subcommand_at(first.argv) if prefix[:1] == ["git"] else None
        if at is not None and at > 1 and list(first.argv[at : at + n - 1]) == prefix[1:]:
            prefix = [w or "" for w in first.argv[: at + n - 1]]
            n = len(prefix)
        # Prefix rules only where the classifier's prefix is the command's first words as
        # written, and only over words known before the command runs.
        if (
            words is not None
            and len(words) == len(first.argv)
            and list(first.argv[:n]) == prefix
            and None not in first.argv[:n]
        ):
            out.append(f"Bash({' '.join(words[:n])}:*)")
            for k in range(n + 1, min(len(words), n + EXTRA_WORDS + 1)):
                if first.argv[k - 1] is None:
                    break
                out.append(f"Bash({' '.join(words[:k])}:*)")
        out.append(f"Bash({first.text})")
    out.append(f"Bash({call.command.strip()})")
    return out


def _parser() -> Parser:
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser


def _literal_words(text: str) -> list[str] | None:
    """The words of the simple command `text` (its program word first) as written, or
    None when `text` is not one simple command of words."""
    src = text.encode()
    tree = _parser().parse(src)
    if tree.root_node.has_error:
        return None
    command = _first_command(tree.root_node)
    if command is None:
        return None
    words = []
    for child in command.named_children:
        if child.type.endswith("redirect") or child.type == "variable_assignment":
            return None  # not the words of argv alone
        words.append(src[child.start_byte : child.end_byte].decode())
    return words


def _first_command(node: Node) -> Node | None:
    if node.type == "command":
        return node
    for child in node.named_children:
        if (found := _first_command(child)) is not None:
            return found
    return None
