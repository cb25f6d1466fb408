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

if TYPE_CHECKING:
    from agentd.bashsec.classifier import Ctx, Word
    from agentd.bashsec.table import Spec

# An assignment whose value is an integer produced by arithmetic.
INT = "<integer>"

_NUMBER = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|[0-9]+)")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SUBSCRIPTED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[(.*)\]", re.S)
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


def assign(ctx: Ctx, name: str, value: Word | str, how: str = "") -> None:
    """Record that the command sets `name` to `value` (a Word, or INT)."""
    from agentd.bashsec.classifier import check_env

    check_env(name, ctx, how, value if isinstance(value, str) and value is not INT else None)
    ctx.assigned.setdefault(name, []).append(value)


def assign_target(ctx: Ctx, target: Word, value: Word | str, how: str) -> None:
    """An assignment whose target is a word (read NAME, printf -v NAME, declare 'N=v')."""
    if not isinstance(target, str):
        ctx.opaque(f"{how} sets a variable whose name {target.text} is known only at run time")
        return
    m = _SUBSCRIPTED.fullmatch(target)
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
        assign(ctx, name_node.text.decode("utf-8", "replace"), value, how)
    else:
        assign(ctx, node.text.decode("utf-8", "replace"), value, how)


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
    from agentd.bashsec.classifier import walk

    t = node.type
    if not node.is_named or t in ("number", "comment", "test_operator"):
        return
    if t == "variable_name":
        ref(ctx, node.text.decode("utf-8", "replace"), where)
    elif t in ("word", "raw_string"):
        text = node.text.decode("utf-8", "replace")
        arith_text(ctx, text[1:-1] if t == "raw_string" else text, where)
    elif t == "simple_expansion":
        name = node.named_children[0] if node.named_child_count else None
        if name is None or name.type not in ("variable_name", "special_variable_name"):
            ctx.opaque(f"arithmetic evaluates {node.text.decode('utf-8', 'replace')}")
        else:
            ref(ctx, name.text.decode("utf-8", "replace"), where)
    elif t == "expansion":
        _arith_expansion(ctx, node, where)
    elif t == "subscript":
        name = node.child_by_field_name("name") or node.named_children[0]
        ref(ctx, name.text.decode("utf-8", "replace"), where)
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
                arith_text(ctx, child.text.decode("utf-8", "replace"), where)
            else:
                arith(ctx, child, where)
    elif t in ("command_substitution", "process_substitution", "ansi_c_string"):
        walk(node, ctx)
        ctx.opaque(f"arithmetic evaluates {node.text.decode('utf-8', 'replace')[:60]}")
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
                        assign(ctx, target.text.decode("utf-8", "replace"), INT)
                    elif target.type == "subscript":
                        name = target.child_by_field_name("name") or target.named_children[0]
                        assign(ctx, name.text.decode("utf-8", "replace"), INT)
                    break


def _arith_expansion(ctx: Ctx, node: Node, where: str) -> None:
    """${x}, ${#x}, ${a[i]} inside arithmetic; anything with an operator is not a number."""
    from agentd.bashsec.classifier import walk

    tokens = [c.type for c in node.children if not c.is_named]
    named = node.named_children
    walk(node, ctx)  # subscripts, offsets, @P, substitutions inside
    if tokens == ["${", "#", "}"]:
        return  # a length is a number
    if tokens == ["${", "}"] and len(named) == 1:
        head = named[0]
        if head.type == "subscript":
            head = head.child_by_field_name("name") or head.named_children[0]
        if head.type in ("variable_name", "special_variable_name"):
            ref(ctx, head.text.decode("utf-8", "replace"), where)
            return
    ctx.opaque(f"arithmetic evaluates {node.text.decode('utf-8', 'replace')[:60]}")


# ------------------------------------------------------------------ expansions


