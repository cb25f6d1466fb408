"""awk's program language: what in a program runs commands, writes files or reads a program file."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agentd.bashsec.context import Dyn, shown

if TYPE_CHECKING:
    from agentd.bashsec.context import Ctx, Word
    from agentd.bashsec.table import Spec


_AWK_REGEX_BEFORE = set("(,!~&|{};\n?:=")
_AWK_SYSTEM = re.compile(r"\bsystem\s*\(|\bextension\s*\(")
_AWK_PRINT = re.compile(r"\bprintf?\b")
# A newline after these continues the statement (awk's grammar), as does backslash-newline.
_AWK_CONTINUES = re.compile(r"(,|&&|\|\||\bdo|\belse|\\)[ \t]*\n")


def _awk_code(prog: str) -> str:
    """The program with string and regex literals emptied, and comments removed."""
    out: list[str] = []
    prev = ""
    i, n = 0, len(prog)
    while i < n:
        c = prog[i]
        if c == '"':
            i += 1
            while i < n and prog[i] != '"':
                i += 2 if prog[i] == "\\" else 1
            out.append('""')
            prev = '"'
            i += 1
            continue
        if c == "/" and (prev == "" or prev in _AWK_REGEX_BEFORE):
            i += 1
            while i < n and prog[i] not in "/\n":
                if prog[i] == "[":
                    close = prog.find("]", i + 2)
                    i = n if close < 0 else close + 1
                    continue
                i += 2 if prog[i] == "\\" else 1
            out.append("//")
            prev = "/"
            i += 1
            continue
        if c == "#":
            while i < n and prog[i] != "\n":
                i += 1
            continue
        out.append(c)
        if not c.isspace():
            prev = c
        i += 1
    return "".join(out)


def _awk_script(ctx: Ctx, prog: str) -> None:
    code = _AWK_CONTINUES.sub(lambda m: m.group(1).rstrip("\\") + " ", _awk_code(prog))
    if _AWK_SYSTEM.search(code):
        ctx.opaque("awk runs a command (system)")
    if "@" in code:
        ctx.opaque("gawk @ directives and indirect calls (@include, @f()) run code it cannot see")
    if re.search(r"(?<!\|)\|(?!\|)", code):
        ctx.opaque("awk pipes to or from a command")
    for m in _AWK_PRINT.finditer(code):
        depth = 0
        for ch in code[m.end() :]:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif ch in ";}\n":
                break
            elif ch == ">" and depth <= 0:
                ctx.add({"write"}, "awk print redirects output to a file")
                break


# Options of gawk/mawk/busybox awk that neither run code, write nor read a program file.
_AWK_SAFE_FLAGS = frozenset("bcCghMnNOPrsStVY")
_AWK_SAFE_LONG = (
    "--characters-as-bytes", "--traditional", "--copyright", "--gen-pot", "--help",
    "--lint", "--bignum", "--use-lc-numeric", "--non-decimal-data", "--optimize",
    "--no-optimize", "--posix", "--re-interval", "--sandbox", "--version", "--csv",
    "--lint-old", "--assign", "--field-separator", "--source",
)  # fmt: skip


def awk(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """awk's programs (-e/--source too): system(), "cmd" | getline, print > "file"."""
    i = 0
    programs: list[Word] = []
    while i < len(args):
        arg = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        if isinstance(arg, Dyn):
            ctx.opaque(f"awk: the argument {shown(arg)} is known only at run time")
            return
        assert isinstance(arg, str)
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        i += 1
        if arg.startswith("--"):
            name, eq, attached = arg.partition("=")
            value: Word = attached
            matches = [o for o in _AWK_SAFE_LONG if len(name) >= 3 and o.startswith(name)]
            if not matches or len(matches) > 1 and name not in matches:
                ctx.opaque(f"awk {name} reads code, writes a file, or is not known")
                return
            if matches[0] in ("--assign", "--field-separator", "--source") and not eq:
                value, i = (nxt if nxt is not None else ""), i + 1
            if matches[0] == "--source":
                programs.append(value)
            continue
        for k in range(1, len(arg)):
            letter = arg[k]
            if letter in "vFe":
                value = arg[k + 1 :]
                if not value:
                    value, i = (nxt if nxt is not None else ""), i + 1
                if letter == "e":
                    programs.append(value)
                break
            if letter not in _AWK_SAFE_FLAGS:
                ctx.opaque(f"awk -{letter} reads code, writes a file, or is not known")
                return
    if not programs:
        if i < len(args):
            programs.append(args[i])
        else:
            ctx.opaque("awk without a program")
            return
    for program in programs:
        if isinstance(program, Dyn):
            ctx.opaque(f"awk program {shown(program)} is known only at run time")
        else:
            assert isinstance(program, str)
            _awk_script(ctx, program)
