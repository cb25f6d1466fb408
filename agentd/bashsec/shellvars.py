"""Where bash evaluates the value of a variable as code, and every way a command sets one.

Bash runs text it did not parse with the command in a few places: prompt expansion
(`${x@P}`), arithmetic (`$((…))`, `((…))`, `let`, `[[ a -eq b ]]`, array subscripts,
substring offsets, `declare -i` variables, `test -v`), indirection (`${!x}`, whose value
names a variable that may carry a subscript), and the variables bash itself executes
(PS4 under `set -x`, PROMPT_COMMAND, BASH_ENV…). A value reaching such a place is safe
only when the classifier can see it is: a number, or a plain variable name.

So the walk records every assignment, by any route (`x=…`, `for x in`, `${x:=…}`, `read`,
`printf -v`, `mapfile`, `getopts`, `declare`/`local`/`export`…, arithmetic), and every
evaluation context with the names it evaluates; `finish` then rules on the whole
command at once (a loop can feed a later assignment to an earlier use).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tree_sitter import Node

from agentd.bashsec.context import Dyn
from agentd.bashsec.table import load

SETTINGS, _ = load()

if TYPE_CHECKING:
    from agentd.bashsec.context import Ctx, Word

# An assignment whose value is an integer produced by arithmetic.
INT = "<integer>"

_NUMBER = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|[0-9]+)")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SUBSCRIPTED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[(.*)\]", re.S)
_ARITH_NAME = re.compile(r"(?<![0-9A-Za-z_#@])[A-Za-z_][A-Za-z0-9_]*")
_ARITH_ASSIGN = re.compile(
    r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[[^\]]*\]\s*)?(?:(?:<<|>>|[-+*/%&|^])?=(?!=)|\+\+|--)"
    r"|(?:\+\+|--)\s*([A-Za-z_][A-Za-z0-9_]*)"
)
# Characters that make arithmetic text more than numbers, names and operators.
_ARITH_UNSAFE = frozenset("$`'\"\\")
# Specials whose value is always a number bash made.
_INT_SPECIALS = frozenset(
    {"#", "?", "$", "!", "RANDOM", "SRANDOM", "SECONDS", "EPOCHSECONDS", "LINENO",
     "BASHPID", "PPID", "UID", "EUID", "OPTIND"}
)  # fmt: skip
_ARITH_OPS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_SUBSTRING = ":"


def is_number(value: object) -> bool:
    return value is INT or (isinstance(value, str) and _NUMBER.fullmatch(value.strip()) is not None)


def is_name(value: object) -> bool:
    return isinstance(value, str) and _IDENT.fullmatch(value) is not None


# ------------------------------------------------------------------ assignments


# Values that make a pager or terminal variable harmless.
_SAFE_VALUES = {
    "PAGER": ("", "cat"), "GIT_PAGER": ("", "cat"), "MANPAGER": ("", "cat"),
    "SYSTEMD_PAGER": ("", "cat"), "BAT_PAGER": ("", "cat"),
}  # fmt: skip
_TERM_NAME = re.compile(r"[A-Za-z0-9._+-]*")


def check_env(name: str, ctx: Ctx, how: str = "", value: object = None) -> None:
    """Setting `name` by any route: variables bash or programs run, or that pick programs."""
    unsafe = name in SETTINGS.unsafe_env or name.startswith(SETTINGS.unsafe_env_prefixes)
    if unsafe and isinstance(value, str):
        if value in _SAFE_VALUES.get(name, ()):
            return
        if name == "TERM" and _TERM_NAME.fullmatch(value):
            return
    if not unsafe and (name in ("LANG", "LANGUAGE") or name.startswith("LC_")):
        # A locale name with a slash is a path glibc loads locale data from.
        unsafe = not isinstance(value, str) or "/" in value
    if unsafe and name not in SETTINGS.safe_env:
        via = f" ({how})" if how else ""
        ctx.opaque(f"sets {name}{via}, which changes what programs run")


def assign(ctx: Ctx, name: str, value: Word | str, how: str = "") -> None:
    """Record that the command sets `name` to `value` (a Word, or INT)."""
    check_env(name, ctx, how, value if isinstance(value, str) and value is not INT else None)
    ctx.assigned.setdefault(name, []).append(value)


def assign_target(ctx: Ctx, target: Word, value: Word | str, how: str) -> None:
    """An assignment whose target is a word (read NAME, printf -v NAME, declare 'N=v')."""
    if not isinstance(target, str):
        ctx.opaque(f"{how} sets a variable whose name {target.text} is known only at run time")
        return
    m = SUBSCRIPTED.fullmatch(target)
    if m is not None:
        arith_text(ctx, m.group(2), f"the subscript of {target}")
        target = m.group(1)
    if not is_name(target):
        ctx.opaque(f"{how} sets {target!r}, which is not a plain variable name")
        return
    assign(ctx, target, value, how)


def assignment_node(ctx: Ctx, node: Node, value: Word | str, how: str = "") -> None:
    """A variable_assignment's name node (a variable_name or a subscript)."""
    if node.type == "subscript":
        index = node.child_by_field_name("index")
        if index is not None:
            arith(ctx, index)
        name_node = node.child_by_field_name("name") or node.named_children[0]
        assign(ctx, ctx.text(name_node), value, how)
    else:
        assign(ctx, ctx.text(node), value, how)


