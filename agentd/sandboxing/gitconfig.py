"""A repository's git config cut down to inert keys, for commands that run read-only.

A repository's `.git/config` is written by whoever made the workspace, and git obeys it:
`core.fsmonitor`, `core.pager`, `diff.external`, `diff.<driver>.textconv`, `filter.*`,
`alias.*`, `core.hooksPath`, credential helpers and `include.path` all name programs git
runs, so `git status` in a hostile clone runs the clone's code. For a command that runs
only because the classifier called it read-only, the daemon shows git a copy of the
config holding nothing but the keys listed here (which name no program and include no
other file), bound read-only over the real one.

The file is hostile input: it is parsed here, by hand, never by git on the host, and
written back from the parsed values with every value quoted, so nothing in it can turn
into a section or key of the copy.
"""

from __future__ import annotations

import re

# Keys kept, as (section, key) with a subsection allowed or not; everything else is dropped.
_PLAIN: frozenset[tuple[str, str]] = frozenset(
    {
        ("core", "repositoryformatversion"),
        ("core", "bare"),
        ("core", "filemode"),
        ("core", "logallrefupdates"),
        ("core", "ignorecase"),
        ("core", "precomposeunicode"),
        ("core", "symlinks"),
        ("core", "autocrlf"),
        ("core", "eol"),
        ("core", "safecrlf"),
        ("core", "quotepath"),
        ("core", "checkstat"),
        ("core", "trustctime"),
        ("core", "abbrev"),
        ("core", "commentchar"),
        ("core", "sparsecheckout"),
        ("core", "sparsecheckoutcone"),
        ("core", "splitindex"),
        ("core", "untrackedcache"),
        ("core", "worktree"),
        ("init", "defaultbranch"),
        ("user", "name"),
        ("user", "email"),
        ("status", "showuntrackedfiles"),
        ("status", "branch"),
        ("status", "short"),
        ("diff", "renames"),
        ("diff", "algorithm"),
        ("diff", "mnemonicprefix"),
        ("diff", "noprefix"),
        ("color", "ui"),
    }
)
# Keys kept in any subsection: `remote "origin"`.url and the like.
_SUBSECTION: frozenset[tuple[str, str]] = frozenset(
    {
        ("remote", "url"),
        ("remote", "pushurl"),
        ("remote", "fetch"),
        ("remote", "push"),
        ("remote", "mirror"),
        ("remote", "promisor"),
        ("remote", "partialclonefilter"),
        ("branch", "remote"),
        ("branch", "pushremote"),
        ("branch", "merge"),
        ("branch", "rebase"),
        ("submodule", "url"),
        ("submodule", "active"),
        ("submodule", "branch"),
    }
)
# Every key of these sections is kept (a repository git cannot read without them).
_WHOLE_SECTIONS: frozenset[str] = frozenset({"extensions"})

_SECTION = re.compile(r"[A-Za-z0-9.-]+")
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
MAX_BYTES = 256 * 1024


class ParseError(ValueError):
    """The config is not one git would read; the copy is then empty."""


def parse(text: str) -> list[tuple[str, str | None, str, str]]:
    """(section, subsection, key, value) in file order; section and key lower-cased.

    Follows git's config syntax: `[section]`, `[section "sub"]`, the old `[section.sub]`,
    `key = value` with quotes, backslash escapes and continuation lines, `#`/`;` comments,
    a bare `key` meaning true.
    """
    entries: list[tuple[str, str | None, str, str]] = []
    section: str | None = None
    sub: str | None = None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif c in "#;":
            i = _line_end(text, i)
        elif c == "[":
            section, sub, i = _header(text, i + 1)
        elif c.isalpha():
            if section is None:
                raise ParseError("a key before any section")
            j = i
            while j < n and (text[j].isalnum() or text[j] == "-"):
                j += 1
            key = text[i:j].lower()
            while j < n and text[j] in " \t":
                j += 1
            if j >= n or text[j] in "\r\n#;":
                value = "true"
                i = j
            elif text[j] == "=":
                value, i = _value(text, j + 1)
            else:
                raise ParseError(f"bad character after key {key!r}")
            entries.append((section, sub, key, value))
        else:
            raise ParseError(f"unexpected {c!r}")
    return entries


def _line_end(text: str, i: int) -> int:
    j = text.find("\n", i)
    return len(text) if j < 0 else j + 1


