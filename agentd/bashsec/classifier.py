"""Walk a tree-sitter-bash syntax tree and classify every simple command in it.

Two layers: the tree walk (lists, pipelines, compound statements, redirections,
substitutions, words and their quoting) turns each simple command into an argv of
static strings and `Dyn` run-time words (context.py); `run` (argv.py) then reads that
argv against the program table (table.py, data in programs.toml), strips wrappers,
descends into subcommands and applies option and operand rules. Anything unknown fails
closed.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from agentd.bashsec import plain, shellvars, words
from agentd.bashsec.argv import run
from agentd.bashsec.context import SETTINGS, Assigned, Ctx, Dyn, Walk, Word
from agentd.bashsec.model import (
    Classification,
    new_classification,
)

_LANGUAGE = Language(tree_sitter_bash.language())
_local = threading.local()

_WRITE_REDIRECTS = frozenset({">", ">>", "&>", "&>>", ">|", "<>"})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
# Leaves that hold nothing that can run.
_LEAVES = frozenset(
    {
        "word", "raw_string", "number", "variable_name", "string_content", "heredoc_content",
        "comment", "file_descriptor", "special_variable_name", "regex", "extglob_pattern",
        "heredoc_start", "heredoc_end", "ansi_c_string", "test_operator",
    }
)  # fmt: skip
_GLOB_IN_NAME = re.compile(r"[*?{]|\[.")
_GLOB_CHARS = frozenset("*?{[")  # a name without any of them is no glob


def _parser() -> Parser:
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser


# ------------------------------------------------------------------ public entry points


# The cache holds at most _CACHE_SIZE commands of at most _CACHE_MAX_CHARS each.
_CACHE_SIZE = 4096
_CACHE_MAX_CHARS = 2048


def classify(command: str) -> Classification:
    """Classify a bash command. Pure and thread-safe; cached on the whole command text."""
    if len(command) > _CACHE_MAX_CHARS:
        return classify_uncached(command)
    return _classify_cached(command)


@lru_cache(maxsize=_CACHE_SIZE)
def _classify_cached(command: str) -> Classification:
    return classify_uncached(command)


def classify_uncached(command: str) -> Classification:
    """classify() without the cache (for benchmarks and memory-sensitive callers)."""
    ctx = new_ctx()
    if "\x00" in command:
        ctx.parse_ok = False
        ctx.opaque("command contains a NUL byte")
    elif len(command) > SETTINGS.max_length:
        ctx.parse_ok = False
        ctx.opaque(f"command is longer than {SETTINGS.max_length} characters")
    else:
        try:
            if not plain.plain_into(ctx, command):
                _parse_into(ctx, command)
        except Exception as exc:  # noqa: BLE001
            # Fail closed on anything the walk did not expect (e.g. absurd nesting).
            ctx.parse_ok = False
            ctx.opaque(f"the classifier could not read the command ({type(exc).__name__})")
        if ctx.arith_refs or ctx.indirect or ctx.integers:
            shellvars.finish(ctx)
        for cmd in ctx.commands if ctx.defined else ():
            if cmd.program in ctx.defined:
                ctx.opaque(f"calls {cmd.program}, a function or alias defined in the command")
    read_only = ctx.parse_ok and not ctx.cats and not ctx.unsafe
    reasons = ctx.reasons
    result: Classification = new_classification(
        read_only,
        frozenset(ctx.cats) if ctx.cats else _NONE,
        tuple(ctx.commands),
        tuple(dict.fromkeys(ctx.writes)) if ctx.writes else (),
        tuple(ctx.cds),
        tuple(dict.fromkeys(reasons)) if len(reasons) > 1 else tuple(reasons),
        ctx.parse_ok,
        frozenset(ctx.repo_configured) if ctx.repo_configured else _NONE,
    )
    return result


_NONE: frozenset[str] = frozenset()


def _parse_into(ctx: Ctx, command: str) -> None:
    src = command.encode("utf-8", "surrogatepass")
    root = _parser().parse(src).root_node
    saved = ctx.src, ctx.chars
    ctx.src = src
    ctx.chars = command if command.isascii() else None
    if root.has_error:
        ctx.parse_ok = False
        ctx.opaque("the command does not parse (syntax error)")
    _walk(root, ctx)
    ctx.src, ctx.chars = saved


def run_shell_literal(ctx: Ctx, script: str) -> None:
    """Classify the text given to `sh -c` as if it were a command of its own."""
    if ctx.depth >= SETTINGS.max_depth:
        ctx.opaque("shell commands nested too deeply")
        return
    ctx.depth += 1
    _parse_into(ctx, script)
    ctx.depth -= 1


# ------------------------------------------------------------------ the tree walk


def _walk(node: Node, ctx: Ctx) -> None:
    _DISPATCH.get(node.kind_id, _children)(node, ctx)


def _children(node: Node, ctx: Ctx) -> None:
    """Walk a node's named children (what a node without a handler of its own holds)."""
    dispatch = _DISPATCH
    for child in node.named_children:
        handler = dispatch.get(child.kind_id, _children)
        if handler is not _leaf:
            handler(child, ctx)


