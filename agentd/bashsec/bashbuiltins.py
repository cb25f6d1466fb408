"""Checks for the bash builtins that assign variables or evaluate their arguments.

read, mapfile/readarray, printf -v, getopts, wait -p, declare and its kin set variables
(recorded through shellvars, where PS4, BASH_ENV… are refused and arithmetic uses are
ruled on); let and test -v evaluate; compgen -W expands; set -k changes what an
assignment word is. Named by `check = "..."` in programs.toml.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd.bashsec.context import Assigned, Dyn
from agentd.bashsec.shellvars import (
    INT,
    SUBSCRIPTED,
    arith_text,
    assign,
    assign_target,
    is_name,
    var_operand,
)

if TYPE_CHECKING:
    from agentd.bashsec.context import Ctx, Word
    from agentd.bashsec.table import Spec


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
            var_operand(ctx, words[i + 1], f"{spec.name} -v")
        elif has_dyn and isinstance(arg, str) and "[" in arg:
            # A run-time word could be -v, and this the variable it tests.
            var_operand(ctx, arg, spec.name)


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
            var_operand(ctx, name, "unset")


def declare(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """declare/typeset/local/export/readonly: NAME[=VALUE] words, -n namerefs, -i integers."""

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
        if functions and "=" not in arg and "[" not in arg:
            continue  # function names
        name, eq, value = arg.partition("=")
        if name.endswith("+"):
            name = name[:-1]
        if eq:
            assign_target(ctx, name, value, how)
        else:
            m = SUBSCRIPTED.fullmatch(name)
            if m is not None:
                arith_text(ctx, m.group(2), f"the subscript of {name}")
                name = m.group(1)
            if not is_name(name):
                ctx.opaque(f"{how} {name!r}: not a plain variable name")
                continue
        if integer:
            ctx.integers.add(SUBSCRIPTED.sub(r"\1", name))


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