def _header(text: str, i: int) -> tuple[str, str | None, int]:
    j = i
    while j < len(text) and (text[j].isalnum() or text[j] in ".-"):
        j += 1
    name = text[i:j]
    if not name:
        raise ParseError("empty section name")
    if j < len(text) and text[j] == "]":
        if "." in name:  # the old [section.subsection]
            head, _, rest = name.partition(".")
            return head.lower(), rest, j + 1
        return name.lower(), None, j + 1
    while j < len(text) and text[j] in " \t":
        j += 1
    if j >= len(text) or text[j] != '"':
        raise ParseError("bad section header")
    j += 1
    out: list[str] = []
    while True:
        if j >= len(text) or text[j] == "\n":
            raise ParseError("unterminated subsection")
        ch = text[j]
        if ch == '"':
            break
        if ch == "\\":
            j += 1
            if j >= len(text) or text[j] == "\n":
                raise ParseError("bad escape in subsection")
            ch = text[j]
        out.append(ch)
        j += 1
    if j + 1 >= len(text) or text[j + 1] != "]":
        raise ParseError("bad section header")
    if "." in name:
        raise ParseError("bad section name")
    return name.lower(), "".join(out), j + 2


def _value(text: str, i: int) -> tuple[str, int]:
    out: list[str] = []
    pending_space = ""
    quoted = False
    n = len(text)
    while i < n and text[i] in " \t":
        i += 1
    while i < n:
        c = text[i]
        if c == "\n" and not quoted:
            return "".join(out), i + 1
        if c == "\n":
            raise ParseError("newline inside quotes")
        if not quoted and c in "#;":
            return "".join(out), _line_end(text, i)
        if c == "\\":
            i += 1
            e = text[i] if i < n else ""
            if e == "\n":
                i += 1
                continue
            if e == "\r" and text[i + 1 : i + 2] == "\n":
                i += 2
                continue
            mapped = {"n": "\n", "t": "\t", "b": "\b", '"': '"', "\\": "\\"}.get(e)
            if mapped is None:
                raise ParseError("bad escape in value")
            out.append(pending_space + mapped)
            pending_space = ""
            i += 1
            continue
        if c == '"':
            quoted = not quoted
            out.append(pending_space)
            pending_space = ""
            i += 1
            continue
        if not quoted and c in " \t\r":
            pending_space += c
            i += 1
            continue
        out.append(pending_space + c)
        pending_space = ""
        i += 1
    if quoted:
        raise ParseError("unterminated quote")
    return "".join(out), i


def _kept(section: str, sub: str | None, key: str) -> bool:
    if section in _WHOLE_SECTIONS:
        return sub is None
    if sub is None:
        return (section, key) in _PLAIN
    return (section, key) in _SUBSECTION


def inert(data: bytes) -> bool:
    """Whether a git config holds nothing but keys git writes in ordinary work and that
    run nothing (the lists above: what `git init`, `clone`, `remote`, `branch -u` and
    `submodule` write), each with a plain value. Anything else (a program, an include,
    a hooks path, an unknown key, a config git could not read) is not."""
    if len(data) > MAX_BYTES:
        return False
    try:
        entries = parse(data.decode("utf-8"))
    except (UnicodeDecodeError, ParseError):
        return False
    for section, sub, key, value in entries:
        if not _kept(section, sub, key):
            return False
        if any(ord(ch) < 32 and ch != "\t" for ch in value) or "\x7f" in value:
            return False
    return True


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t") + '"'


def sanitize(data: bytes) -> str:
    """The inert part of a git config, as a new config file's text.

    A config git could not parse, or one too large, gives an empty file: git then runs
    with its defaults, which is safe (and at worst shows a repository oddly).
    """
    if len(data) > MAX_BYTES:
        return ""
    try:
        entries = parse(data.decode("utf-8"))
    except (UnicodeDecodeError, ParseError):
        return ""
    lines: list[str] = []
    current: tuple[str, str | None] | None = None
    for section, sub, key, value in entries:
        if not _kept(section, sub, key):
            continue
        if not (_SECTION.fullmatch(section) and _KEY.fullmatch(key)):
            continue
        if any(ord(ch) < 32 and ch != "\t" for ch in value) or "\x7f" in value:
            continue
        if sub is not None and any(ord(ch) < 32 or ch == "\x7f" for ch in sub):
            continue
        if (section, sub) != current:
            current = (section, sub)
            if sub is None:
                lines.append(f"[{section}]")
            else:
                escaped = sub.replace("\\", "\\\\").replace('"', '\\"')
                lines.append(f'[{section} "{escaped}"]')
        lines.append(f"\t{key} = {_quote(value)}")
    return "\n".join(lines) + "\n" if lines else ""