# ------------------------------------------------------------------ arithmetic


def ref(ctx: Ctx, name: str, where: str) -> None:
    """`name`'s value is evaluated as an arithmetic expression."""
    ctx.arith_refs.setdefault(name, where)


def arith_text(ctx: Ctx, text: str, where: str) -> None:
    """Static text bash will evaluate as arithmetic."""
    if any(c in _ARITH_UNSAFE for c in text):
        ctx.opaque(f"arithmetic in {where} holds quotes or expansions bash evaluates: {text!r}")
        return
    for m in _ARITH_ASSIGN.finditer(text):
        assign(ctx, m.group(1) or m.group(2), INT)
    for m in _ARITH_NAME.finditer(text):
        ref(ctx, m.group(0), where)


def arith(ctx: Ctx, node: Node, where: str = "arithmetic") -> None:
    """A syntax node bash evaluates as arithmetic: every name in it must hold a number."""
    t = node.type
    if not node.is_named or t in ("number", "comment", "test_operator"):
        return
    if t == "variable_name":
        ref(ctx, ctx.text(node), where)
    elif t in ("word", "raw_string"):
        text = ctx.text(node)
        arith_text(ctx, text[1:-1] if t == "raw_string" else text, where)
    elif t == "simple_expansion":
        name = node.named_children[0] if node.named_child_count else None
        if name is None or name.type not in ("variable_name", "special_variable_name"):
            ctx.opaque(f"arithmetic evaluates {ctx.text(node)}")
        else:
            ref(ctx, ctx.text(name), where)
    elif t == "expansion":
        _arith_expansion(ctx, node, where)
    elif t == "subscript":
        name = node.child_by_field_name("name") or node.named_children[0]
        ref(ctx, ctx.text(name), where)
        index = node.child_by_field_name("index")
        if index is not None:
            arith(ctx, index, where)
    elif t == "variable_assignment":
        name = node.child_by_field_name("name")
        if name is not None:
            assignment_node(ctx, name, INT)
            arith(ctx, name, where)
        value = node.child_by_field_name("value")
        if value is not None:
            arith(ctx, value, where)
    elif t == "string":
        for child in node.named_children:
            if child.type == "string_content":
                arith_text(ctx, ctx.text(child), where)
            else:
                arith(ctx, child, where)
    elif t in ("command_substitution", "process_substitution", "ansi_c_string"):
        ctx.walk.node(node, ctx)
        ctx.opaque(f"arithmetic evaluates {ctx.text(node)[:60]}")
    else:
        _arith_assignments(ctx, node)
        for child in node.named_children:
            arith(ctx, child, where)


def _arith_assignments(ctx: Ctx, node: Node) -> None:
    """`x = …`, `x += …`, `x++` inside arithmetic leave a number in x."""
    if node.type in ("binary_expression", "postfix_expression", "unary_expression"):
        for child in node.children:
            if (
                not child.is_named
                and child.type.endswith(("=", "++", "--"))
                and child.type not in ("==", "!=", "<=", ">=")
            ):
                for target in node.named_children:
                    if target.type == "variable_name":
                        assign(ctx, ctx.text(target), INT)
                    elif target.type == "subscript":
                        name = target.child_by_field_name("name") or target.named_children[0]
                        assign(ctx, ctx.text(name), INT)
                    break


def _arith_expansion(ctx: Ctx, node: Node, where: str) -> None:
    """${x}, ${#x}, ${a[i]} inside arithmetic; anything with an operator is not a number."""
    tokens = [c.type for c in node.children if not c.is_named]
    named = node.named_children
    ctx.walk.node(node, ctx)  # subscripts, offsets, @P, substitutions inside
    if tokens == ["${", "#", "}"]:
        return  # a length is a number
    if tokens == ["${", "}"] and len(named) == 1:
        head = named[0]
        if head.type == "subscript":
            head = head.child_by_field_name("name") or head.named_children[0]
        if head.type in ("variable_name", "special_variable_name"):
            ref(ctx, ctx.text(head), where)
            return
    ctx.opaque(f"arithmetic evaluates {ctx.text(node)[:60]}")


# ------------------------------------------------------------------ expansions


