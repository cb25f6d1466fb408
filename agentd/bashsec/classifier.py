"""Walk a tree-sitter-bash syntax tree and classify every simple command in it.

Two layers: the tree walk (lists, pipelines, compound statements, redirections,
substitutions, words and their quoting) turns each simple command into an argv of
static strings and `Dyn` run-time words; `_run` then reads that argv against the
program table (table.py, data in programs.toml), strips wrappers, descends into
subcommands and applies option and operand rules. Anything unknown fails closed.
"""

from __future__ import annotations

import posixpath
import re
import threading
from fnmatch import fnmatchcase
from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from agentd.bashsec import checks, plain, shellvars
from agentd.bashsec.model import (
    Classification,
    SimpleCommand,
    new_classification,
    new_simple_command,
)
from agentd.bashsec.table import Spec, load

_LANGUAGE = Language(tree_sitter_bash.language())
_local = threading.local()
SETTINGS, PROGRAMS = load()

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


def _parser() -> Parser:
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser


class Dyn:
    """A word only known at run time. `optlike`: it could expand to an option (-x)."""

    __slots__ = ("text", "optlike")

    def __init__(self, text: str, optlike: bool = True) -> None:
        self.text = text
        self.optlike = optlike

    def __repr__(self) -> str:
        return f"Dyn({self.text!r})"


class Assigned(Dyn):
    """A NAME=VALUE argument of declare/export… whose assignment the walk already recorded."""

    __slots__ = ("name",)

    def __init__(self, text: str, name: str) -> None:
        super().__init__(text, False)
        self.name = name


Word = str | Dyn


class Ctx:
    """What the walk has found so far."""

    __slots__ = (
        "cats", "reasons", "writes", "cds", "commands", "parse_ok", "unsafe", "defined",
        "depth", "src", "assigned", "arith_refs", "indirect", "integers", "repo_configured",
    )  # fmt: skip

    def __init__(self) -> None:
        self.cats: set[str] = set()
        self.reasons: list[str] = []
        self.writes: list[str] = []
        self.cds: list[str] = []
        self.commands: list[SimpleCommand] = []
        self.parse_ok = True
        self.unsafe = False
        self.defined: set[str] = set()
        self.depth = 0
        self.src = b""
        # Every assignment by any route: name -> values (a str, a Dyn, or shellvars.INT).
        self.assigned: dict[str, list[object]] = {}
        # Names whose value bash evaluates as arithmetic -> where.
        self.arith_refs: dict[str, str] = {}
        # ${!name}: name -> the expansion.
        self.indirect: dict[str, str] = {}
        # Names declared -i: every value they get is evaluated as arithmetic.
        self.integers: set[str] = set()
        # Program name -> why the workspace's own configuration decides what it does.
        self.repo_configured: dict[str, str] = {}

    def add(self, cats: frozenset[str] | set[str], reason: str) -> None:
        if cats:
            self.cats |= cats
        else:
            self.unsafe = True
        self.reasons.append(reason)

    def opaque(self, reason: str) -> None:
        self.cats.add("opaque")
        self.reasons.append(reason)

    def write(self, path: str, reason: str, destructive: bool = False) -> None:
        self.cats.add("write")
        if destructive:
            self.cats.add("destructive")
        self.writes.append(path)
        self.reasons.append(reason)


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
    ctx = Ctx()
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
    result: Classification = new_classification(
        read_only,
        frozenset(ctx.cats) if ctx.cats else _NONE,
        tuple(ctx.commands),
        tuple(dict.fromkeys(ctx.writes)) if ctx.writes else (),
        tuple(ctx.cds),
        tuple(dict.fromkeys(ctx.reasons)) if ctx.reasons else (),
        ctx.parse_ok,
        frozenset(ctx.repo_configured) if ctx.repo_configured else _NONE,
    )
    return result


_NONE: frozenset[str] = frozenset()


def _parse_into(ctx: Ctx, command: str) -> None:
    src = command.encode("utf-8", "surrogatepass")
    root = _parser().parse(src).root_node
    saved = ctx.src
    ctx.src = src
    if root.has_error:
        ctx.parse_ok = False
        ctx.opaque("the command does not parse (syntax error)")
    _walk(root, ctx)
    ctx.src = saved


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
    t = node.type
    handler = _HANDLERS.get(t)
    if handler is not None:
        handler(node, ctx)
    elif t not in _LEAVES:
        for child in node.named_children:
            if child.type not in _LEAVES:
                _walk(child, ctx)


