"""sed's script language: what in a script writes files or runs commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd.bashsec.context import Dyn, shown

if TYPE_CHECKING:
    from agentd.bashsec.context import Ctx, Word
    from agentd.bashsec.table import Spec


def sed(ctx: Ctx, spec: Spec, args: list[Word], operands: list[Word]) -> None:
    """sed -i writes its files; the w/W/e commands and s///w, s///e flags of a script."""
    in_place = False
    # None: -e or --expression was the last argument (sed itself then fails).
    scripts: list[Word | None] = []
    files: list[Word] = []
    i = 0
    end_opts = False
    while i < len(args):
        arg = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        i += 1
        if isinstance(arg, Dyn):
            if arg.optlike and not end_opts:
                ctx.opaque(f"sed: the argument {shown(arg)} is known only at run time")
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
                if eq:
                    scripts.append(value)
                else:
                    scripts.append(nxt)
                    i += 1
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
                    attached = arg[k + 1 :]
                    if not attached:
                        i += 1
                    if letter == "e":
                        scripts.append(attached or nxt)
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
        if script is None or isinstance(script, Dyn):
            ctx.opaque(f"sed script {shown(script) if script else ''} is known only at run time")
        else:
            assert isinstance(script, str)
            _sed_script(ctx, script)
    if in_place:
        ctx.add({"write"}, "sed -i edits files in place")
        ctx.writes.extend(shown(f) for f in files)


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
