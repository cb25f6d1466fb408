"""Protected paths: files in a workspace that configure code which runs later.

An edit to one of these can make a later, innocent-looking step run code (a git hook,
a shell rc file, an editor task, agent settings), so the file tools ask a person for
them in every mode (unless a rule names the path explicitly), and the sandbox shows
the ones that exist at a workspace root read-only even inside a writable workspace.
What a command creates or changes anywhere else in the workspace is held for a person
by the change tracker (agentd/changes/). One list serves all three:
agentd/sandboxing/codebearing.toml.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from agentd.sandboxing.codebearing import table


def protected_name(path: str) -> str | None:
    """The protected name in `path` (relative to a workspace root: ".git", ".bashrc",
    ".vscode", …), or None."""
    return table().for_file_tools(os.path.normpath(path))


# Inside a git directory: what makes git run code or read elsewhere (the list's [[git]]
# entries), shown read-only in the sandbox. Everything git writes in ordinary work
# (index, HEAD, refs/, objects/, logs/, packed-refs, ORIG_HEAD, FETCH_HEAD,
# COMMIT_EDITMSG, info/exclude) stays writable.
GIT_CODE_BEARING: tuple[str, ...] = tuple("/".join(rule.parts) for rule in table().git)
# Directories inside a git directory that are git directories themselves.
GIT_NESTED: tuple[str, ...] = ("modules", "worktrees")


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

    Only the root's existing entries are mounted read-only (bwrap would otherwise leave
    placeholders in the tree, and a walk per call would cost too much): deeper ones, and
    missing ones a command creates, are held by the change tracker after the command.
    """
    out = SandboxProtection()
    for name in table().sandbox_names():
        path = os.path.join(root, name)
        if os.path.lexists(path) and not _through_link(root, name):
            out.read_only.append(path)
    git = os.path.join(root, ".git")
    if os.path.isfile(git) and not os.path.islink(git):
        out.read_only.append(git)  # "gitdir: …" of a worktree or submodule
    elif os.path.isdir(git) and not os.path.islink(git):
        _protect_git_dir(git, out, top=True)
    return out


def _through_link(root: str, name: str) -> bool:
    """Whether a directory on the way to `name` (".cargo" of ".cargo/config.toml") is a
    symlink: its target is no protected path of this root."""
    parts = name.split("/")[:-1]
    return any(os.path.islink(os.path.join(root, *parts[: i + 1])) for i in range(len(parts)))


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