def _children(node: Node, ctx: Ctx) -> None:
    for child in node.named_children:
        if child.type not in _LEAVES:
            _walk(child, ctx)


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
        ctx.defined.add(name.text.decode("utf-8", "replace"))
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
                _word(word, ctx)


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
    target = _word(dest, ctx)
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
    if _not_an_assignment(node):
        run(ctx, [_assignment_word(node, ctx)], [node.start_byte], node.end_byte, ())
        return
    name_node = node.child_by_field_name("name")
    value_node = node.child_by_field_name("value")
    value = _value(value_node, ctx)
    if name_node is not None:
        shellvars.assignment_node(ctx, name_node, value)


def _assignments(node: Node, ctx: Ctx) -> None:
    """a=1 b=2 with no command; from a word bash cannot assign to on, it is a command."""
    argv: list[Word] = []
    starts: list[int] = []
    for child in node.named_children:
        if child.type != "variable_assignment":
            _walk(child, ctx)
        elif argv or _not_an_assignment(child):
            argv.append(_assignment_word(child, ctx))
            starts.append(child.start_byte)
        else:
            _assignment(child, ctx)
    if argv:
        run(ctx, argv, starts, node.end_byte, ())


_ASSIGNABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[.*\])?\+?", re.S)


def _not_an_assignment(node: Node) -> bool:
    """tree-sitter-bash takes `--x=1` for an assignment; bash takes it for a word."""
    name_node = node.child_by_field_name("name")
    if name_node is None:
        return True
    return _ASSIGNABLE.fullmatch(name_node.text.decode("utf-8", "replace")) is None


def _assignment_word(node: Node, ctx: Ctx) -> Word:
    """A NAME=VALUE that bash reads as an ordinary word."""
    name_node = node.child_by_field_name("name")
    value = _value(node.child_by_field_name("value"), ctx)
    name = name_node.text.decode("utf-8", "replace") if name_node is not None else ""
    op = "+=" if any(c.type == "+=" for c in node.children) else "="
    if isinstance(value, str) and "\\" not in name and "'" not in name and '"' not in name:
        return f"{name}{op}{value}"
    return Dyn(node.text.decode("utf-8", "replace"))


def _value(node: Node | None, ctx: Ctx) -> Word:
    if node is None:
        return ""
    return _array(node, ctx) if node.type == "array" else _word(node, ctx)


def _array(node: Node, ctx: Ctx) -> Word:
    """(a b c): a number array only if every element is a number; [i]=v indices are arithmetic."""
    numbers = True
    for child in node.named_children:
        value = _word(child, ctx)
        text = child.text.decode("utf-8", "replace")
        if text.startswith("["):
            index, sep, rest = text[1:].partition("]=")
            if isinstance(value, Dyn) and ("$" in index or "`" in index):
                ctx.opaque(f"the array index in {text} is evaluated as arithmetic")
            elif sep:
                shellvars.arith_text(ctx, index, f"the array index in {text}")
                value = rest
        numbers = numbers and shellvars.is_number(value)
    return "0" if numbers else Dyn(node.text.decode("utf-8", "replace"))


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
        values.append(_word(child, ctx))
    if node.children and node.children[0].type == "select" or not has_in:
        values.append(Dyn("<input>"))
    if name_node is not None:
        name = name_node.text.decode("utf-8", "replace")
        for value in values:
            shellvars.assign(ctx, name, value, "for")
    for child in node.named_children:
        if child.type in ("do_group", "compound_statement"):
            _walk(child, ctx)


