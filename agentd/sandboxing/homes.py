"""A workspace that is, or holds, a home directory: every dotfile and dot-directory at
the top of a home is configuration some program reads and obeys (a shell's rc files,
`.config/**` where git, nvim, fish and many others look, `.local/bin` on PATH), so all
of them count as code-bearing there, whatever their name.

A directory is a home when an account's home (the password database) is that
directory, or when it holds a shell's rc file (a copy of a home, a container's home
mounted as a workspace).
"""

from __future__ import annotations

import functools
import os
import pwd

# Files whose presence makes a directory a home.
MARKERS = frozenset(
    {".bashrc", ".bash_profile", ".bash_login", ".profile", ".zshrc", ".zshenv", ".zprofile"}
)
REASON = (
    "home: a home directory's dotfiles and dot-directories are where shells, git "
    "(.gitconfig, .config/git), editors and most tools read configuration that runs code"
)


@functools.cache
def account_homes() -> frozenset[str]:
    """The homes of the machine's accounts (not / and the like)."""
    out: set[str] = set()
    for entry in pwd.getpwall():
        home = os.path.normpath(entry.pw_dir or "/")
        if home.count("/") >= 2 or home in ("/root",):
            out.add(home)
    return frozenset(out)


def is_home(path: str, names: set[str] | frozenset[str]) -> bool:
    """Whether the directory `path` (listed: `names`) is a home."""
    return bool(MARKERS & names) or os.path.normpath(path) in account_homes()


def dot_entry(root: str, rel: str) -> str | None:
    """The dot entry of a home that `rel` (below `root`) is or lies in, as a path below
    the root; None when no directory on its way is a home. Looks at the filesystem (a
    listing per directory on the way, never following a link out of the root)."""
    parts = [p for p in rel.split("/") if p and p != "."]
    for i in range(len(parts)):
        if not parts[i].startswith("."):
            continue
        parent = os.path.join(root, *parts[:i])
        try:
            names = set(os.listdir(parent)) if not os.path.islink(parent) else set()
        except OSError:
            continue
        if is_home(parent, names):
            return "/".join(parts[: i + 1])
    return None
