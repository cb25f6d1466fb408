"""Whether allow rules cover a bash command: by what will run, not by what it resembles.

A `Bash(prefix:*)` rule covers one simple command only when that command's literal text
begins with the prefix, as Claude Code matches: `git -c core.fsmonitor=x status`,
`FOO=1 git status` and `timeout 5 git status` do not begin with `git status`. Whatever
the rules did not see must be read-only on its own: each covered command is replaced by
`true` (keeping its expansions, substitutions and redirections, which run whatever the
command is) and the classifier judges what is left. So `git status > f` leaves
`true > f`, a write, and `git log $(touch x)` leaves `true $(touch x)`: neither is
covered, and the usual decision follows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

_LANGUAGE = Language(tree_sitter_bash.language())
_local = threading.local()

# Parts of a covered command that run whatever the command is: kept for the classifier.
_DYNAMIC = frozenset(
    {
        "command_substitution",
        "process_substitution",
        "expansion",
        "simple_expansion",
        "arithmetic_expansion",
        "file_redirect",
        "heredoc_redirect",
        "herestring_redirect",
    }
)


def _parser() -> Parser:
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser


def neutralise(command: str, covered: Callable[[str], bool]) -> tuple[str, int] | None:
    """The command with every simple command that `covered` accepts (by its literal text)
    replaced by `true` and its dynamic parts; and how many were replaced.

    None when the command does not parse cleanly (no rule then covers any part of it).
    """
    src = command.encode()
    tree = _parser().parse(src)
    if tree.root_node.has_error:
        return None
    count = 0

    def text(node: Node) -> str:
        return src[node.start_byte : node.end_byte].decode()

    def dynamic(node: Node) -> bool:
        return node.type in _DYNAMIC or any(dynamic(c) for c in node.children)

    def render(node: Node) -> str:
        nonlocal count
        if node.type == "command" and covered(text(node)):
            count += 1
            kept = [render(c) for c in node.children if c.type != "command_name" and dynamic(c)]
            return " ".join(["true", *kept])
        if not node.children:
            return text(node)
        out: list[str] = []
        pos = node.start_byte
        for child in node.children:
            out.append(src[pos : child.start_byte].decode())
            out.append(render(child))
            pos = child.end_byte
        out.append(src[pos : node.end_byte].decode())
        return "".join(out)

    rendered = render(tree.root_node)
    # Text after the root node's end (trailing blanks) is kept as is.
    return rendered + src[tree.root_node.end_byte :].decode(), count