def _declaration(node: Node, ctx: Ctx) -> None:
    """declare/local/export/readonly/typeset/unset as a simple command the table reads."""
    argv: list[Word] = []
    starts: list[int] = []
    for child in node.children:
        if not child.is_named:
            if not argv:
                argv.append(child.type)
                starts.append(child.start_byte)
            continue
        starts.append(child.start_byte)
        if child.type == "variable_assignment":
            name_node = child.child_by_field_name("name")
            value_node = child.child_by_field_name("value")
            value = _value(value_node, ctx)
            if name_node is None:
                argv.append(Dyn(child.text.decode("utf-8", "replace")))
                continue
            shellvars.assignment_node(ctx, name_node, value, argv[0] if argv else "")
            name = name_node.text.decode("utf-8", "replace")
            if name_node.type == "subscript":
                inner = name_node.child_by_field_name("name") or name_node.named_children[0]
                name = inner.text.decode("utf-8", "replace")
            if isinstance(value, str) and "=" not in name_node.text.decode("utf-8", "replace"):
                # Static: the word bash sees (the check records the assignment again).
                op = "+=" if any(c.type == "+=" for c in child.children) else "="
                argv.append(f"{name_node.text.decode('utf-8', 'replace')}{op}{value}")
            else:
                argv.append(Assigned(child.text.decode("utf-8", "replace"), name))
        elif child.type == "variable_name":
            argv.append(child.text.decode("utf-8", "replace"))
        else:
            argv.append(_word(child, ctx))
    if argv:
        run(ctx, argv, starts, node.end_byte, ())


def _command(node: Node, ctx: Ctx, extra: list[Node]) -> None:
    argv: list[Word] = []
    starts: list[int] = []
    name_node = None
    for child in node.named_children:
        t = child.type
        if t == "variable_assignment":
            if argv or _not_an_assignment(child):
                argv.append(_assignment_word(child, ctx))
                starts.append(child.start_byte)
            else:
                _assignment(child, ctx)
        elif t in _REDIRECTS:
            extra.extend(_redirect(child, ctx))
        elif t == "command_name":
            name_node = child.named_children[0] if child.named_child_count else child
            argv.append(_word(name_node, ctx))
            starts.append(child.start_byte)
        else:
            argv.append(_word(child, ctx))
            starts.append(child.start_byte)
    end = node.end_byte
    for word in extra:
        argv.append(_word(word, ctx))
        starts.append(word.start_byte)
        end = max(end, word.end_byte)
    if not argv:
        return
    if name_node is not None and name_node.type in ("word", "concatenation"):
        name = argv[0]
        if isinstance(name, str) and name not in ("[", "[[") and _GLOB_IN_NAME.search(name):
            argv[0] = Dyn(name)
    run(ctx, argv, starts, end, ())


# ------------------------------------------------------------------ words


def _word(node: Node, ctx: Ctx) -> Word:
    """The static value of a word, or Dyn; walks any substitution inside it."""
    t = node.type
    if t == "word":
        text = node.text.decode("utf-8", "replace")
        if "\\" in text:
            text = _unescape(text)
        if "{" in text and ("," in text or ".." in text):
            return Dyn(text)
        return text
    if t == "raw_string":
        return node.text.decode("utf-8", "replace")[1:-1]
    if t == "number":
        return node.text.decode()
    if t == "string":
        return _string(node, ctx)
    if t == "ansi_c_string":
        decoded = _ansi_c(node.text.decode("utf-8", "replace")[2:-1])
        return decoded if decoded is not None else Dyn(node.text.decode("utf-8", "replace"))
    if t == "concatenation":
        return _concatenation(node, ctx)
    if t in ("simple_expansion", "expansion"):
        _walk(node, ctx)
        return Dyn(node.text.decode("utf-8", "replace"), not _is_path_var(node))
    _walk(node, ctx)
    return Dyn(node.text.decode("utf-8", "replace"))


def _is_path_var(node: Node) -> bool:
    for child in node.named_children:
        if child.type == "variable_name":
            return child.text.decode() in SETTINGS.path_vars and node.named_child_count == 1
    return False


def _string(node: Node, ctx: Ctx) -> Word:
    parts: list[str] = []
    dyn = False
    optlike = True
    for child in node.named_children:
        if child.type == "string_content":
            if not dyn:
                text = child.text.decode("utf-8", "replace")
                parts.append(_unescape_dq(text) if "\\" in text else text)
        else:
            _walk(child, ctx)
            if not dyn:
                dyn = True
                prefix = "".join(parts)
                optlike = (
                    prefix.startswith("-")
                    if prefix
                    else not (
                        child.type in ("simple_expansion", "expansion") and _is_path_var(child)
                    )
                )
    text = "".join(parts)
    if dyn:
        return Dyn(node.text.decode("utf-8", "replace"), optlike)
    return text


