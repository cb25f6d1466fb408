"""Commands bash splits at blanks and operators alone, read without a parse.

Most commands agents run are plain words (`git status`, `ls -la src`, `grep -n 'a b' f`):
nothing in them is expanded, globbed, redirected or grouped, and their quotes hold
literal text. For those, splitting the text gives exactly the words the tree walk would
(tests/bashsec: test_plain_commands_read_without_a_parse_match_the_parse), without
the parse, which costs more than the rest of the classification of such a command.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agentd.bashsec import shellvars
from agentd.bashsec.argv import run

if TYPE_CHECKING:
    from agentd.bashsec.context import Ctx, Word


# A command of plain words and list operators only: nothing in it is expanded, globbed,
# redirected or grouped, and its quotes hold literal text ('…' anything, "…" without $,
# ` or \), so bash splits it at blanks and operators alone and the classifier can read
# it without a parse (most commands agents run look like this). The tree walk gives the
# same answer (tests/bashsec: test_plain_commands_read_without_a_parse_match_the_parse).
_PLAIN_CHARS = r"[A-Za-z0-9_\-./=:,@%+]"
_PLAIN_QUOTED = r"""'[^']*'|"[^"$`\\!]*\""""
_PLAIN_WORD = rf"(?:{_PLAIN_CHARS}|{_PLAIN_QUOTED})++"
# What plain_into accepts (the tests select plain commands with it). Possessive
# quantifiers: no backtracking, linear in the length of the command.
PLAIN = re.compile(rf"(?:[ \t]++|{_PLAIN_WORD}|\|\||&&|\|&|[|;&])++")
# One word or operator, after any blanks.
_PLAIN_PIECE = re.compile(rf"[ \t]*+(?:({_PLAIN_WORD})|(\|\||&&|\|&|[|;&]))")
# One simple command of unquoted plain words (split by str.split, the cheapest way).
_PLAIN_SIMPLE = re.compile(r"[A-Za-z0-9_\-./=:,@%+ \t]*")
_UNQUOTE = re.compile(r"""'([^']*)'|"([^"]*)\"""")
_ASSIGNMENT_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_RESERVED = frozenset(
    {"if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until",
     "do", "done", "function", "time", "coproc", "in", "{", "}", "[[", "]]", "!"}
)  # fmt: skip


def _unquote(text: str) -> str:
    single = "'" in text
    double = '"' in text
    if not double:
        return text.replace("'", "") if single else text
    if not single:
        return text.replace('"', "")
    return _UNQUOTE.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)


def plain_into(ctx: Ctx, command: str) -> bool:
    """Classify a plain command without a parse; False (nothing done) if it is not plain."""
    if not command.isascii():
        return False
    if _PLAIN_SIMPLE.fullmatch(command) is not None:
        return _plain_simple(ctx, command)
    if PLAIN.fullmatch(command) is None:
        return False  # one scan in C rejects what the token loop below would
    segments: list[list[tuple[str, int, int]]] = []
    words: list[tuple[str, int, int]] = []
    last_op = ""
    # PLAIN matched: the pieces follow each other to the end (but for trailing blanks).
    for m in _PLAIN_PIECE.finditer(command):
        word = m.group(1)
        if word is None:
            if not words:
                return False  # an operator with no command before it: let the parser say
            segments.append(words)
            words = []
            last_op = m.group(2)
        else:
            words.append((word, m.start(1), m.end()))
    if words:
        segments.append(words)
    elif last_op not in (";", "&"):
        return False
    heads: list[int] = []
    for words in segments:
        k = 0
        while k < len(words) and "=" in words[k][0] and _ASSIGNMENT_WORD.match(words[k][0]):
            k += 1
        if k < len(words):
            name = words[k][0]
            if name in _RESERVED or "'" in name or '"' in name:
                return False  # keywords, and quoted names, are the parser's
        heads.append(k)
    ctx.src = command.encode("ascii")
    ctx.chars = command
    for words, k in zip(segments, heads, strict=True):
        for text, _, _ in words[:k]:
            name, _, value = text.partition("=")
            shellvars.assign(ctx, name.rstrip("+"), _unquote(value))
        if k < len(words):
            rest = words[k:]
            argv: list[Word] = [_unquote(w) if "'" in w or '"' in w else w for w, _, _ in rest]
            run(ctx, argv, [w[1] for w in rest], rest[-1][2], ())
    return True


def _plain_simple(ctx: Ctx, command: str) -> bool:
    """_plain_into for one simple command of unquoted words: the most common case."""
    words = command.split()
    k = 0
    while k < len(words) and "=" in words[k] and _ASSIGNMENT_WORD.match(words[k]):
        k += 1
    if k < len(words) and words[k] in _RESERVED:
        return False
    ctx.src = command.encode("ascii")
    ctx.chars = command
    pos = 0
    for text in words[:k]:
        name, _, value = text.partition("=")
        shellvars.assign(ctx, name.rstrip("+"), value)
        pos = command.index(text, pos) + len(text)
    if k < len(words):
        argv: list[Word] = []
        starts: list[int] = []
        for text in words[k:]:
            pos = command.index(text, pos)
            argv.append(text)
            starts.append(pos)
            pos += len(text)
        run(ctx, argv, starts, pos, ())
    return True