def _leaf(node: Node, ctx: Ctx) -> None:
    """A leaf holds nothing that can run."""


def _expansion(node: Node, ctx: Ctx) -> None:
    shellvars.expansion(ctx, node)
    _children(node, ctx)


def _arithmetic_expansion(node: Node, ctx: Ctx) -> None:
    for child in node.named_children:
        shellvars.arith(ctx, child, "$((…))")


def _compound(node: Node, ctx: Ctx) -> None:
    if node.child_count and node.children[0].type == "((":
        for child in node.named_children:
            shellvars.arith(ctx, child, "((…))")
    else:
        _children(node, ctx)


def _c_style_for(node: Node, ctx: Ctx) -> None:
    for child in node.named_children:
        if child.type == "do_group" or child.type == "compound_statement":
            _walk(child, ctx)
        else:
            shellvars.arith(ctx, child, "for ((…))")


def _test(node: Node, ctx: Ctx) -> None:
    shellvars.test_command(ctx, node)
    _children(node, ctx)


def _function(node: Node, ctx: Ctx) -> None:
    name = node.child_by_field_name("name")
    if name is not None:
        ctx.defined.add(ctx.text(name))
    _children(node, ctx)


def _redirected(node: Node, ctx: Ctx) -> None:
    extra: list[Node] = []
    body = None
    for child in node.named_children:
        if child.type in _REDIRECTS:
            extra.extend(_redirect(child, ctx))
        elif body is None:
            body = child
        else:
            _walk(child, ctx)
    if body is not None:
        if body.type == "command":
            _command(body, ctx, extra)
        else:
            _walk(body, ctx)
            for word in extra:
                words.word_value(word, ctx)


def _redirect(node: Node, ctx: Ctx) -> list[Node]:
    """Record what a redirection writes; return words the grammar put in it by mistake."""
    if node.type != "file_redirect":
        for child in node.named_children:
            _walk(child, ctx)
        return []
    op = ""
    dest = None
    extra: list[Node] = []
    for child in node.children:
        if not child.is_named:
            op = child.type
        elif child.type == "file_descriptor":
            continue
        elif dest is None:
            dest = child
        else:
            extra.append(child)
    if dest is None:
        return extra
    target = words.word_value(dest, ctx)
    shown = target if isinstance(target, str) else target.text
    if shown.startswith(("/dev/tcp/", "/dev/udp/")):
        # bash itself opens a socket for these paths, in either direction.
        ctx.add({"network"}, f"redirects to {shown}, a network connection bash opens")
    is_write = op in _WRITE_REDIRECTS or (
        op == ">&" and not (isinstance(target, str) and (target.isdigit() or target == "-"))
    )
    if is_write:
        if isinstance(target, Dyn):
            ctx.write(target.text, f"redirects output to {target.text}, known only at run time")
        elif target not in SETTINGS.harmless_targets:
            ctx.write(target, f"redirects output to {target}")
    return extra


def _assignment(node: Node, ctx: Ctx) -> None:
    if words.not_an_assignment(node, ctx):
        run(ctx, [words.assignment_word(node, ctx)], [node.start_byte], node.end_byte, ())
        return
    name_node = node.child_by_field_name("name")
    value_node = node.child_by_field_name("value")
    value = words.assigned_value(value_node, ctx)
    if name_node is not None:
        shellvars.assignment_node(ctx, name_node, value)


def _assignments(node: Node, ctx: Ctx) -> None:
    """a=1 b=2 with no command; from a word bash cannot assign to on, it is a command."""
    argv: list[Word] = []
    starts: list[int] = []
    for child in node.named_children:
        if child.type != "variable_assignment":
            _walk(child, ctx)
        elif argv or words.not_an_assignment(child, ctx):
            argv.append(words.assignment_word(child, ctx))
            starts.append(child.start_byte)
        else:
            _assignment(child, ctx)
    if argv:
        run(ctx, argv, starts, node.end_byte, ())


def _for(node: Node, ctx: Ctx) -> None:
    """for/select NAME in WORDS: NAME takes each word (the positional words without `in`)."""
    name_node = node.child_by_field_name("variable")
    values: list[Word] = []
    has_in = False
    for child in node.named_children:
        if child.type in ("do_group", "compound_statement", "comment") or (
            name_node is not None and child.start_byte == name_node.start_byte
        ):
            continue
        has_in = True
        values.append(words.word_value(child, ctx))
    if node.children and node.children[0].type == "select" or not has_in:
        values.append(Dyn("<input>"))
    if name_node is not None:
        name = ctx.text(name_node)
        for value in values:
            shellvars.assign(ctx, name, value, "for")
    for child in node.named_children:
        if child.type in ("do_group", "compound_statement"):
            _walk(child, ctx)


