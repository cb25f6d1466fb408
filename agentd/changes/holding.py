"""Held changes: which paths a run changed that make code run later, putting them back as
they were, and putting the run's version in place once a person said yes.

What was there before comes from the root's baseline (walk.py): the code-bearing files
as last known good. What the run wrote is captured once, here, before it is reverted;
a yes re-applies exactly those bytes, never what the path holds by then.

These functions do file work: run them in a worker thread acting as the session's
sandbox identity (agentd.fs.identity).
"""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass

from agentd.changes import files, walk
from agentd.changes.files import Entry
from agentd.changes.walk import Baseline
from agentd.sandboxing import gitconfig, homes
from agentd.sandboxing.codebearing import Table

ADDED, CHANGED, DELETED, MOVED = "added", "changed", "deleted", "moved"
# What a person is shown of all the diffs of one request, and of one file, at most.
DIFF_LINES = 240
FILE_DIFF_LINES = 60
DIFF_LINE_CHARS = 400


@dataclass
class Held:
    """One change kept from taking effect until a person decides."""

    root: str
    rel: str
    change: str  # ADDED, CHANGED, DELETED or MOVED
    reason: str
    before: Entry | None = None
    after: Entry | None = None  # as the run left it (captured before the revert)
    moved_to: str = ""  # MOVED: the run moved `rel` (a directory) here
    note: str = ""  # why it could not be fully reverted, or what else to know
    reverted: bool = False

    @property
    def path(self) -> str:
        return os.path.join(self.root, self.rel)

    @property
    def reappliable(self) -> bool:
        if self.change == MOVED:
            return True
        if self.change == DELETED:
            return True
        return self.after is not None and self.after.restorable

    def describe(self) -> str:
        what = f"moved to {self.moved_to}" if self.change == MOVED else self.change
        return f"{self.rel} ({what})"


def code_bearing(baseline: Baseline, table: Table, rel: str, *, is_dir: bool = False) -> str:
    """Why `rel` (below the baseline's root) makes code run later, or ""."""
    if rel in baseline.reasons:
        return baseline.reasons[rel]
    match = table.by_name(rel, is_dir=is_dir)
    if match is not None:
        return match.reason
    if rel in baseline.extra_files:
        return baseline.extra_files[rel]
    gitdir = walk.git_dir_of(baseline, rel)
    if gitdir is not None:  # inside a git dir only its listed entries count
        return "" if is_dir else table.in_git_dir(os.path.relpath(rel, gitdir)) or ""
    for unit, why in baseline.units.items():
        if rel.startswith(unit + "/"):
            return why
    for home in baseline.homes:  # a dotfile or dot-directory at a home's top, new or not
        below = rel[len(home) + 1 :] if home else rel
        if (not home or rel.startswith(home + "/")) and below.startswith("."):
            return homes.REASON
    return ""


def find(
    baseline: Baseline,
    table: Table,
    touched: set[str],
    moves: list[tuple[str, str]],
    existed_before: Callable[[str], bool | None],
    links: dict[str, str] | None = None,
) -> list[Held]:
    """The code-bearing changes among `touched` (absolute paths) and `moves`; `links`:
    paths (relative) that are other names of known code-bearing files, held as such."""
    root = baseline.root
    held: list[Held] = []
    moved_away: list[str] = []
    for old_abs, new_abs in moves:
        old, new = _rel(root, old_abs), _rel(root, new_abs)
        try:
            if old is None or new is None or files.read_entry(root, new) is None:
                continue
        except OSError:
            continue  # gone or swapped again meanwhile: its paths are looked at one by one
        inside = walk.scan_subtree(baseline, table, new)
        known = baseline.under(old)
        why = (
            code_bearing(baseline, table, new, is_dir=True)
            or code_bearing(baseline, table, old, is_dir=True)
            or (next(iter(inside.reasons.values())) if inside.reasons else "")
            or (baseline.reasons[known[0]] if known else "")
        )
        if why:
            held.append(Held(root, old, MOVED, why, moved_to=new))
            moved_away += [old, new]
    candidates: dict[str, bool] = {}
    for path in sorted(touched):
        rel = _rel(root, path)
        if rel is None or any(rel == m or rel.startswith(m + "/") for m in moved_away):
            continue
        candidates[rel] = True
        if os.path.basename(rel) in ("HEAD", "objects", "refs", "commondir"):
            # A directory that became a repository: its config may have been there before.
            parent = os.path.dirname(rel)
            if parent not in baseline.git_dirs and walk.is_git_dir(root, parent):
                for found in walk.scan_subtree(baseline, table, parent).entries:
                    candidates.setdefault(found, True)
    for rel in candidates:
        try:
            item = _judge(baseline, table, rel, existed_before(os.path.join(root, rel)))
        except OSError as exc:
            # A path a running command keeps swapping: judged as what cannot be read
            # (removed if it is code-bearing by its name; its next change is seen again).
            item = _unreadable(baseline, table, rel, exc)
        if item is not None:
            held.append(item)
    for rel, other in sorted((links or {}).items()):
        if any(h.rel == rel for h in held):
            continue
        why = code_bearing(baseline, table, other) or baseline.reasons.get(other, "")
        note = f"it is another name (a hard link) of {other}: writing it writes that file"
        held.append(Held(root, rel, ADDED, why, note=note))
    return held


