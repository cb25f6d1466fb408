"""Protected paths: files in a workspace that configure code which runs later.

An edit to one of these can make a later, innocent-looking step run code (a git hook,
a shell rc file, an editor task, agent settings), so the file tools ask a person for
them in every mode (unless a rule names the path explicitly), and the sandbox shows
the code-bearing ones read-only even inside a writable workspace. Claude Code protects
the same names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

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


# Inside a git directory: what makes git run code or read elsewhere, shown read-only in
# the sandbox. config names programs (core.fsmonitor, core.hooksPath, core.sshCommand,
# filter/diff/merge drivers, aliases), config.worktree too (extensions.worktreeConfig),
# hooks/ holds the programs themselves, and objects/info/alternates points git at other
# object stores. Everything git writes in ordinary work (index, HEAD, refs/, objects/,
# logs/, packed-refs, ORIG_HEAD, FETCH_HEAD, COMMIT_EDITMSG, info/exclude) stays
# writable. info/attributes is not listed: it can only select drivers a config defines,
# which the tracked .gitattributes can do as well.
GIT_CODE_BEARING: tuple[str, ...] = (
    "config",
    "config.worktree",
    "hooks",
    "objects/info/alternates",
)
# Directories inside a git directory that are git directories themselves.
GIT_NESTED: tuple[str, ...] = ("modules", "worktrees")
# Protected directories other than .git: read-only whole.
_READ_ONLY_DIRS: tuple[str, ...] = tuple(sorted(PROTECTED_DIRS - {".git"}))


@dataclass
class SandboxProtection:
    """How a workspace root's protected paths appear inside the sandbox.

    `pinned` are git directories bound writable onto themselves: a mount point cannot be
    renamed or removed, so a command cannot swap `.git` for one with its own config.
    `read_only` are the existing code-bearing paths; `ensure_dirs` are missing hooks
    directories created empty so they are read-only too.
    """

    pinned: list[str] = field(default_factory=list)
    read_only: list[str] = field(default_factory=list)
    ensure_dirs: list[str] = field(default_factory=list)


def sandbox_protection(root: str) -> SandboxProtection:
    """The protected paths of workspace root `root` for its sandbox (see SandboxProtection).

    Only the root's own entries count: rc files and editor settings deeper down are not
    read by anything that runs them.
    """
    out = SandboxProtection()
    for name in sorted(PROTECTED_FILES) + list(_READ_ONLY_DIRS):
        path = os.path.join(root, name)
        if os.path.lexists(path):
            out.read_only.append(path)
    git = os.path.join(root, ".git")
    if os.path.isfile(git) and not os.path.islink(git):
        out.read_only.append(git)  # "gitdir: …" of a worktree or submodule
    elif os.path.isdir(git) and not os.path.islink(git):
        _protect_git_dir(git, out, top=True)
    return out


def _protect_git_dir(gitdir: str, out: SandboxProtection, *, top: bool) -> None:
    entries = [os.path.join(gitdir, name) for name in GIT_CODE_BEARING]
    if any(os.path.islink(p) for p in entries):
        # A symlink cannot be mounted over, only its target: the link itself could be
        # replaced. Fail closed: the whole git directory is read-only.
        out.read_only.append(gitdir)
        return
    out.pinned.append(gitdir)
    for path in entries:
        if os.path.lexists(path):
            out.read_only.append(path)
        elif top and os.path.basename(path) == "hooks":
            out.ensure_dirs.append(path)
    for nested in GIT_NESTED:
        for path in _git_dirs_under(os.path.join(gitdir, nested), depth=4):
            _protect_git_dir(path, out, top=False)


def _git_dirs_under(base: str, depth: int) -> list[str]:
    """Git directories below `base` (a submodule named a/b lives in modules/a/b)."""
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return []
    found: list[str] = []
    for entry in entries:
        path = os.path.join(base, entry)
        if os.path.islink(path) or not os.path.isdir(path):
            continue
        if os.path.exists(os.path.join(path, "HEAD")):
            found.append(path)
        elif depth > 1:
            found += _git_dirs_under(path, depth - 1)
    return found
