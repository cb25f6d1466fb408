"""Finding the code-bearing files below a workspace root: by a walk of the whole tree
(once per root and identity, when its first writing call starts, and as the fallback
when events were lost or cannot be had), or of the parts already known (each call's
start).

The walk goes by directory descriptor and never follows a symlink (a link is recorded
as what it is); it lists names with getdents and stats only what the list names, so a
tree of 100,000 files costs one readdir per directory. A directory counts as a git
directory when it is named `.git`, or holds HEAD with objects/ and refs/ (a bare
repository) or with commondir (a linked worktree's); inside one, only its listed
entries count, and nested git directories under modules/ and worktrees/.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from dataclasses import dataclass, field

from agentd.changes import files
from agentd.changes.files import Entry
from agentd.sandboxing import gitconfig, homes
from agentd.sandboxing.codebearing import Table

# Bounds of one baseline: past them the rest is kept as digests (removable, not
# restorable), and `complete` says so.
MAX_ENTRIES = 20_000
MAX_CONTENT_BYTES = 64 * 1024 * 1024
NEST_DEPTH = 6
_GIT_ROOT_ENTRIES = ("config", "config.worktree", "commondir", "gitdir")
_GIT_NAMES = frozenset(_GIT_ROOT_ENTRIES)
# Names whose appearance makes their directory a repository (by its content).
_GIT_MAKERS = frozenset({"HEAD", "objects", "refs", "commondir"})
_GIT_DEEP_ENTRIES = ("objects/info/alternates", "objects/info/http-alternates")
_PLAIN, _UNIT, _GIT, _NEST, _HOOKS, _INFO = "plain", "unit", "git", "nest", "hooks", "info"


@dataclass
class Baseline:
    """The code-bearing files of one root, as last known good (or approved)."""

    root: str
    entries: dict[str, Entry] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)  # directories held whole -> why
    git_dirs: set[str] = field(default_factory=set)
    homes: set[str] = field(default_factory=set)  # directories that are homes (homes.py)
    extra_files: dict[str, str] = field(default_factory=dict)  # named by a git config
    complete: bool = True
    content_bytes: int = 0
    # Code-bearing paths that changed with no event explaining it -> why: held at the
    # next hold (their entry stays the last known good).
    suspects: dict[str, str] = field(default_factory=dict)
    # The entries of the baseline this one refreshes: reused when their stat is unchanged.
    previous: dict[str, Entry] = field(default_factory=dict, repr=False)

    def record(self, rel: str, entry: Entry, reason: str) -> None:
        if rel in self.entries:
            self.content_bytes -= len(self.entries[rel].content or b"")
        if len(self.entries) >= MAX_ENTRIES and rel not in self.entries:
            self.complete = False
            return
        if (
            entry.content is not None
            and self.content_bytes + len(entry.content) > MAX_CONTENT_BYTES
        ):
            entry = Entry(entry.kind, entry.mode, None, entry.digest, entry.size, entry.key)
            self.complete = False
        self.content_bytes += len(entry.content or b"")
        self.entries[rel] = entry
        self.reasons[rel] = reason

    def forget(self, rel: str) -> None:
        if rel in self.entries:
            self.content_bytes -= len(self.entries.pop(rel).content or b"")
            self.reasons.pop(rel, None)

    def under(self, rel: str) -> list[str]:
        """Known entries at or below `rel`."""
        prefix = rel.rstrip("/") + "/"
        return [r for r in self.entries if r == rel or r.startswith(prefix)]


def scan(root: str, table: Table) -> Baseline:
    """A new baseline of `root` by a walk of the whole tree."""
    baseline = Baseline(root)
    _walk(baseline, table, "", _PLAIN, "")
    add_config_paths(baseline, table)
    return baseline


def rescan(
    baseline: Baseline,
    table: Table,
    skip: set[str],
    also: set[str] | None = None,
    unsure: frozenset[tuple[int, int]] = frozenset(),
) -> Baseline:
    """A fresh baseline of what `baseline` knows: its git directories and units walked
    again, its other entries and the listed names at the root looked at again (a stat
    each; content re-read only when the stat changed, or when the file is in `unsure`,
    (device, inode) of files open for writing). Paths in `skip` keep their old entry: a
    running command has touched them, so what they hold now is not known good."""
    previous = {rel: e for rel, e in baseline.entries.items() if tuple(e.key[:2]) not in unsure}
    fresh = Baseline(baseline.root, previous=previous)
    for rel in sorted(baseline.git_dirs):
        _walk(fresh, table, rel, _GIT, "")
    for rel, why in sorted(baseline.units.items()):
        if rel not in fresh.units:
            fresh.units[rel] = why
            _walk(fresh, table, rel, _UNIT, why)
    for rel, why in baseline.reasons.items():
        if rel not in fresh.entries:
            _look(fresh, table, rel, why)
    for rel in [*table.sandbox_names(), ".git", ".gitmodules"]:
        if rel not in fresh.entries and rel not in fresh.units and rel not in fresh.git_dirs:
            _look(fresh, table, rel)
    for rel in sorted(also or ()):  # named by the host watch since the last look
        _look_new(fresh, table, rel)
    add_config_paths(fresh, table)
    for rel in skip:
        fresh.forget(rel)
        if rel in baseline.entries:
            fresh.record(rel, baseline.entries[rel], baseline.reasons[rel])
    fresh.complete = fresh.complete and baseline.complete
    fresh.previous = {}
    return fresh


def scan_subtree(baseline: Baseline, table: Table, rel: str) -> Baseline:
    """The code-bearing files at or below `rel` (a directory a command moved or made)."""
    out = Baseline(baseline.root)
    out.git_dirs = set(baseline.git_dirs)
    out.units = dict(baseline.units)
    match = table.by_name(rel, is_dir=True)
    if match is not None:  # the unit itself, or a directory inside one
        _walk(out, table, rel, _UNIT, match.reason)
    elif os.path.basename(rel) == ".git" or is_git_dir(baseline.root, rel):
        _walk(out, table, rel, _GIT, "")
    else:
        _walk(out, table, rel, _PLAIN, "")
    return out


def _look(baseline: Baseline, table: Table, rel: str, why: str = "") -> None:
    """Record `rel` (a file; a unit or git directory is walked) if it exists."""
    try:
        with files.parent_of(baseline.root, rel) as fd:
            entry = files.read_at(fd, os.path.basename(rel), reuse=baseline.previous.get(rel))
    except OSError:
        return
    if entry is None:
        return
    if entry.kind == files.DIR:
        match = table.by_name(rel, is_dir=True)
        if os.path.basename(rel) == ".git":
            _walk(baseline, table, rel, _GIT, "")
        elif match is not None and match.unit == rel:
            baseline.units[rel] = match.reason
            _walk(baseline, table, rel, _UNIT, match.reason)
        return
    match = table.by_name(rel)
    reason = why or (match.reason if match else "")
    if reason:
        baseline.record(rel, entry, reason)


def _look_new(baseline: Baseline, table: Table, rel: str) -> None:
    """A path the host watch saw with a listed name: a file or unit the list names, an
    entry of a git directory, or a directory that became a repository."""
    name = os.path.basename(rel)
    if name in _GIT_MAKERS:
        parent = os.path.dirname(rel)
        if parent and parent not in baseline.git_dirs and is_git_dir(baseline.root, parent):
            _walk(baseline, table, parent, _GIT, "")
        return
    if rel in baseline.entries or any(rel.startswith(u + "/") for u in baseline.units):
        return  # walked already
    gitdir = git_dir_of(baseline, rel)
    if gitdir is not None:
        if gitdir not in baseline.git_dirs:
            _walk(baseline, table, gitdir, _GIT, "")
        return
    _look(baseline, table, rel)


def is_git_dir(root: str, rel: str) -> bool:
    """A bare repository's or a linked worktree's git directory (by its content)."""
    return files.is_dir_holding(root, rel, ("HEAD", "objects", "refs")) or files.is_dir_holding(
        root, rel, ("HEAD", "commondir")
    )


def git_dir_of(baseline: Baseline, rel: str) -> str | None:
    """The git directory `rel` lies in, if any: the nearest known one or one named .git
    (or a repository found on disk below its modules/ or worktrees/), else, for the
    entries that make a directory a repository's (config, hooks/…, info/attributes,
    objects/info/alternates, commondir, gitdir), that directory if it is one by its
    content. None for any other path."""
    parts = rel.split("/")
    outer = 0
    for i in range(len(parts) - 1, 0, -1):
        if parts[i - 1] == ".git" or "/".join(parts[:i]) in baseline.git_dirs:
            outer = i
            break
    if outer:
        nested = parts[outer] in ("modules", "worktrees")
        for i in range(len(parts) - 1, outer, -1):
            candidate = "/".join(parts[:i])
            if candidate in baseline.git_dirs or (nested and is_git_dir(baseline.root, candidate)):
                return candidate
        return "/".join(parts[:outer])
    if parts[-1] in _GIT_NAMES and len(parts) >= 2:
        head = parts[:-1]
    elif parts[-2:-1] == ["info"] and parts[-1] == "attributes" and len(parts) >= 3:
        head = parts[:-2]
    elif parts[-3:] == ["objects", "info", "alternates"] and len(parts) >= 4:
        head = parts[:-3]
    elif "hooks" in parts[:-1]:
        last = len(parts) - 2 - parts[-2::-1].index("hooks")
        head = parts[:last]
    else:
        return None
    if not head:
        return None
    gitdir = "/".join(head)
    return gitdir if is_git_dir(baseline.root, gitdir) else None


def _walk(baseline: Baseline, table: Table, start: str, mode: str, why: str) -> None:
    try:
        with files.parent_of(baseline.root, os.path.join(start, "x") if start else "x") as fd:
            top = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return
    stack: list[tuple[int, str, str, str, int]] = [(top, start, mode, why, 0)]
    while stack:
        fd, rel, mode, why, depth = stack.pop()
        try:
            _list(baseline, table, fd, rel, mode, why, depth, stack)
        finally:
            os.close(fd)


def _list(
    baseline: Baseline,
    table: Table,
    fd: int,
    rel: str,
    mode: str,
    why: str,
    depth: int,
    stack: list[tuple[int, str, str, str, int]],
) -> None:
    try:
        with os.scandir(fd) as it:
            listing = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    except OSError:
        return
    names = {name for name, _ in listing}
    if (
        mode == _PLAIN
        and "HEAD" in names
        and ({"objects", "refs"} <= names or "commondir" in names)
    ):
        mode = _GIT
    if mode == _GIT:
        baseline.git_dirs.add(rel)
        _git_entries(baseline, table, fd, rel, listing, stack, depth)
        return
    prefix = f"{rel}/" if rel else ""
    home = mode == _PLAIN and homes.is_home(os.path.join(baseline.root, rel), names)
    if home:
        baseline.homes.add(rel)
    for name, is_dir in listing:
        if home and name.startswith(".") and name != ".git":
            child = prefix + name
            if is_dir:
                baseline.units.setdefault(child, homes.REASON)
                _push(stack, fd, name, child, _UNIT, baseline.units[child], depth + 1)
            else:
                _keep(baseline, fd, name, child, _reason(table, child) or homes.REASON)
            continue
        if mode == _NEST:
            if is_dir and depth < NEST_DEPTH:
                _push(stack, fd, name, prefix + name, _NEST, "", depth + 1)
            continue
        if mode == _UNIT:
            if is_dir:
                _push(stack, fd, name, prefix + name, _UNIT, why, depth + 1)
            else:
                _keep(baseline, fd, name, prefix + name, why)
            continue
        if mode == _INFO:  # a git dir's info/: all but what git writes there as data
            if info_why := table.in_git_dir(f"info/{name}" + ("/x" if is_dir else "")):
                if is_dir:
                    _push(stack, fd, name, prefix + name, _UNIT, info_why, depth + 1)
                else:
                    _keep(baseline, fd, name, prefix + name, info_why)
            continue
        if mode == _HOOKS:  # a git dir's hooks/: what the list counts there (not *.sample)
            if is_dir:
                _push(stack, fd, name, prefix + name, _HOOKS, why, depth + 1)
            elif hook_why := table.in_git_dir(f"hooks/{name}"):
                _keep(baseline, fd, name, prefix + name, hook_why)
            continue
        if not table.may_match(name):
            if is_dir:
                _push(stack, fd, name, prefix + name, _PLAIN, "", depth + 1)
            continue
        child = prefix + name
        if is_dir:
            if name == ".git":
                _push(stack, fd, name, child, _GIT, "", depth + 1)
            elif (m := table.by_name(child, is_dir=True)) is not None and m.unit == child:
                baseline.units[child] = m.reason
                _push(stack, fd, name, child, _UNIT, m.reason, depth + 1)
            else:
                _push(stack, fd, name, child, _PLAIN, "", depth + 1)
        elif reason := _reason(table, child):
            _keep(baseline, fd, name, child, reason)


def _keep(baseline: Baseline, fd: int, name: str, rel: str, reason: str) -> None:
    with contextlib.suppress(OSError):
        entry = files.read_at(fd, name, reuse=baseline.previous.get(rel))
        if entry is not None:
            baseline.record(rel, entry, reason)


def _reason(table: Table, rel: str) -> str:
    match = table.by_name(rel)
    return match.reason if match is not None else ""


def _git_entries(
    baseline: Baseline,
    table: Table,
    fd: int,
    rel: str,
    listing: list[tuple[str, bool]],
    stack: list[tuple[int, str, str, str, int]],
    depth: int,
) -> None:
    """A git directory's entries: what git writes in ordinary work is passed over
    unread (objects/, refs/, logs/, the index…), everything else recorded."""
    for name, is_dir in listing:
        child = os.path.join(rel, name)
        if not is_dir:
            if why := table.in_git_dir(name):
                _keep(baseline, fd, name, child, why)
        elif name == "hooks":
            _push(stack, fd, name, child, _HOOKS, "", depth + 1)
        elif name in ("modules", "worktrees"):
            _push(stack, fd, name, child, _NEST, "", depth + 1)
        elif name == "info":
            _push(stack, fd, name, child, _INFO, "", depth + 1)
        elif name == "objects":
            for sub in _GIT_DEEP_ENTRIES:
                with contextlib.suppress(OSError):
                    with files.parent_of(baseline.root, os.path.join(rel, sub)) as sub_fd:
                        entry = files.read_at(sub_fd, os.path.basename(sub))
                    if entry is not None and entry.kind != files.DIR:
                        why = table.in_git_dir(sub) or ""
                        baseline.record(os.path.join(rel, sub), entry, why)
        elif why := table.in_git_dir(f"{name}/x"):
            _push(stack, fd, name, child, _UNIT, why, depth + 1)


def _push(
    stack: list[tuple[int, str, str, str, int]],
    fd: int,
    name: str,
    rel: str,
    mode: str,
    why: str,
    depth: int,
) -> None:
    try:
        child = files._openat2(fd, name, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK)
    except OSError:
        return  # replaced by a link or gone meanwhile, or not ours to read
    stack.append((child, rel, mode, why, depth))


def add_config_paths(baseline: Baseline, table: Table) -> None:
    """Files and directories the known git configs name (core.hooksPath, include.path,
    programs such as core.fsmonitor) that lie inside the root: they count too."""
    for gitdir in sorted(baseline.git_dirs):
        for name in ("config", "config.worktree"):
            entry = baseline.entries.get(os.path.join(gitdir, name))
            if entry is None or entry.content is None:
                continue
            try:
                parsed = gitconfig.parse(entry.content.decode("utf-8"))
            except (UnicodeDecodeError, gitconfig.ParseError):
                continue
            worktree = os.path.dirname(gitdir) if os.path.basename(gitdir) == ".git" else gitdir
            for section, sub, key, value in parsed:
                rule = table.config_rule(section, sub, key)
                if rule is None:
                    continue
                base = gitdir if rule.key == "path" else worktree
                target = _target(value, rule.kind, base, baseline.root)
                if target is None:
                    continue
                reason = f"git: the repository config {gitdir}/{name} names it ({rule.reason})"
                if rule.kind == "dir":
                    if target not in baseline.units:
                        baseline.units[target] = reason
                        _walk(baseline, table, target, _UNIT, reason)
                else:
                    baseline.extra_files[target] = reason
                    _look(baseline, table, target, reason)


def _target(value: str, kind: str, base: str, root: str) -> str | None:
    """The path below the root a config value names, or None (outside, or no path)."""
    if kind == "program":
        try:
            words = shlex.split(value)
        except ValueError:
            words = value.split()
        if not words or "/" not in words[0]:
            return None
        value = words[0]
    if os.path.isabs(value):
        inside = os.path.normpath(value)
        if not inside.startswith(root.rstrip("/") + "/"):
            return None  # the person's own, outside the workspace
        value, base = os.path.relpath(inside, root), ""
    if not value or value.startswith("~"):
        return None
    rel = os.path.normpath(os.path.join(base, value))
    if rel == ".." or rel.startswith("../") or rel == ".":
        return None
    return rel
