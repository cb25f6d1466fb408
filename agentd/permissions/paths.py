"""Gitignore-style path patterns for Read/Edit rules, anchored to a directory.

A rule's path is first made absolute the way Claude Code reads it:

    //abs/path   the absolute path /abs/path
    ~/path       under the session owner's home
    /path        under the directory the rule belongs to (the workspace root for
                 .claude/settings*.json; each workspace root for config and session rules)
    ./path, path under the session's cwd

then matched like a .gitignore line: `*` and `?` stay inside one path component,
`**` crosses components (`dir/**` also covers `dir`), a pattern without a slash
(`*.env`) matches that name at any depth below the anchor, a trailing slash means
"this directory", and a pattern that matches a directory matches everything inside it.
Written here (a few lines of regex) rather than pulling in `pathspec`, whose API is
about relative paths in a tree.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache


def anchor_pattern(spec: str, *, base: str, cwd: str, home: str) -> str:
    """The absolute pattern a rule's path specifier stands for."""
    if spec.startswith("//"):
        pattern = "/" + spec.lstrip("/")
    elif spec == "~" or spec.startswith("~/"):
        pattern = home.rstrip("/") + spec[1:]
    elif spec.startswith("/"):
        pattern = base.rstrip("/") + spec
    else:
        rel = spec[2:] if spec.startswith("./") else spec
        body = rel.rstrip("/")
        # A bare name (no slash inside) matches at any depth, as in .gitignore;
        # "./name" is anchored to the cwd itself.
        if "/" not in body and not spec.startswith("./"):
            rel = "**/" + rel
        pattern = cwd.rstrip("/") + "/" + rel
    return pattern


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str]:
    if pattern.endswith("/") and len(pattern) > 1:
        pattern = pattern.rstrip("/")
    tail = ""
    if pattern.endswith("/**"):
        # `dir/**` covers the directory itself too, so Grep or LS on `dir` is covered.
        pattern, tail = pattern[:-3], "(?:/.*)?"
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                at_start = i == 0 or pattern[i - 1] == "/"
                j = i + 2
                if at_start and j < n and pattern[j] == "/":
                    out.append("(?:.*/)?")  # "**/": zero or more directories
                    i = j + 1
                    continue
                out.append(".*")
                i = j
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + tail)


def matches(pattern: str, path: str) -> bool:
    """Whether absolute `path`, or a directory holding it, matches absolute `pattern`."""
    regex = _compile(os.path.normpath(pattern))
    path = os.path.normpath(path)
    while True:
        if regex.fullmatch(path):
            return True
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


def is_within(path: str, root: str) -> bool:
    """Whether `path` is `root` or lies under it (both absolute and normalised)."""
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")