def _unreadable(baseline: Baseline, table: Table, rel: str, exc: OSError) -> Held | None:
    why = table.by_name(rel)
    if why is None and rel not in baseline.entries:
        return None
    reason = why.reason if why is not None else baseline.reasons[rel]
    note = f"it could not be read ({exc.strerror or exc}): removed until you decide"
    return Held(baseline.root, rel, CHANGED, reason, before=baseline.entries.get(rel), note=note)


def _judge(baseline: Baseline, table: Table, rel: str, existed: bool | None) -> Held | None:
    root = baseline.root
    why = code_bearing(baseline, table, rel)
    if not why:
        return None
    after = files.read_entry(root, rel)
    if after is not None and after.kind == files.DIR:
        return None  # a directory is held by what it holds
    before = baseline.entries.get(rel)
    if before is not None and before.same(after):
        return None
    if before is None and after is None:
        return None
    if after is not None and _inert_config(baseline, rel, after):
        baseline.record(rel, after, why)  # what git itself writes: the new known good
        return None
    if after is None:
        assert before is not None
        item = Held(root, rel, DELETED, why, before=before)
        gitdir = walk.git_dir_of(baseline, rel)
        if gitdir is not None and files.read_entry(root, os.path.join(gitdir, "HEAD")) is None:
            item.note = "its repository was deleted with it; only the repository can bring it back"
        elif not before.restorable:
            item.note = "its content was not kept (too large), so it cannot be put back"
        return item
    if before is None:
        item = Held(root, rel, ADDED, why, after=after)
        if existed is True:
            item.change = CHANGED
            item.note = (
                "it existed before this command, but agentd had not seen it (made outside "
                "agentd after the workspace was indexed): it is removed until you decide"
            )
        return item
    return Held(root, rel, CHANGED, why, before=before, after=after)


def _inert_config(baseline: Baseline, rel: str, after: Entry | None) -> bool:
    """A git directory's config that holds only keys git writes in ordinary work (a
    clone's core, remote and branch) and runs nothing: judged by content, it passes."""
    if after is None or after.kind != files.FILE or after.content is None:
        return False
    if os.path.basename(rel) not in ("config", "config.worktree"):
        return False
    gitdir = walk.git_dir_of(baseline, rel)
    if gitdir is None or os.path.relpath(rel, gitdir) not in ("config", "config.worktree"):
        return False
    try:  # one name only: a config that is another file's link changes with that file
        if os.lstat(os.path.join(baseline.root, rel)).st_nlink != 1:
            return False
    except OSError:
        return False
    return gitconfig.inert(after.content)


def _rel(root: str, path: str) -> str | None:
    if path == root or not path.startswith(root.rstrip("/") + "/"):
        return None
    return path[len(root.rstrip("/")) + 1 :]


def revert(item: Held) -> None:
    """Put `item` back as it was before the run (as far as it can be: `item.note`)."""
    root, rel = item.root, item.rel
    if item.change == MOVED:
        files.rename(root, item.moved_to, rel)
    elif item.change == DELETED:
        if item.before is not None and item.before.restorable and not item.note:
            files.put(root, rel, item.before)
    elif item.before is not None and item.before.restorable:
        files.put(root, rel, item.before)
    else:
        files.remove(root, rel)
    item.reverted = True


