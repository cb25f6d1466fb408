"""The second half of the classifier: one simple command's argv read against the program
table (table.py, data in programs.toml). Wrappers are stripped and what they run is read
again, subcommands are descended into, option and operand rules applied; anything the
table cannot resolve fails closed.
"""

from __future__ import annotations

import posixpath
from fnmatch import fnmatchcase
from functools import lru_cache

from agentd.bashsec import checks, shellvars
from agentd.bashsec.context import PROGRAMS, SETTINGS, Ctx, Dyn, Word
from agentd.bashsec.model import new_simple_command
from agentd.bashsec.table import Spec


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
        chars = ctx.chars
        if chars is not None:
            return chars[starts[0] : end].strip()
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
    if program is None or spec is None:
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
