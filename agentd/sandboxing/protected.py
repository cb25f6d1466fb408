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

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field

from agentd.fs.identity import FsIdentity, acting_as
from agentd.sandboxing.codebearing import table
from agentd_sandbox import anchored


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
    # The directories (relative to the root, "" itself) whose entries the answer rests
    # on: while none of them changed, it holds (agentd/runs/plans.py caches it so).
    looked_at: list[str] = field(default_factory=list)


def sandbox_protection(root: str, identity: FsIdentity | None = None) -> SandboxProtection:
    """The protected paths of workspace root `root` for its sandbox (see SandboxProtection).

    Only the root's existing entries are mounted read-only (bwrap would otherwise leave
    placeholders in the tree, and a walk per call would cost too much): deeper ones, and
    missing ones a command creates, are held by the change tracker after the command.
    Everything is looked at beneath the root's descriptor with no link followed
    (agentd_sandbox.anchored), as the session's `identity`: a name that is a link, or
    lies behind one, is not listed (the sandbox binds nothing at a link's target), and
    no walk goes through a link.
    """
    out = SandboxProtection()
    with acting_as(identity), _opened_root(root) as tree:
        if tree is None:
            return out
        for name in table().sandbox_names():
            if tree.kind(name) not in (None, "link"):
                out.read_only.append(os.path.join(root, name))
        git = os.path.join(root, ".git")
        kind = tree.kind(".git")
        if kind == "file":
            out.read_only.append(git)  # "gitdir: …" of a worktree or submodule
        elif kind == "dir":
            _protect_git_dir(tree, ".git", git, out, _Budget(), top=True)
        out.looked_at = sorted(tree.looked)
    return out


# A walk of nested git dirs stops past these: a .git/modules that holds more is made
# read-only whole (its git dirs then cannot be written, but nothing in it is missed).
MAX_NESTED_GIT_DIRS = 64
MAX_WALKED_DIRS = 4096


@dataclass
class _Budget:
    git_dirs: int = 0
    walked: int = 0


def _protect_git_dir(
    tree: _Tree, rel: str, gitdir: str, out: SandboxProtection, budget: _Budget, *, top: bool
) -> None:
    kinds = {name: tree.kind(f"{rel}/{name}") for name in GIT_CODE_BEARING}
    if "link" in kinds.values():
        # A symlink cannot be mounted over, only its target: the link itself could be
        # replaced. Fail closed: the whole git directory is read-only.
        out.read_only.append(gitdir)
        return
    out.pinned.append(gitdir)
    for name, kind in kinds.items():
        path = os.path.join(gitdir, name)
        if kind is not None:
            out.read_only.append(path)
        elif top and name == "hooks":
            out.ensure_dirs.append(path)
    for nested in GIT_NESTED:
        found = _git_dirs_under(tree, f"{rel}/{nested}", 4, budget)
        if found is None:
            out.read_only.append(os.path.join(gitdir, nested))
            continue
        for sub in found:
            _protect_git_dir(
                tree,
                sub,
                os.path.join(gitdir, os.path.relpath(sub, rel)),
                out,
                budget,
                top=False,
            )


def _git_dirs_under(tree: _Tree, base: str, depth: int, budget: _Budget) -> list[str] | None:
    """Git directories below `base` (relative to the root; a submodule named a/b lives in
    modules/a/b), listed beneath the root without following a link; None past the budget."""
    tree.looked.add(base)
    try:
        fd = anchored.open_beneath(tree.fd, base, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return []  # missing, unreadable, or a link: not walked
    try:
        with os.scandir(fd) as it:
            names = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    finally:
        os.close(fd)
    found: list[str] = []
    for name in names:
        budget.walked += 1
        if budget.walked > MAX_WALKED_DIRS:
            return None
        path = f"{base}/{name}"
        if tree.kind(f"{path}/HEAD") is not None:
            budget.git_dirs += 1
            if budget.git_dirs > MAX_NESTED_GIT_DIRS:
                return None
            found.append(path)
        elif depth > 1:
            deeper = _git_dirs_under(tree, path, depth - 1, budget)
            if deeper is None:
                return None
            found += deeper
    return found


# Parent directories a walk keeps open (most names share the root or a git dir).
_KEPT_DIRS = 16


class _Tree:
    """A workspace root's descriptor, and the directories inside it opened beneath it
    (the first few kept for one walk: a git dir's entries share a parent)."""

    def __init__(self, root_fd: int) -> None:
        self.fd = root_fd
        self._dirs: dict[str, int | None] = {"": root_fd}
        self._refused: set[str] = set()
        # Every directory a name was looked up in, or listed.
        self.looked: set[str] = {""}

    def kind(self, rel: str) -> str | None:
        """What `rel` is beneath the root: "file", "dir", "link" (itself, or a link on
        its way), "other", or None if it does not exist."""
        parent, name = os.path.split(rel)
        self.looked.add(parent)
        if parent in self._dirs:
            dir_fd, opened = self._dirs[parent], False
        else:
            dir_fd, opened = self._open(parent), True
            if len(self._dirs) < _KEPT_DIRS:  # the root's and the git dirs' parents
                self._dirs[parent], opened = dir_fd, False
        if dir_fd is None:
            return "link" if parent in self._refused else None
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return None
        finally:
            if opened:
                os.close(dir_fd)
        if stat.S_ISLNK(st.st_mode):
            return "link"
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        return "file" if stat.S_ISREG(st.st_mode) else "other"

    def _open(self, rel: str) -> int | None:
        try:
            return anchored.open_beneath(self.fd, rel, os.O_PATH | os.O_DIRECTORY)
        except OSError as exc:
            if anchored.is_link_refusal(exc):
                self._refused.add(rel)
            return None

    def close(self) -> None:
        for rel, fd in self._dirs.items():
            if rel and fd is not None:
                os.close(fd)
        self._dirs = {"": self.fd}


@contextlib.contextmanager
def _opened_root(root: str) -> Iterator[_Tree | None]:
    try:
        fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    tree = _Tree(fd)
    try:
        yield tree
    finally:
        tree.close()
        os.close(fd)