def expansion(ctx: Ctx, node: Node) -> None:
    """${…}: @P runs its value; ${!x} names a variable; subscripts and offsets are arithmetic."""
    if node.child_count == 3 and node.children[1].type == "variable_name":
        return  # ${name}: nothing evaluated
    children = node.children
    tokens = [c.type for c in children if not c.is_named]
    head = None
    for child in children:
        if child.is_named:
            head = child
            break
    if head is None:
        return
    if head.type == "subscript":
        index = head.child_by_field_name("index")
        if index is not None and index.text not in (b"@", b"*"):
            arith(ctx, index, "an array subscript")
    name = ctx.text(head)
    if head.type == "subscript":
        name_node = head.child_by_field_name("name") or head.named_children[0]
        name = ctx.text(name_node)
    if "@" in tokens:
        at = tokens.index("@")
        op = tokens[at + 1] if at + 1 < len(tokens) else ""
        if op not in ("Q", "E", "A", "K", "a", "k", "U", "u", "L"):
            ctx.opaque(f"${{{name}@{op}}} runs the value of {name} as a prompt (code)")
    indirect = len(tokens) >= 2 and tokens[1] == "!" and tokens[-2] not in ("*", "@")
    keys = head.type == "subscript" and ctx.text(head).endswith(("[@]", "[*]"))
    if indirect and "@" not in tokens and not keys:
        ctx.indirect.setdefault(name, ctx.text(node))
    seen_head = False
    after_colon = False
    for child in children:
        if child is head:
            seen_head = True
            continue
        if not seen_head:
            continue
        if not child.is_named:
            after_colon = child.type == _SUBSTRING
            if child.type in ("=", ":="):
                value = _value_after(ctx, children, child)
                assign(ctx, name, value, f"${{{name}{child.type}…}}")
            elif child.type not in (":",):
                after_colon = False
            continue
        if after_colon:
            arith(ctx, child, "a substring offset")


def _value_after(ctx: Ctx, children: list[Node], op: Node) -> Word:
    after = [c for c in children if c.start_byte >= op.end_byte and c.is_named]
    if len(after) == 1:
        return ctx.walk.word(after[0], ctx)
    return Dyn("${…}")


# ------------------------------------------------------------------ [[ … ]]


def test_command(ctx: Ctx, node: Node) -> None:
    """[[ a -eq b ]] evaluates both sides as arithmetic; -v NAME evaluates a subscript.

    `[ … ]` is the test builtin: its numeric operators read plain integers only.
    """
    double = bool(node.child_count) and node.children[0].type == "[["
    for sub in _descend(node):
        if sub.type == "binary_expression" and double:
            op = sub.child_by_field_name("operator")
            if op is not None and ctx.text(op) in _ARITH_OPS:
                for side in ("left", "right"):
                    operand = sub.child_by_field_name(side)
                    if operand is not None:
                        arith(ctx, operand, "[[ … " + ctx.text(op) + " … ]]")
        elif sub.type == "unary_expression":
            op = sub.child_by_field_name("operator")
            if op is not None and op.text in (b"-v", b"-R") and sub.named_child_count >= 2:
                var_operand(ctx, ctx.walk.word(sub.named_children[-1], ctx), "[[ -v ]]")


def _descend(node: Node) -> list[Node]:
    out: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in ("binary_expression", "unary_expression", "parenthesized_expression",
                      "test_command", "negated_expression"):  # fmt: skip
            out.append(n)
            stack.extend(n.named_children)
    return out


def var_operand(ctx: Ctx, operand: Word, how: str) -> None:
    """The operand of -v: a variable name, whose subscript bash evaluates."""
    if not isinstance(operand, str):
        ctx.opaque(f"{how} tests a variable named at run time ({operand.text})")
        return
    m = SUBSCRIPTED.fullmatch(operand)
    if m is not None:
        arith_text(ctx, m.group(2), f"the subscript of {operand}")


# ------------------------------------------------------------------ the ruling


_COPY = re.compile(r'"?\$\{?([A-Za-z_][A-Za-z0-9_]*|[#?$!])\}?"?')


def _numeric(ctx: Ctx, value: object, seen: set[str]) -> bool:
    """A number, or a copy of a variable that only ever holds numbers (x=$n)."""
    if is_number(value):
        return True
    text = getattr(value, "text", None)
    m = _COPY.fullmatch(text) if isinstance(text, str) else None
    return m is not None and _numeric_name(ctx, m.group(1), seen)


def _numeric_name(ctx: Ctx, name: str, seen: set[str]) -> bool:
    if name in seen:
        return True  # a cycle adds no value of its own
    values = ctx.assigned.get(name)
    if values is None:
        return name in _INT_SPECIALS
    seen.add(name)
    return all(_numeric(ctx, v, seen) for v in values)


def finish(ctx: Ctx) -> None:
    """Rule on every evaluation context with all assignments of the command known."""
    assigned = ctx.assigned
    for name, where in ctx.arith_refs.items():
        if not _numeric_name(ctx, name, set()):
            ctx.opaque(f"{where} evaluates the value of {name}, which is not a number it can see")
    for name, text in ctx.indirect.items():
        values = assigned.get(name)
        if not values or not all(is_name(v) for v in values):
            ctx.opaque(f"{text} expands the variable named by {name}, which it cannot see")
    for name in ctx.integers:
        if not all(_numeric(ctx, v, set()) for v in assigned.get(name, ())):
            ctx.opaque(f"{name} is an integer variable: its value is evaluated as arithmetic")
