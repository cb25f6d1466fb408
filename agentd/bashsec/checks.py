"""Argument readers for programs whose arguments are a language of their own.

Each check is named by `check = "..."` in programs.toml and receives the words after
the program (or subcommand) name and the operands the generic option scan found.
They add categories and reasons to the context; they never run anything.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from agentd.bashsec import bashbuiltins

if TYPE_CHECKING:
    from agentd.bashsec.classifier import Ctx, Word
    from agentd.bashsec.table import Spec

_VERSION_ONLY = frozenset({"--version", "-V", "--help", "-h", "-version", "version"})


def _is_dyn(word: object) -> bool:
    return not isinstance(word, str)


def _shown(word: Word) -> str:
    return word if isinstance(word, str) else word.text


# ------------------------------------------------------------------ shells and interpreters


def shell(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """sh -c 'LITERAL' is parsed; a script, stdin or -s is code we cannot see."""
    from agentd.bashsec.classifier import run_shell_literal

    if args and all(a in _VERSION_ONLY for a in args):
        return
    has_c = False
    i = 0
    while i < len(args):
        arg = args[i]
        if _is_dyn(arg):
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
        elif _is_dyn(rest[0]):
            ctx.opaque(f"{spec.name} -c runs {_shown(rest[0])}, known only at run time")
        else:
            script = rest[0]
            assert isinstance(script, str)
            run_shell_literal(ctx, script)
        return
    if rest:
        ctx.opaque(f"{spec.name} runs the script {_shown(rest[0])}, which it cannot see")
    else:
        ctx.opaque(f"{spec.name} reads commands from stdin")


def interpreter(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """A script interpreter runs code we cannot see, unless asked only for its version."""
    if args and all(a in _VERSION_ONLY for a in args):
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


# ------------------------------------------------------------------ sed


def sed(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """sed -i writes its files; the w/W/e commands and s///w, s///e flags of a script."""
    in_place = False
    scripts: list[Word] = []
    files: list[Word] = []
    i = 0
    end_opts = False
    while i < len(args):
        arg = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        i += 1
        if _is_dyn(arg):
            if arg.optlike and not end_opts:  # type: ignore[union-attr]
                ctx.opaque(f"sed: the argument {_shown(arg)} is known only at run time")
            files.append(arg)
            continue
        assert isinstance(arg, str)
        if end_opts or not arg.startswith("-") or arg == "-":
            files.append(arg)
            continue
        if arg == "--":
            end_opts = True
        elif arg.startswith("--"):
            name, eq, value = arg.partition("=")
            # GNU sed takes any unambiguous prefix; an ambiguous one only makes it fail.
            chosen = {name} if name in _SED_LONG else {o for o in _SED_LONG if o.startswith(name)}
            if len(name) < 3 or not chosen:
                ctx.opaque(f"sed {name}: an option it does not know")
                continue
            if "--in-place" in chosen:
                in_place = True
            if "--expression" in chosen:
                if not eq:
                    value, i = nxt, i + 1  # type: ignore[assignment]
                scripts.append(value)
            elif "--file" in chosen:
                ctx.opaque("sed -f reads its script from a file")
                i += 0 if eq else 1
            elif "--line-length" in chosen:
                i += 0 if eq else 1
        else:
            for k in range(1, len(arg)):
                letter = arg[k]
                if letter not in "nefliErsuzb":
                    ctx.opaque(f"sed -{letter}: an option it does not know")
                    break
                if letter == "i":
                    in_place = True
                    break  # the rest is the backup suffix
                if letter in "ef":
                    value = arg[k + 1 :] or nxt
                    if not arg[k + 1 :]:
                        i += 1
                    if letter == "e":
                        scripts.append(value)  # type: ignore[arg-type]
                    else:
                        ctx.opaque("sed -f reads its script from a file")
                    break
                if letter == "l":
                    if not arg[k + 1 :]:
                        i += 1
                    break
                if letter == "s" and arg.startswith("--s"):
                    break
    if not scripts and files:
        scripts.append(files.pop(0))
    for script in scripts:
        if script is None or _is_dyn(script):
            ctx.opaque(f"sed script {_shown(script) if script else ''} is known only at run time")
        else:
            assert isinstance(script, str)
            _sed_script(ctx, script)
    if in_place:
        ctx.add({"write"}, "sed -i edits files in place")
        ctx.writes.extend(_shown(f) for f in files)


_SED_SIMPLE = set("pPnNdDgGhHxz=Fl")
_SED_LONG = (
    "--expression", "--file", "--in-place", "--line-length", "--null-data",
    "--zero-terminated", "--quiet", "--silent", "--regexp-extended", "--separate",
    "--sandbox", "--unbuffered", "--binary", "--follow-symlinks", "--posix", "--debug",
    "--help", "--version",
)  # fmt: skip