def _declaration(node: Node, ctx: Ctx) -> None:
    """declare/local/export/readonly/typeset/unset as a simple command the table reads."""
    argv: list[Word] = []
    starts: list[int] = []
    keyword = ""  # declare, local, export…
    for child in node.children:
        if not child.is_named:
            if not argv:
                keyword = child.type
                argv.append(keyword)
                starts.append(child.start_byte)
            continue
        starts.append(child.start_byte)
        if child.type == "variable_assignment":
            name_node = child.child_by_field_name("name")
            value_node = child.child_by_field_name("value")
            value = words.assigned_value(value_node, ctx)
            if name_node is None:
                argv.append(Dyn(ctx.text(child)))
                continue
            shellvars.assignment_node(ctx, name_node, value, keyword)
            name = ctx.text(name_node)
            if name_node.type == "subscript":
                inner = name_node.child_by_field_name("name") or name_node.named_children[0]
                name = ctx.text(inner)
            if isinstance(value, str) and "=" not in ctx.text(name_node):
                # Static: the word bash sees (the check records the assignment again).
                op = "+=" if any(c.type == "+=" for c in child.children) else "="
                argv.append(f"{ctx.text(name_node)}{op}{value}")
            else:
                argv.append(Assigned(ctx.text(child), name))
        elif child.type == "variable_name":
            argv.append(ctx.text(child))
        else:
            argv.append(words.word_value(child, ctx))
    if argv:
        run(ctx, argv, starts, node.end_byte, ())


def _command(node: Node, ctx: Ctx, extra: list[Node] | None = None) -> None:
    """A simple command; `extra`: words a redirection around it holds (see _redirect)."""
    if extra is None:
        extra = []
    argv: list[Word] = []
    starts: list[int] = []
    name_node = None
    chars = ctx.chars
    for child in node.named_children:
        t = child.type
        if t == "word":
            # word_value's first case, inline: most words hold no escape and no brace.
            start = child.start_byte
            text = chars[start : child.end_byte] if chars is not None else ctx.text(child)
            argv.append(words.word_value(child, ctx) if "\\" in text or "{" in text else text)
            starts.append(start)
        elif t == "variable_assignment":
            if argv or words.not_an_assignment(child, ctx):
                argv.append(words.assignment_word(child, ctx))
                starts.append(child.start_byte)
            else:
                _assignment(child, ctx)
        elif t in _REDIRECTS:
            extra.extend(_redirect(child, ctx))
        elif t == "command_name":
            name_node = child.named_children[0] if child.named_child_count else child
            argv.append(words.word_value(name_node, ctx))
            starts.append(child.start_byte)
        else:
            argv.append(words.word_value(child, ctx))
            starts.append(child.start_byte)
    end = node.end_byte
    for word in extra:
        argv.append(words.word_value(word, ctx))
        starts.append(word.start_byte)
        end = max(end, word.end_byte)
    if not argv:
        return
    if name_node is not None and name_node.type in ("word", "concatenation"):
        name = argv[0]
        if (
            isinstance(name, str)
            and not _GLOB_CHARS.isdisjoint(name)
            and name not in ("[", "[[")
            and _GLOB_IN_NAME.search(name)
        ):
            argv[0] = Dyn(name)
    run(ctx, argv, starts, end, ())


_HANDLERS = {
    "command": _command,
    "redirected_statement": _redirected,
    "file_redirect": _redirect,
    "heredoc_redirect": _redirect,
    "herestring_redirect": _redirect,
    "variable_assignment": _assignment,
    "variable_assignments": _assignments,
    "declaration_command": _declaration,
    "unset_command": _declaration,
    "expansion": _expansion,
    "arithmetic_expansion": _arithmetic_expansion,
    "compound_statement": _compound,
    "c_style_for_statement": _c_style_for,
    "for_statement": _for,
    "test_command": _test,
    "function_definition": _function,
}

# Every node type the walk reads: a handler, a leaf, or (absent) its named children walked.
# Keyed by kind id, an int, where a type name is a new str each time tree-sitter gives it;
# several ids share a name (the grammar's aliases). ERROR nodes' id is none of these.
_DISPATCH = {
    kind: handler
    for names in (dict.fromkeys(_LEAVES, _leaf), _HANDLERS)
    for kind in range(_LANGUAGE.node_kind_count)
    if (handler := names.get(_LANGUAGE.node_kind_for_id(kind) or "")) is not None
}

# What argv.py, checks.py and shellvars.py call back into (through the Ctx).
WALK = Walk(node=_walk, word=words.word_value, script=run_shell_literal, argv=run)


def new_ctx() -> Ctx:
    """A walk's state, at its start."""
    return Ctx(WALK)