def _concatenation(node: Node, ctx: Ctx) -> Word:
    parts: list[str] = []
    first_dyn: Dyn | None = None
    brace = False
    for child in node.named_children:
        value = _word(child, ctx)
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
    raw = node.text.decode("utf-8", "replace")
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


# ------------------------------------------------------------------ argv against the table


@lru_cache(maxsize=1024)
def resolve(name: str) -> str | None:
    """The program a command word names: a bare name, or a file in a system directory."""
    if "/" not in name:
        return name
    path = posixpath.normpath(name)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    head, tail = posixpath.split(path)
    if head in SETTINGS.system_dirs and tail:
        return tail
    return None


def _shown(word: Word) -> str:
    return word if isinstance(word, str) else word.text


def _text(ctx: Ctx, argv: list[Word], starts: list[int] | None, end: int) -> str:
    if starts:
        return ctx.src[starts[0] : end].decode("utf-8", "replace").strip()
    return " ".join(a if isinstance(a, str) else a.text for a in argv)


def _record(
    ctx: Ctx,
    argv: list[Word],
    starts: list[int] | None,
    end: int,
    program: str | None,
    prefix: str,
    wrappers: tuple[str, ...],
) -> None:
    ctx.commands.append(
        new_simple_command(
            tuple([a if isinstance(a, str) else None for a in argv]),
            program,
            prefix,
            _text(ctx, argv, starts, end),
            wrappers,
            program in ctx.repo_configured,
        )
    )


def run(
    ctx: Ctx,
    argv: list[Word],
    starts: list[int] | None,
    end: int,
    wrappers: tuple[str, ...],
) -> None:
    """Classify one simple command given as words (the tree walk, find -exec, xargs…)."""
    name = argv[0]
    if isinstance(name, Dyn):
        ctx.opaque(f"the command name {name.text} is built at run time")
        _record(ctx, argv, starts, end, None, name.text, wrappers)
        return
    program = resolve(name)
    spec = PROGRAMS.get(program) if program is not None else None
    if spec is None:
        ctx.add(set(), f"unknown program {name}")
        _record(ctx, argv, starts, end, program or name, program or name, wrappers)
        return
    if spec.wrapper is not None:
        _wrapper(ctx, spec, argv, starts, end, wrappers)
        return
    if spec.repo_config and program not in ctx.repo_configured:
        ctx.repo_configured[program] = spec.repo_config
        ctx.reasons.append(spec.repo_config)
    # Keep source order: this command before those its arguments run (sh -c, find -exec).
    slot = len(ctx.commands)
    prefix = _apply(ctx, spec, argv, 1, program)
    _record(ctx, argv, starts, end, program, prefix, wrappers)
    if slot != len(ctx.commands) - 1:
        ctx.commands.insert(slot, ctx.commands.pop())


def _apply(ctx: Ctx, spec: Spec, argv: list[Word], i: int, prefix: str) -> str:
    """Apply spec to argv[i:]; descend into subcommands; return the rule prefix."""
    if spec.inert and not spec.categories and not spec.ask:
        return prefix
    if spec.categories:
        ctx.add(spec.categories, f"{spec.name}: {', '.join(sorted(spec.categories))}")
    if spec.ask:
        ctx.add(set(), spec.ask)
    if spec.sub is not None:
        j = _options(ctx, spec, argv, i, stop_at_operand=True)
        if j >= len(argv):
            if spec.nosub is None:
                ctx.add(set(), f"{spec.name} without a subcommand")
            elif spec.nosub:
                ctx.add(spec.nosub, f"{spec.name}: {', '.join(sorted(spec.nosub))}")
            return prefix
        word = argv[j]
        if isinstance(word, Dyn):
            ctx.opaque(f"{spec.name}: the subcommand {word.text} is built at run time")
            return prefix
        sub = spec.sub.get(word)
        if sub is None:
            ctx.add(set(), f"unknown subcommand {spec.name} {word}")
            return f"{prefix} {word}"
        return _apply(ctx, sub, argv, j + 1, f"{prefix} {word}")
    operands: list[Word] = []
    _options(ctx, spec, argv, i, operands=operands)
    for k in range(min(spec.prefix_words, len(operands))):
        if isinstance(operands[k], str):
            prefix = f"{prefix} {operands[k]}"
    if spec.writes and operands:
        if spec.writes == "all":
            targets = operands
        elif spec.writes == "last":
            targets = operands[-1:] if len(operands) > 1 or spec.name == "tee" else []
        else:
            targets = operands[1:]
        for target in targets:
            ctx.writes.append(target if isinstance(target, str) else target.text)
        if targets and "write" not in spec.categories:
            ctx.add({"write"}, f"{spec.name} writes {_shown(targets[-1])}")
    if spec.operands and operands and not _has_option(argv, i, spec.list_opts):
        ctx.add(spec.operands, f"{spec.name} with an operand: {', '.join(sorted(spec.operands))}")
    for pattern, cats in spec.operand_patterns:
        for operand in operands:
            if isinstance(operand, str) and fnmatchcase(operand, pattern):
                ctx.add(cats, f"{spec.name} {operand}: {', '.join(sorted(cats))}")
    if spec.check:
        checks.CHECKS[spec.check](ctx, spec, argv[i:], operands)
    return prefix


