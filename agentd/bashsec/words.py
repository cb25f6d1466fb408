"""Words: the static value of a bash word (quoting, escapes, $'...', concatenations,
NAME=VALUE words, arrays) or a `Dyn` run-time word; what a word runs inside it (a
substitution, an expansion) is walked through the Ctx (classifier.py's walk)."""

from __future__ import annotations

import re

from tree_sitter import Node

from agentd.bashsec import shellvars
from agentd.bashsec.context import SETTINGS, Ctx, Dyn, Word

_ASSIGNABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[.*\])?\+?", re.S)


def not_an_assignment(node: Node, ctx: Ctx) -> bool:
    """tree-sitter-bash takes `--x=1` for an assignment; bash takes it for a word."""
    name_node = node.child_by_field_name("name")
    if name_node is None:
        return True
    return _ASSIGNABLE.fullmatch(ctx.text(name_node)) is None


def assignment_word(node: Node, ctx: Ctx) -> Word:
    """A NAME=VALUE that bash reads as an ordinary word."""
    name_node = node.child_by_field_name("name")
    value = assigned_value(node.child_by_field_name("value"), ctx)
    name = ctx.text(name_node) if name_node is not None else ""
    op = "+=" if any(c.type == "+=" for c in node.children) else "="
    if isinstance(value, str) and "\\" not in name and "'" not in name and '"' not in name:
        return f"{name}{op}{value}"
    return Dyn(ctx.text(node))


def assigned_value(node: Node | None, ctx: Ctx) -> Word:
    if node is None:
        return ""
    return array_value(node, ctx) if node.type == "array" else word_value(node, ctx)


def array_value(node: Node, ctx: Ctx) -> Word:
    """(a b c): a number array only if every element is a number; [i]=v indices are arithmetic."""
    numbers = True
    for child in node.named_children:
        value = word_value(child, ctx)
        text = ctx.text(child)
        if text.startswith("["):
            index, sep, rest = text[1:].partition("]=")
            if isinstance(value, Dyn) and ("$" in index or "`" in index):
                ctx.opaque(f"the array index in {text} is evaluated as arithmetic")
            elif sep:
                shellvars.arith_text(ctx, index, f"the array index in {text}")
                value = rest
        numbers = numbers and shellvars.is_number(value)
    return "0" if numbers else Dyn(ctx.text(node))


def word_value(node: Node, ctx: Ctx) -> Word:
    """The static value of a word, or Dyn; walks any substitution inside it."""
    t = node.type
    if t == "word":
        text = ctx.text(node)
        if "\\" in text:
            text = _unescape(text)
        if "{" in text and ("," in text or ".." in text):
            return Dyn(text)
        return text
    if t == "raw_string":
        return ctx.text(node)[1:-1]
    if t == "number":
        return ctx.text(node)
    if t == "string":
        return _string(node, ctx)
    if t == "ansi_c_string":
        decoded = _ansi_c(ctx.text(node)[2:-1])
        return decoded if decoded is not None else Dyn(ctx.text(node))
    if t == "concatenation":
        return _concatenation(node, ctx)
    if t in ("simple_expansion", "expansion"):
        ctx.walk.node(node, ctx)
        return Dyn(ctx.text(node), not _is_path_var(node, ctx))
    ctx.walk.node(node, ctx)
    return Dyn(ctx.text(node))


def _is_path_var(node: Node, ctx: Ctx) -> bool:
    for child in node.named_children:
        if child.type == "variable_name":
            return ctx.text(child) in SETTINGS.path_vars and node.named_child_count == 1
    return False


def _string(node: Node, ctx: Ctx) -> Word:
    parts: list[str] = []
    dyn = False
    optlike = True
    for child in node.named_children:
        if child.type == "string_content":
            if not dyn:
                text = ctx.text(child)
                parts.append(_unescape_dq(text) if "\\" in text else text)
        else:
            ctx.walk.node(child, ctx)
            if not dyn:
                dyn = True
                prefix = "".join(parts)
                optlike = (
                    prefix.startswith("-")
                    if prefix
                    else not (
                        child.type in ("simple_expansion", "expansion") and _is_path_var(child, ctx)
                    )
                )
    text = "".join(parts)
    if dyn:
        return Dyn(ctx.text(node), optlike)
    return text


def _concatenation(node: Node, ctx: Ctx) -> Word:
    parts: list[str] = []
    first_dyn: Dyn | None = None
    brace = False
    for child in node.named_children:
        value = word_value(child, ctx)
        if isinstance(value, Dyn):
            if first_dyn is None:
                first_dyn = value
                prefix = "".join(parts)
                if prefix:
                    value.optlike = prefix.startswith("-")
        elif first_dyn is None:
            if child.type == "word" and ("{" in value or "}" in value):
                brace = True
            parts.append(value)
    raw = ctx.text(node)
    if first_dyn is not None:
        return Dyn(raw, first_dyn.optlike)
    joined = "".join(parts)
    if brace and ("," in raw or ".." in raw):
        return Dyn(raw)
    return joined


_ESCAPE = re.compile(r"\\(.)", re.S)
_DQ_ESCAPE = re.compile(r"\\([\\$`\"\n])")


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def _unescape_dq(text: str) -> str:
    return _DQ_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)


_ANSI = re.compile(
    r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)", re.S
)
_ANSI_SIMPLE = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip


def _ansi_c(body: str) -> str | None:
    """Decode the inside of $'...'; None if it holds an escape we do not decode."""
    failed = False

    def one(m: re.Match[str]) -> str:
        nonlocal failed
        esc = m.group(1)
        head = esc[0]
        if head in "xuU":
            code = int(esc[1:] or "-1", 16)
            if not 0 <= code <= 0x10FFFF:
                failed = True
                return ""
            return chr(code)
        if head in "01234567":
            return chr(int(esc, 8) & 0xFF)
        if head == "c":
            return chr(ord(esc[1]) & 0x1F)
        if head in _ANSI_SIMPLE:
            return _ANSI_SIMPLE[head]
        failed = True
        return ""

    decoded = _ANSI.sub(one, body) if "\\" in body else body
    return None if failed or "\x00" in decoded else decoded