def expansion(ctx: Ctx, node: Node) -> None:
    """${…}: @P runs its value; ${!x} names a variable; subscripts and offsets are arithmetic."""
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
    name = head.text.decode("utf-8", "replace")
    if head.type == "subscript":
        name_node = head.child_by_field_name("name") or head.named_children[0]
        name = name_node.text.decode("utf-8", "replace")
    if "@" in tokens:
        at = tokens.index("@")
        op = tokens[at + 1] if at + 1 < len(tokens) else ""
        if op not in ("Q", "E", "A", "K", "a", "k", "U", "u", "L"):
            ctx.opaque(f"${{{name}@{op}}} runs the value of {name} as a prompt (code)")
    indirect = len(tokens) >= 2 and tokens[1] == "!" and tokens[-2] not in ("*", "@")
    keys = head.type == "subscript" and head.text.endswith((b"[@]", b"[*]"))
    if indirect and "@" not in tokens and not keys:
        ctx.indirect.setdefault(name, node.text.decode("utf-8", "replace"))
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
    from agentd.bashsec.classifier import Dyn, word

    after = [c for c in children if c.start_byte >= op.end_byte and c.is_named]
    if len(after) == 1:
        return word(after[0], ctx)
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
            if op is not None and op.text.decode() in _ARITH_OPS:
                for side in ("left", "right"):
                    operand = sub.child_by_field_name(side)
                    if operand is not None:
                        arith(ctx, operand, "[[ … " + op.text.decode() + " … ]]")
        elif sub.type == "unary_expression":
            op = sub.child_by_field_name("operator")
            if op is not None and op.text in (b"-v", b"-R") and sub.named_child_count >= 2:
                from agentd.bashsec.classifier import word

                _var_operand(ctx, word(sub.named_children[-1], ctx), "[[ -v ]]")


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


def _var_operand(ctx: Ctx, operand: Word, how: str) -> None:
    """The operand of -v: a variable name, whose subscript bash evaluates."""
    if not isinstance(operand, str):
        ctx.opaque(f"{how} tests a variable named at run time ({operand.text})")
        return
    m = _SUBSCRIPTED.fullmatch(operand)
    if m is not None:
        arith_text(ctx, m.group(2), f"the subscript of {operand}")


# ------------------------------------------------------------------ builtins (checks)


def _opts_and_operands(
    args: list[Word], value_opts: str
) -> tuple[dict[str, list[Word]], list[Word], bool]:
    """Parse a builtin's short options (bash's internal_getopt): (options, operands, dyn)."""
    opts: dict[str, list[Word]] = {}
    i = 0
    dyn = False
    while i < len(args):
        arg = args[i]
        if not isinstance(arg, str):
            if arg.optlike:
                dyn = True
            break
        if arg == "--":
            i += 1
            break
        if len(arg) < 2 or arg[0] not in "-+":
            break
        k = 1
        while k < len(arg):
            letter = arg[k]
            if letter in value_opts:
                value: Word | None = arg[k + 1 :] or (args[i + 1] if i + 1 < len(args) else None)
                if not arg[k + 1 :]:
                    i += 1
                opts.setdefault(letter, []).append(value if value is not None else "")
                break
            opts.setdefault(letter, []).append("")
            k += 1
        i += 1
    return opts, args[i:], dyn