def _sed_script(ctx: Ctx, s: str) -> None:
    n = len(s)
    i = 0
    while i < n:
        c = s[i]
        if c in " \t\n;{}!":
            i += 1
            continue
        if c == "#":
            i = _eol(s, i)
            continue
        i = _sed_address(s, i)
        if i < n and s[i] == ",":
            i = _sed_address(s, i + 1)
        while i < n and s[i] in " \t!":
            i += 1
        if i >= n:
            return
        cmd = s[i]
        i += 1
        if cmd in "{}":
            continue
        if cmd == "s" or cmd == "y":
            if i >= n:
                return
            delim = s[i]
            i = _sed_part(s, i + 1, delim)
            i = _sed_part(s, i, delim)
            if cmd == "s":
                start = i
                while i < n and s[i] not in ";\n}":
                    if s[i] == "w":
                        target = s[i + 1 : _eol(s, i)].strip()
                        if target not in ("/dev/stdout", "/dev/stderr"):
                            ctx.add({"write"}, f"sed s///w writes {target}")
                            ctx.writes.append(target)
                        i = _eol(s, i)
                        break
                    if s[i] == "e":
                        ctx.opaque("sed s///e runs the pattern space as a command")
                    i += 1
                del start
        elif cmd in "wW":
            target = s[i : _eol(s, i)].strip()
            i = _eol(s, i)
            if target not in ("/dev/stdout", "/dev/stderr"):
                ctx.add({"write"}, f"sed {cmd} writes {target}")
                ctx.writes.append(target)
        elif cmd == "e":
            ctx.opaque("sed e runs a command")
            i = _eol(s, i)
        elif cmd in "aicrR":
            i = _eol(s, i)
        elif cmd in "btT:v":
            # GNU sed ends a label at whitespace or `;` (`b x;w f` and `b x w f` both write f).
            while i < n and s[i] in " \t":
                i += 1
            while i < n and s[i] not in "; \t\n":
                i += 1
        elif cmd in "qQLl":
            while i < n and s[i].isdigit() or i < n and s[i] == " ":
                i += 1
        elif cmd in _SED_SIMPLE:
            continue
        else:
            ctx.opaque(f"sed script has a command it does not know: {cmd!r}")
            return


def _eol(s: str, i: int) -> int:
    j = s.find("\n", i)
    return len(s) if j < 0 else j


def _sed_part(s: str, i: int, delim: str) -> int:
    n = len(s)
    while i < n and s[i] != delim:
        i += 2 if s[i] == "\\" else 1
    return i + 1


def _sed_address(s: str, i: int) -> int:
    n = len(s)
    if i < n and (s[i] == "/" or s[i] == "\\"):
        if s[i] == "\\":
            i += 1
        delim = s[i] if i < n else "/"
        i = _sed_part(s, i + 1, delim)
        while i < n and s[i] in "IM":
            i += 1
        return i
    while i < n and (s[i].isdigit() or s[i] in "$~+"):
        i += 1
    return i


# ------------------------------------------------------------------ awk


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
        if _is_dyn(arg):
            ctx.opaque(f"awk: the argument {_shown(arg)} is known only at run time")
            return
        assert isinstance(arg, str)
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        i += 1
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            matches = [o for o in _AWK_SAFE_LONG if len(name) >= 3 and o.startswith(name)]
            if not matches or len(matches) > 1 and name not in matches:
                ctx.opaque(f"awk {name} reads code, writes a file, or is not known")
                return
            if matches[0] in ("--assign", "--field-separator", "--source") and not eq:
                value, i = (nxt if nxt is not None else ""), i + 1  # type: ignore[assignment]
            if matches[0] == "--source":
                programs.append(value)
            continue
        for k in range(1, len(arg)):
            letter = arg[k]
            if letter in "vFe":
                value = arg[k + 1 :]
                if not value:
                    value, i = (nxt if nxt is not None else ""), i + 1  # type: ignore[assignment]
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
        if _is_dyn(program):
            ctx.opaque(f"awk program {_shown(program)} is known only at run time")
        else:
            assert isinstance(program, str)
            _awk_script(ctx, program)


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
        if _is_dyn(arg):
            if arg.optlike:  # type: ignore[union-attr]
                ctx.opaque(f"tar: the argument {_shown(arg)} is known only at run time")
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
                    value = _shown(args[i])
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
                    value = _shown(args[i])
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
    ctx.cds.append(_shown(target))


def alias(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """alias NAME=VALUE defines a name; calling it later is opaque."""
    for op in operands:
        if isinstance(op, str) and "=" in op:
            ctx.defined.add(op.partition("=")[0])
        elif _is_dyn(op):
            ctx.opaque(f"alias {_shown(op)} is known only at run time")


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