def _has_option(argv: list[Word], i: int, names: frozenset[str]) -> bool:
    return any(isinstance(a, str) and a.partition("=")[0] in names for a in argv[i:])


def _options(
    ctx: Ctx,
    spec: Spec,
    argv: list[Word],
    i: int,
    stop_at_operand: bool = False,
    operands: list[Word] | None = None,
) -> int:
    """Scan options from argv[i]; apply their categories; collect operands.

    With stop_at_operand, return the index of the first operand (the subcommand).
    """
    n = len(argv)
    end_of_options = False
    while i < n:
        arg = argv[i]
        if isinstance(arg, Dyn):
            if spec.risky and arg.optlike and not end_of_options:
                ctx.opaque(f"{spec.name}: the argument {arg.text} is known only at run time")
            if stop_at_operand:
                return i
            if operands is not None:
                operands.append(arg)
            i += 1
            continue
        if end_of_options or not arg.startswith("-") or arg == "-":
            if stop_at_operand:
                return i
            if operands is not None:
                operands.append(arg)
            i += 1
            continue
        if arg == "--":
            end_of_options = True
            cats = spec.options.get("--")
            if cats:
                ctx.add(cats, f"{spec.name} --")
            i += 1
            continue
        i = _option(ctx, spec, argv, i)
    return i


def _option(ctx: Ctx, spec: Spec, argv: list[Word], i: int) -> int:
    """Apply one option word at argv[i]; return the index after it and its value."""
    arg = argv[i]
    assert isinstance(arg, str)
    nxt = argv[i + 1] if i + 1 < len(argv) else None
    if spec.single_dash or arg.startswith("--"):
        name, eq, value = arg.partition("=")
        cats = spec.options.get(name)
        matched = name
        # GNU getopt_long takes any unambiguous prefix (--o for --output): a word that is a
        # prefix of a risky option counts as it (an ambiguous one only makes it fail).
        if cats is None and not spec.single_dash and len(name) >= 3:
            for long_name, long_cats in spec.long_options:
                if long_name.startswith(name):
                    cats, matched = long_cats, long_name
                    break
        if (
            spec.strict
            and cats is None
            and name not in spec.options
            and name not in spec.value_opts
            and name not in spec.known
        ):
            ctx.add(set(), f"{spec.name} {name}: an option the table does not know")
        takes_value = not eq and (
            name in spec.value_opts
            or (not spec.single_dash and any(o.startswith(name) for o in spec.long_value_opts))
        )
        if takes_value and nxt is not None:
            value = nxt if isinstance(nxt, str) else nxt.text
        if cats:
            _option_effect(ctx, spec, matched, cats, value)
        return i + 2 if takes_value else i + 1
    # A cluster of short options: -abc, -ovalue, -o value.
    for k in range(1, len(arg)):
        opt = "-" + arg[k]
        cats = spec.options.get(opt)
        takes_value = opt in spec.value_opts
        value = ""
        if takes_value:
            value = arg[k + 1 :]
            if not value and nxt is not None:
                value = nxt if isinstance(nxt, str) else nxt.text
        if cats:
            _option_effect(ctx, spec, opt, cats, value)
        if takes_value:
            return i + 2 if k + 1 == len(arg) else i + 1
    return i + 1


