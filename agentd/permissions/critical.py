"""The critical-rm guard: a recursive or forced removal of /, the home directory, a
workspace root or a parent of one asks a person, in every mode, whatever the rules say.

It resolves what bash resolves before rm sees a word: `~`, `~+`, `~-`, `$HOME`, `$PWD`,
`$OLDPWD`, `$(pwd)` and `` `pwd` ``, `.`/`..`, brace alternatives (`{/,x}`), globs that
can match a critical path or list its content (`/*`, `/t*`, `dir/*`), and the cwd that
earlier `cd`s of the same command leave. `find <path> -delete` and `find … -exec rm` count
as removals of their start paths. A word it cannot resolve statically is possibly
critical, unless its last component is a fixed name that no critical path has
(`$OUT/build` cannot be a workspace root named `ws`).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from typing import Any

_PWD_CALL = r"\s*(?:builtin\s+|command\s+)?pwd(?:\s+-[LP])?\s*"
_PWD_RE = re.compile(rf"\$\({_PWD_CALL}\)|`{_PWD_CALL}`")
_GLOB = re.compile(r"[*?\[]")
# Programs that remove what find hands them (or may: shells and wrappers run anything).
_REMOVERS = frozenset(
    {"rm", "rmdir", "unlink", "shred", "sh", "bash", "dash", "zsh", "ksh", "busybox",
     "env", "xargs", "sudo", "doas", "nice", "timeout", "command", "find", "perl",
     "python", "python3"}
)  # fmt: skip
_FIND_ACTIONS = ("-exec", "-execdir", "-ok", "-okdir")
_NAME_TESTS = frozenset(
    {"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex"}
)
UNKNOWN = object()


class _Scope:
    """What the guard knows of the shell while it walks the command's simple commands."""

    def __init__(self, cwd: str, home: str, critical: dict[str, str]) -> None:
        self.cwd: str | None = cwd
        self.oldpwd: str | None = None
        self.home = home
        self.critical = critical
        self.names = {os.path.basename(p) for p in critical if p != "/"}


def critical_paths(home: str, roots: list[str]) -> dict[str, str]:
    critical = {"/": "/", os.path.normpath(home): "your home directory"}
    for root in roots:
        path = os.path.normpath(root)
        critical[path] = "the workspace root"
        while (parent := os.path.dirname(path)) != path:
            critical.setdefault(parent, "a parent of the workspace root")
            path = parent
    return critical


def critical_rm(classification: Any, cwd: str, home: str, roots: list[str]) -> str:
    """Why the command may recursively or forcibly remove a critical path; "" if it cannot."""
    scope = _Scope(cwd, home, critical_paths(home, roots))
    for cmd in classification.commands:
        words = _words(cmd)
        program = cmd.program
        if program in ("cd", "pushd", "popd"):
            _change_dir(scope, program, words)
            continue
        if program == "rm" and "find" not in cmd.wrappers:
            if why := _check_rm(scope, cmd, words):
                return why
        elif program == "find" and (why := _check_find(scope, cmd, words)):
            return why
    return ""


def _words(cmd: Any) -> list[str | None]:
    """argv, with the words the classifier left unresolved taken from the source text."""
    argv = list(cmd.argv)
    if None not in argv:
        return argv
    try:
        raw = shlex.split(cmd.text)
    except ValueError:
        raw = []
    if len(raw) != len(argv) or "<words from stdin>" in cmd.text:
        return argv
    return [w if w is not None else raw[i] for i, w in enumerate(argv)]


def _change_dir(scope: _Scope, program: str, words: list[str | None]) -> None:
    args = [w for w in words[1:] if w is None or not w.startswith("-") or w == "-"]
    if program == "popd":
        scope.oldpwd, scope.cwd = scope.cwd, None
        return
    if not args:
        target: str | None = scope.home
    elif args[0] == "-":
        target = scope.oldpwd
    elif args[0] is None:
        target = None
    else:
        resolved = _resolve(scope, args[0])
        target = resolved[0] if isinstance(resolved, list) and len(resolved) == 1 else None
    scope.oldpwd, scope.cwd = scope.cwd, target


def _check_rm(scope: _Scope, cmd: Any, words: list[str | None]) -> str:
    recursive = forced = False
    targets: list[str | None] = []
    options_done = False
    for word in words[1:]:
        if word is None:
            targets.append(None)
        elif not options_done and word == "--":
            options_done = True
        elif not options_done and word.startswith("--"):
            name = word.split("=", 1)[0]
            recursive |= len(name) >= 3 and "--recursive".startswith(name)
            forced |= len(name) >= 3 and "--force".startswith(name)
        elif not options_done and word.startswith("-") and len(word) > 1:
            recursive |= any(c in word[1:] for c in "rR")
            forced |= "f" in word[1:]
        else:
            targets.append(word)
    if not (recursive or forced):
        return ""
    for word in targets:
        if word is None:
            if recursive:
                return f"`{cmd.text}` recursively removes paths only known at run time"
            continue
        if why := _judge(scope, word):
            return f"`{cmd.text}` recursively or forcibly removes {why}"
    return ""


