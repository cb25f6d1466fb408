"""Argument readers for programs whose arguments are a language of their own.

Each check is named by `check = "..."` in programs.toml and receives the words after
the program (or subcommand) name and the operands the generic option scan found.
They add categories and reasons to the context; they never run anything. sed and awk,
whose scripts are languages of their own, have their modules (sed.py, awk.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from agentd.bashsec import bashbuiltins
from agentd.bashsec.awk import awk
from agentd.bashsec.context import VERSION_ONLY, Dyn, shown
from agentd.bashsec.sed import sed

if TYPE_CHECKING:
    from agentd.bashsec.classifier import Ctx, Word
    from agentd.bashsec.table import Spec

# ------------------------------------------------------------------ shells and interpreters


def shell(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """sh -c 'LITERAL' is parsed; a script, stdin or -s is code we cannot see."""
    from agentd.bashsec.classifier import run_shell_literal

    if args and all(a in VERSION_ONLY for a in args):
        return
    has_c = False
    i = 0
    while i < len(args):
        arg = args[i]
        if isinstance(arg, Dyn):
            break
        if arg == "--":
            i += 1
            break
        if arg in ("-o", "+o", "-O", "+O"):
            i += 2
            continue
        if arg in ("--rcfile", "--init-file"):
            ctx.opaque(f"{spec.name} {arg} reads code from a file")
            i += 2
            continue
        if arg.startswith("--"):
            i += 1
            continue
        if len(arg) > 1 and arg[0] in "-+":
            letters = arg[1:]
            if "c" in letters:
                has_c = True
            if "s" in letters or "i" in letters:
                ctx.opaque(f"{spec.name} {arg} reads commands from stdin")
                return
            i += 1
            continue
        break
    rest = args[i:]
    if has_c:
        if not rest:
            ctx.opaque(f"{spec.name} -c without a command")
        elif isinstance(rest[0], Dyn):
            ctx.opaque(f"{spec.name} -c runs {shown(rest[0])}, known only at run time")
        else:
            script = rest[0]
            assert isinstance(script, str)
            run_shell_literal(ctx, script)
        return
    if rest:
        ctx.opaque(f"{spec.name} runs the script {shown(rest[0])}, which it cannot see")
    else:
        ctx.opaque(f"{spec.name} reads commands from stdin")


def interpreter(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """A script interpreter runs code we cannot see, unless asked only for its version."""
    if args and all(a in VERSION_ONLY for a in args):
        return
    ctx.opaque(f"{spec.name} runs code it cannot see")


def su(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """su -c 'LITERAL' is parsed; su alone starts a shell as another user."""
    from agentd.bashsec.classifier import run_shell_literal

    for i, arg in enumerate(args):
        if arg in ("-c", "--command") and i + 1 < len(args):
            script = args[i + 1]
            if isinstance(script, str):
                run_shell_literal(ctx, script)
            else:
                ctx.opaque(f"su -c runs {script.text}, known only at run time")
            return
        if isinstance(arg, str) and arg.startswith("--command="):
            run_shell_literal(ctx, arg.partition("=")[2])
            return
    ctx.opaque("su starts a shell as another user")


# ------------------------------------------------------------------ find, dd, tar, remote


_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def find(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """find -exec/-execdir/-ok/-okdir: the command they run counts, and is never read-only."""
    from agentd.bashsec.classifier import run

    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in _FIND_EXEC:
            inner: list[Word] = []
            while i < len(args) and args[i] not in (";", "+"):
                inner.append(args[i])
                i += 1
            i += 1
            ctx.add(set(), f"find {arg} runs a command for each file")
            if inner:
                run(ctx, inner, None, 0, ("find",))


def dd(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """dd of=FILE writes (and may destroy) FILE."""
    for arg in args:
        if isinstance(arg, str):
            if arg.startswith("of="):
                target = arg[3:]
                if target not in ("/dev/null", "/dev/stdout", "/dev/stderr"):
                    ctx.write(target, f"dd writes {target}", destructive=True)
        elif arg.text.startswith(("of=", "$", '"$')):
            ctx.opaque(f"dd: the argument {arg.text} is known only at run time")


_TAR_OPAQUE = (
    "--to-command", "--checkpoint-action", "--use-compress-program", "--info-script",
    "--new-volume-script", "--rsh-command", "--rmt-command", "--index-file",
)  # fmt: skip
_TAR_WRITE = ("--create", "--extract", "--get", "--append", "--update", "--delete",
              "--concatenate", "--catenate")  # fmt: skip
_TAR_VALUE = set("fCIFTXbHKLNVg")


def tar(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """tar creates and extracts (write); some options run programs (opaque)."""
    mode = ""
    archive = ""
    directory = ""
    i = 0
    first = True
    while i < len(args):
        arg = args[i]
        i += 1
        if isinstance(arg, Dyn):
            if arg.optlike:
                ctx.opaque(f"tar: the argument {shown(arg)} is known only at run time")
            first = False
            continue
        assert isinstance(arg, str)
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if len(name) > 3 and any(o.startswith(name) for o in _TAR_OPAQUE):
                ctx.opaque(f"tar {name} runs a program")
            for long_mode in _TAR_WRITE:
                if len(name) > 3 and long_mode.startswith(name):
                    mode = long_mode
            if name in ("--file", "--directory") or (len(name) > 3 and "--file".startswith(name)):
                if not eq and i < len(args):
                    value = shown(args[i])
                    i += 1
                if name.startswith("--f"):
                    archive = value
                else:
                    directory = value
            first = False
            continue
        old_style = first and not arg.startswith("-")
        first = False
        if not arg.startswith("-") and not old_style:
            continue
        letters = arg if old_style else arg[1:]
        for k, letter in enumerate(letters):
            if letter in "cxruA":
                mode = letter
            elif letter == "t" and not mode:
                mode = "t"
            if letter in "IF":
                ctx.opaque(f"tar -{letter} runs a program")
            if letter in _TAR_VALUE:
                if not old_style and arg[k + 2 :]:
                    value = arg[k + 2 :]
                elif i < len(args):
                    value = shown(args[i])
                    i += 1
                else:
                    value = ""
                if letter == "f":
                    archive = value
                elif letter == "C":
                    directory = value
                if not old_style:
                    break
    if mode in ("c", "r", "u", "A", "--create", "--append", "--update", "--concatenate",
                "--catenate", "--delete"):  # fmt: skip
        if archive not in ("", "-"):
            ctx.write(archive, f"tar writes the archive {archive}")
    elif mode in ("x", "--extract", "--get"):
        ctx.write(directory or ".", f"tar extracts files into {directory or '.'}")
    if ":" in archive.split("/", 1)[0]:
        ctx.add({"network"}, f"tar archive {archive} is on another host")


_REMOTE = re.compile(r"^(?:[\w.@-]+:|rsync://)")


def remote_operands(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """rsync/scp to or from host:path reaches the network."""
    for op in operands:
        if isinstance(op, str) and _REMOTE.match(op):
            ctx.add({"network"}, f"{spec.name} reaches the host in {op}")
            return


# ------------------------------------------------------------------ shell state


def cd(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """cd and pushd change the directory: record where to."""
    target = operands[0] if operands else ("-" if "-" in args else "~")
    ctx.cds.append(shown(target))


def alias(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """alias NAME=VALUE defines a name; calling it later is opaque."""
    for op in operands:
        if isinstance(op, str) and "=" in op:
            ctx.defined.add(op.partition("=")[0])
        elif isinstance(op, Dyn):
            ctx.opaque(f"alias {shown(op)} is known only at run time")


def git_config(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """git config KEY VALUE sets a value; KEY alone, --get*, --list read."""
    reading = any(
        isinstance(a, str) and (a.startswith("--get") or a in ("-l", "--list")) for a in args
    )
    if len(operands) >= 2 and not reading:
        ctx.add({"write"}, "git config sets a value")


CHECKS: dict[str, Callable[[Ctx, Spec, list[Word], list[Word]], None]] = {
    "shell": shell,
    "interpreter": interpreter,
    "su": su,
    "sed": sed,
    "awk": awk,
    "find": find,
    "dd": dd,
    "tar": tar,
    "remote_operands": remote_operands,
    "cd": cd,
    "alias": alias,
    "git_config": git_config,
}
CHECKS.update(bashbuiltins.CHECKS)