def revert_all(baseline: Baseline, table: Table, items: list[Held], made: list[str]) -> None:
    """Revert `items`; then the directories the run made (`made`, relative) that only
    held what was reverted: a new .vscode/, .git/hooks/, and their parents it made."""
    for item in items:
        try:
            revert(item)
        except OSError as exc:
            item.note = f"it could not be put back ({exc.strerror or exc})"
            if item.change not in (DELETED, MOVED):
                # What cannot be restored (a full disk) at least does not stay.
                with contextlib.suppress(OSError):
                    files.remove(item.root, item.rel)
                    item.note += "; removed instead"
    made_set = set(made)
    empty: set[str] = {
        rel
        for rel in made
        if os.path.basename(rel) == ".git"
        or code_bearing(baseline, table, rel, is_dir=True)
        or code_bearing(baseline, table, f"{rel}/x")  # hooks/, units
    }
    for item in items:
        parent = os.path.dirname(item.moved_to or item.rel)
        while parent in made_set:
            empty.add(parent)
            parent = os.path.dirname(parent)
    remove_made_dirs(baseline.root, sorted(empty))


def remove_made_dirs(root: str, dirs: list[str]) -> None:
    """Remove the directories the run made that reverting left empty (deepest first)."""
    for rel in sorted(dirs, key=lambda r: r.count("/"), reverse=True):
        files.remove_empty_dir(root, rel)


def reapply(item: Held, baseline: Baseline, table: Table) -> None:
    """Make the run's change take effect, exactly as captured (a person said yes)."""
    root, rel = item.root, item.rel
    if item.change == MOVED:
        files.rename(root, rel, item.moved_to)
        return
    if item.change == DELETED:
        files.remove(root, rel)
        baseline.forget(rel)
        return
    if item.after is None or not item.after.restorable:
        raise ValueError(f"{rel}: what the command wrote was not kept, so it cannot be applied")
    files.put(root, rel, item.after)
    now = files.read_entry(root, rel)
    if now is not None:
        baseline.record(rel, now, item.reason)


def diff(items: list[Held]) -> str:
    """What each held change would do, as unified diffs (capped: DIFF_LINES in all)."""
    lines: list[str] = []
    for item in items:
        one = _diff_one(item)
        if len(one) > FILE_DIFF_LINES:
            one = one[:FILE_DIFF_LINES] + [f"… {len(one) - FILE_DIFF_LINES} more lines"]
        lines += one
    if len(lines) > DIFF_LINES:
        lines = lines[:DIFF_LINES] + [f"… {len(lines) - DIFF_LINES} more lines"]
    return "\n".join(line[:DIFF_LINE_CHARS] for line in lines)


def _diff_one(item: Held) -> list[str]:
    if item.change == MOVED:
        return [f"moved: {item.rel} -> {item.moved_to}"]
    old = _text(item.before)
    new = _text(item.after)
    head = [f"--- {item.rel if item.before else '/dev/null'}"]
    head.append(f"+++ {item.rel if item.after else '/dev/null'}")
    if isinstance(old, str) and isinstance(new, str):
        body = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=2))[2:]
        if item.before is not None and item.after is not None and not body:
            body = [f"@@ mode {item.before.mode & 0o7777:o} -> {item.after.mode & 0o7777:o}"]
        return head + body
    return head + [f"- {_summary(item.before)}", f"+ {_summary(item.after)}"]


def _text(entry: Entry | None) -> str | None:
    if entry is None:
        return ""
    if entry.kind != files.FILE or entry.content is None:
        return None
    try:
        return entry.content.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _summary(entry: Entry | None) -> str:
    if entry is None:
        return "(nothing)"
    if entry.kind == files.SYMLINK and entry.content is not None:
        return f"symlink -> {entry.content.decode('utf-8', 'replace')}"
    if entry.kind == files.FILE:
        return f"binary, {entry.size} bytes, sha256 {entry.digest[:16]}"
    return f"{entry.kind} (mode {entry.mode:o})"