def _option_effect(ctx: Ctx, spec: Spec, opt: str, cats: frozenset[str], value: str) -> None:
    if opt in spec.write_value and value:
        # (A value of "-" is a file named "-" to sort -o, shuf -o and git --output.)
        if value in SETTINGS.harmless_targets:
            return
        ctx.writes.append(value)
    ctx.add(cats, f"{spec.name} {opt}: {', '.join(sorted(cats))}")


def _wrapper(
    ctx: Ctx,
    spec: Spec,
    argv: list[Word],
    starts: list[int] | None,
    end: int,
    wrappers: tuple[str, ...],
) -> None:
    wrapper = spec.wrapper
    assert wrapper is not None
    if spec.categories:
        ctx.add(spec.categories, f"{spec.name}: {', '.join(sorted(spec.categories))}")
    i = 1
    n = len(argv)
    lookup_only = False
    replace: Word | None = None
    while i < n:
        arg = argv[i]
        if isinstance(arg, Dyn):
            if arg.optlike:
                ctx.opaque(f"{spec.name}: the argument {arg.text} is known only at run time")
            break
        if arg == "--":
            i += 1
            break
        if spec.name == "env" and "=" in arg and not arg.startswith("-"):
            env_name, _, env_value = arg.partition("=")
            shellvars.check_env(env_name, ctx, "env", env_value)
            i += 1
            continue
        if not arg.startswith("-") or arg == "-" and spec.name != "env":
            break
        if spec.name == "command" and not arg.startswith("--") and ("v" in arg or "V" in arg):
            lookup_only = True
        if (
            spec.name == "xargs"
            and arg.startswith("--p")
            and "--process-slot-var".startswith(arg.partition("=")[0])
        ):
            # Each command gets this variable set to its slot number.
            slot_var = arg.partition("=")[2] if "=" in arg else argv[i + 1] if i + 1 < n else ""
            if isinstance(slot_var, str):
                shellvars.check_env(slot_var, ctx, "xargs --process-slot-var")
            else:
                ctx.opaque("xargs --process-slot-var names a variable known only at run time")
        if spec.name == "xargs":
            found = _xargs_replace(arg, argv[i + 1] if i + 1 < n else None)
            if found is not None:
                replace = found
        if spec.name == "nice" and arg[1:].isdigit():
            i += 1
            continue
        i = _option(ctx, spec, argv, i)
    i = min(i + wrapper.skip, n)
    inner = argv[i:]
    inner_starts = starts[i:] if starts else None
    if lookup_only or not inner:
        if not inner and wrapper.default:
            inner = [wrapper.default]
            inner_starts = None
        else:
            _record(ctx, argv, starts, end, spec.name, spec.name, wrappers)
            return
    if replace is not None:
        # xargs -I R puts each input line wherever R appears: in the program name too.
        inner = [_replaced(w, replace) for w in inner]
        inner_starts = None
    elif wrapper.stdin_args:
        inner = [*inner, Dyn("<words from stdin>")]
        inner_starts = None
    head = inner[0]
    if spec.name == "exec" and (isinstance(head, Dyn) or PROGRAMS.get(resolve(head) or "") is None):
        ctx.opaque("exec of a program it cannot see")
    run(ctx, inner, inner_starts, end, (*wrappers, spec.name))


_HANDLERS = {
    "command": lambda node, ctx: _command(node, ctx, []),
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

walk = _walk
word = _word


def _xargs_replace(arg: str, nxt: Word | None) -> Word | None:
    """The replace string an xargs option word sets (-I R, -iR, -i, --replace[=R]), or None."""
    if arg.startswith("--"):
        name, eq, value = arg.partition("=")
        if len(name) >= 3 and "--replace".startswith(name):
            return value if eq else "{}"
        return None
    for k in range(1, len(arg)):
        letter = arg[k]
        if letter == "I":
            return arg[k + 1 :] or (nxt if nxt is not None else "")
        if letter == "i":
            return arg[k + 1 :] or "{}"
        if letter in "adELnPsel":
            return None
    return None


def _replaced(word: Word, replace: Word) -> Word:
    if not isinstance(replace, str):
        return Dyn(_shown(word))  # a run-time replace string could be anywhere
    if isinstance(word, str) and replace and replace in word:
        return Dyn(word)
    return word
