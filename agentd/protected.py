"""Protected paths: files in a workspace that configure code which runs later.

An edit to one of these can make a later, innocent-looking step run code (a git hook,
a shell rc file, an editor task, agent settings), so the file tools ask a person for
them in every mode (unless a rule names the path explicitly), and the sandbox shows
the code-bearing ones read-only even inside a writable workspace. Claude Code protects
the same names.
"""

from __future__ import annotations

import os

# A path with any of these as a component is protected.
PROTECTED_DIRS: frozenset[str] = frozenset({".git", ".claude", ".vscode", ".idea"})
# A path whose last component is one of these is protected.
PROTECTED_FILES: frozenset[str] = frozenset(
    {
        ".gitconfig",
        ".gitmodules",
        ".bashrc",
        ".bash_profile",
        ".zshrc",
        ".zprofile",
        ".profile",
        ".ripgreprc",
        ".mcp.json",
        ".claude.json",
    }
)


def protected_name(path: str) -> str | None:
    """The protected component `path` contains (".git", ".bashrc", …), or None."""
    parts = [p for p in os.path.normpath(path).split(os.sep) if p]
    for part in parts[:-1]:
        if part in PROTECTED_DIRS:
            return part
    if parts and (parts[-1] in PROTECTED_DIRS or parts[-1] in PROTECTED_FILES):
        return parts[-1]
    return None