def _check_find(scope: _Scope, cmd: Any, words: list[str | None]) -> str:
    args = words[1:]
    while args and args[0] in ("-H", "-L", "-P"):
        args = args[1:]
    starts: list[str | None] = []
    for i, word in enumerate(args):
        if word is not None and (word.startswith("-") or word in ("(", "!", ")")):
            expression = args[i:]
            break
        starts.append(word)
    else:
        expression = []
    destructive = "-delete" in expression
    for i, word in enumerate(expression[:-1]):
        if word in _FIND_ACTIONS:
            prog = expression[i + 1]
            destructive |= prog is None or os.path.basename(prog) in _REMOVERS
    if not destructive or _selective(expression):
        return ""
    for word in starts or ["."]:
        if word is None:
            return f"`{cmd.text}` deletes under a path only known at run time"
        if why := _judge(scope, word):
            return f"`{cmd.text}` deletes everything under {why}"
    return ""


def _selective(expression: list[str | None]) -> bool:
    """Whether find's expression only matches some names (`-name '*.pyc'`): with no
    `-o`, `,` or negation, a name test whose pattern has a literal character."""
    if any(w in ("-o", "-or", ",", "!", "-not") or w is None for w in expression):
        return False
    for i, word in enumerate(expression[:-1]):
        if word in _NAME_TESTS:
            pattern = expression[i + 1] or ""
            if re.sub(r"\[[^\]]*\]|[*?/]", "", pattern):
                return True
    return False


def _judge(scope: _Scope, word: str) -> str:
    """What critical path `word` may name ("" if none)."""
    for alternative in _braces(word):
        resolved = _resolve(scope, alternative)
        if resolved is UNKNOWN:
            if _fixed_harmless_name(scope, alternative):
                continue
            return f"`{word}`, which is only known at run time and may be a critical path"
        assert isinstance(resolved, list)
        for path in resolved:
            if hit := _critical_match(scope, path):
                return hit
    return ""


def _fixed_harmless_name(scope: _Scope, word: str) -> bool:
    """`$X/build`: whatever $X is, the path ends in `build`, the name of no critical path."""
    last = word.rsplit("/", 1)[-1]
    if not last or last in (".", "..") or "$" in last or "`" in last or _GLOB.search(last):
        return False
    return not last.startswith("~") and last not in scope.names


def _resolve(scope: _Scope, word: str) -> list[str] | object:
    """The absolute path(s) a word names; UNKNOWN when only the run decides."""
    home = scope.home
    if word == "~" or word.startswith("~/"):
        word = home + word[1:]
    elif word == "~+" or word.startswith("~+/"):
        if scope.cwd is None:
            return UNKNOWN
        word = scope.cwd + word[2:]
    elif word == "~-" or word.startswith("~-/"):
        if scope.oldpwd is None:
            return UNKNOWN
        word = scope.oldpwd + word[2:]
    elif word.startswith("~"):
        return UNKNOWN  # ~user
    known = {"HOME": home, "PWD": scope.cwd, "OLDPWD": scope.oldpwd}
    for name, value in known.items():
        for spelling in (f"${{{name}}}", f"${name}"):
            if spelling in word:
                if value is None:
                    return UNKNOWN
                if spelling == f"${name}":
                    # $PWDX is another variable: only replace whole names.
                    word = re.sub(re.escape(spelling) + r"(?![A-Za-z0-9_])", value, word)
                else:
                    word = word.replace(spelling, value)
    if _PWD_RE.search(word):
        if scope.cwd is None:
            return UNKNOWN
        word = _PWD_RE.sub(scope.cwd, word)
    if "$" in word or "`" in word:
        return UNKNOWN
    if not word.startswith("/"):
        if scope.cwd is None:
            return UNKNOWN
        word = os.path.join(scope.cwd, word)
    if _GLOB.search(word):
        return [word]
    path = os.path.normpath(word)
    return [path, os.path.realpath(path)]


def _critical_match(scope: _Scope, path: str) -> str:
    if not _GLOB.search(path):
        if path in scope.critical:
            return f"{path} ({scope.critical[path]})"
        return ""
    # A glob: what it can match, and `dir/*` (or `dir/.*`) empties dir itself.
    pattern = os.path.normpath(path)
    head, _, last = pattern.rpartition("/")
    empties = last in ("*", ".*", "**") or (last.startswith(".") and set(last[1:]) <= {"*"})
    for candidate, what in scope.critical.items():
        if _glob_matches(pattern, candidate) or (empties and _glob_matches(head or "/", candidate)):
            return f"{candidate} ({what}), which `{path}` can match"
    return ""


def _glob_matches(pattern: str, path: str) -> bool:
    if pattern == "/" or path == "/":
        return pattern == path
    p_parts = pattern.strip("/").split("/")
    c_parts = path.strip("/").split("/")
    if len(p_parts) != len(c_parts):
        return False
    return all(
        fnmatch.fnmatchcase(c, p.replace("**", "*")) for p, c in zip(p_parts, c_parts, strict=True)
    )


def _braces(word: str, limit: int = 64) -> list[str]:
    """Bash's brace alternatives of a word (`{a,b}`, nested), at most `limit` of them."""
    depth = 0
    start = -1
    commas: list[int] = []
    params = 0  # inside ${...}: not a brace expansion
    for i, ch in enumerate(word):
        if ch == "{" and i and word[i - 1] == "$":
            params += 1
        elif ch == "}" and params:
            params -= 1
        elif params:
            continue
        elif ch == "{":
            if depth == 0:
                start, commas = i, []
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0 and commas:
                pre, post = word[:start], word[i + 1 :]
                bounds = [start, *commas, i]
                out: list[str] = []
                for a, b in zip(bounds, bounds[1:], strict=False):
                    for tail in _braces(post, limit):
                        for mid in _braces(word[a + 1 : b], limit):
                            out.append(pre + mid + tail)
                            if len(out) >= limit:
                                return out
                return out
        elif ch == "," and depth == 1:
            commas.append(i)
    return [word]