def read(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """read [-a ARRAY] [NAME…]: every name gets a value from the input."""
    from agentd.bashsec.classifier import Dyn

    opts, names, dyn = _opts_and_operands(args, "adinNptu")
    if dyn:
        ctx.opaque("read: an option is known only at run time")
    for array in opts.get("a", ()):
        assign_target(ctx, array, Dyn("<input>"), "read -a")
    for name in names:
        assign_target(ctx, name, Dyn("<input>"), "read")
    if not names and "a" not in opts:
        assign(ctx, "REPLY", Dyn("<input>"))


def mapfile(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """mapfile/readarray [ARRAY]: -C runs a callback."""
    from agentd.bashsec.classifier import Dyn

    opts, names, dyn = _opts_and_operands(args, "dnOsuCc")
    if dyn:
        ctx.opaque(f"{spec.name}: an option is known only at run time")
    if "C" in opts:
        ctx.opaque(f"{spec.name} -C runs a callback")
    for name in names[:1]:
        assign_target(ctx, name, Dyn("<input>"), spec.name)
    if not names:
        assign(ctx, "MAPFILE", Dyn("<input>"))


def printf(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """printf -v NAME sets a variable; a run-time first word could be -v."""
    from agentd.bashsec.classifier import Dyn

    if not args:
        return
    first = args[0]
    if not isinstance(first, str):
        if first.optlike:
            ctx.opaque(f"printf: the first argument {first.text} is known only at run time")
        return
    if first.startswith("-v"):
        target = first[2:] or (args[1] if len(args) > 1 else "")
        assign_target(ctx, target, Dyn("<printf>"), "printf -v")


def getopts(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """getopts OPTSTRING NAME sets NAME and OPTARG."""
    from agentd.bashsec.classifier import Dyn

    if len(args) >= 2:
        assign_target(ctx, args[1], Dyn("<option>"), "getopts")
    assign(ctx, "OPTARG", Dyn("<option>"))


def let(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """let EXPR…: each argument is arithmetic."""
    for arg in args:
        if isinstance(arg, str):
            arith_text(ctx, arg, "let")
        else:
            ctx.opaque(f"let evaluates {arg.text}, known only at run time")


def test(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """test/[: -v NAME evaluates NAME's subscript (numeric operators do not, in bash)."""
    words = args[:-1] if spec.name == "[" and args and args[-1] == "]" else args
    has_dyn = any(not isinstance(a, str) for a in words)
    for i, arg in enumerate(words):
        if arg in ("-v", "-R") and i + 1 < len(words):
            _var_operand(ctx, words[i + 1], f"{spec.name} -v")
        elif has_dyn and isinstance(arg, str) and "[" in arg:
            # A run-time word could be -v, and this the variable it tests.
            _var_operand(ctx, arg, spec.name)


def wait(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """wait -p NAME stores a process id in NAME."""
    opts, _, dyn = _opts_and_operands(args, "p")
    if dyn:
        ctx.opaque("wait: an option is known only at run time")
    for name in opts.get("p", ()):
        assign_target(ctx, name, INT, "wait -p")


def unset(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """unset NAME…: a subscript in NAME is arithmetic."""
    opts, names, dyn = _opts_and_operands(args, "")
    if dyn:
        ctx.opaque("unset: an option is known only at run time")
    for name in names:
        if not isinstance(name, str):
            ctx.opaque(f"unset {name.text}: a name known only at run time")
        else:
            _var_operand(ctx, name, "unset")


def declare(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """declare/typeset/local/export/readonly: NAME[=VALUE] words, -n namerefs, -i integers."""
    from agentd.bashsec.classifier import Assigned, Dyn

    how = spec.name
    i = 0
    integer = False
    while i < len(args):
        arg = args[i]
        if isinstance(arg, Dyn):
            if arg.text.startswith(("-", "+", "$", '"$', "`")) or arg.optlike:
                ctx.opaque(f"{how}: the argument {arg.text} is known only at run time")
            break
        if arg == "--":
            i += 1
            break
        if len(arg) < 2 or arg[0] not in "-+":
            break
        if "n" in arg[1:]:
            ctx.opaque(f"{how} -n makes a name stand for another variable (a nameref)")
        if "i" in arg[1:] and arg[0] == "-":
            integer = True
        i += 1
    functions = any(isinstance(a, str) and ("f" in a or "F" in a) for a in args[:i])
    for arg in args[i:]:
        if isinstance(arg, Assigned):
            if integer:
                ctx.integers.add(arg.name)
            continue
        if isinstance(arg, Dyn):
            ctx.opaque(f"{how} {arg.text}: a name or value known only at run time")
            continue
        if functions:
            continue
        name, eq, value = arg.partition("=")
        if name.endswith("+"):
            name = name[:-1]
        if eq:
            assign_target(ctx, name, value, how)
        else:
            m = _SUBSCRIPTED.fullmatch(name)
            if m is not None:
                arith_text(ctx, m.group(2), f"the subscript of {name}")
                name = m.group(1)
            if not is_name(name):
                ctx.opaque(f"{how} {name!r}: not a plain variable name")
                continue
        if integer:
            ctx.integers.add(_SUBSCRIPTED.sub(r"\1", name))


def compgen(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """compgen -W WORDS expands WORDS, command substitutions included."""
    opts, _, dyn = _opts_and_operands(args, "AGWPSXoCF")
    if dyn:
        ctx.opaque("compgen: an option is known only at run time")
    for letter in "WCF":
        if letter in opts:
            ctx.opaque(f"compgen -{letter} runs or expands code")


def set_(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """set -k (keyword) makes NAME=VALUE words anywhere assignments to the command's
    environment (PS4=… after the command name reaches bash -x); set -- sets $1…."""
    i = 0
    while i < len(args):
        arg = args[i]
        if not isinstance(arg, str):
            if arg.optlike:
                ctx.opaque(f"set: the argument {arg.text} is known only at run time")
            return
        if arg == "--" or arg[:1] not in "-+" or arg == "-":
            return
        if "o" in arg[1:]:  # -o NAME, also inside a cluster (-eo keyword)
            option = args[i + 1] if i + 1 < len(args) else ""
            if not isinstance(option, str):
                ctx.opaque(f"set -o {option.text}: an option known only at run time")
            elif option == "keyword":
                ctx.opaque("set -o keyword makes every NAME=VALUE word an environment variable")
            if arg[0] == "-" and "k" in arg:
                ctx.opaque("set -k makes every NAME=VALUE word an environment variable")
            i += 2
            continue
        if arg[0] == "-" and "k" in arg:
            ctx.opaque("set -k makes every NAME=VALUE word an environment variable")
        i += 1


CHECKS = {
    "set": set_,
    "read": read,
    "mapfile": mapfile,
    "printf": printf,
    "getopts": getopts,
    "let": let,
    "test": test,
    "wait": wait,
    "unset": unset,
    "declare": declare,
    "compgen": compgen,
}


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
