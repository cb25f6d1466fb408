"""Which files the session has read a run changed: what the notice a Bash result carries
names, so the model reads them again before editing them.

It comes from the run's change set as its checkpoint sees it (tracked.py, checkpoints.py):
a path is named when the run left it different (the checkpoint keeps it), it was not
held (a code-bearing change reverted for a person; the held notice names those), and
its content now is not the content the model read. So a `touch`, a write of the same
bytes, or a change made and undone in one call names nothing, as in the reference,
whose note about a changed file is a diff and an empty one is never shown; a change
only to a file's mode names nothing either (what the model read is still what is
there). Another command writing the file meanwhile is not this call's change.

Where a run has no change set (a daemon that is not root scans instead of following
events, a read-only or unsandboxed run is not tracked) or a partial one (events were
lost), or a read file lies outside the tracked roots, the files are compared by stat
with how they were before the run, or with the read state: a lower bound is no answer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agentd.changes import images
from agentd.changes.blobs import Blobs
from agentd.changes.holding import Held
from agentd.changes.tracked import Tracked
from agentd.fs.identity import FsIdentity
from agentd.sessions.checkpoint_rows import Row
from agentd.sessions.session import FileState

# The read files looked at by stat where no change set says (before and after a run).
LOOKED_AT = 500

Stats = dict[str, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Recorded:
    """What a run's checkpoint said: `kept` when one was recorded (then `row` is it, or
    None when the run left nothing different), not when checkpoints are off or failed."""

    kept: bool
    row: Row | None = None


def stats_before(read: Iterable[str], outside: list[str] | None) -> Stats:
    """The stat of the read files a change set will not cover, before a run: all of them
    (`outside` None: no change set will be kept), else those outside the roots `outside`."""
    paths = list(read) if outside is None else [p for p in read if _split(p, outside) is None]
    return _stats(paths[:LOOKED_AT])


def _stats(paths: Iterable[str]) -> Stats:
    state: Stats = {}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            state[path] = (-1, -1)
            continue
        state[path] = (st.st_mtime_ns, st.st_size)
    return state


def changed_by_stat(before: Stats) -> set[str]:
    """Of the files stat'ed before the run, those whose mtime or size moved."""
    after = _stats(before)
    return {p for p, v in after.items() if before[p] != v}


def changed_read(
    read: Mapping[str, FileState],
    session_roots: list[str],
    tracked: Tracked,
    held: list[Held],
    recorded: Recorded,
) -> set[str] | None:
    """The read files (as the read state names them) that the run changed, from its
    change set; None when it has none (scanned, not followed by events)."""
    if not tracked.events:
        return None
    spelled = _spellings(session_roots)
    away = _held_paths(held)
    entries: dict[str, dict[str, Any] | None] = {}
    if recorded.kept:
        for entry in recorded.row.body.get("files", []) if recorded.row else []:
            entries[os.path.join(entry["root"], entry["path"])] = entry
    else:
        entries = {c.path: None for c in tracked.changes.changes()}
    named: set[str] = set()
    for path, entry in entries.items():
        if any(path == h or path.startswith(h + "/") for h in away):
            continue
        for name in _names(path, spelled):
            if (state := read.get(name)) is not None and _differs(
                path, entry, state, tracked.roots, tracked.identity
            ):
                named.add(name)
    if not tracked.changes.complete:  # a lower bound: what the read state says on top
        named |= changed_since_read(read, tracked.roots, tracked.identity)
    return named


def changed_since_read(
    read: Mapping[str, FileState], roots: list[str], identity: FsIdentity | None
) -> set[str]:
    """Read files below `roots` whose content is no longer what the model read."""
    out: set[str] = set()
    real = [os.path.realpath(r) for r in roots]
    for name in list(read)[:LOOKED_AT]:
        state = read[name]
        path = os.path.realpath(name)
        if _split(path, real) is None:
            continue
        try:
            st = os.stat(path)
        except OSError:
            out.add(name)
            continue
        if (st.st_mtime_ns, st.st_size) != (state.mtime_ns, state.size) and _differs(
            path, None, state, real, identity
        ):
            out.add(name)
    return out


def _differs(
    path: str,
    entry: dict[str, Any] | None,
    state: FileState,
    roots: list[str],
    identity: FsIdentity | None,
) -> bool:
    """Whether `path` now holds other content than the model read: from its checkpoint
    entry's image after the run, else looked at (as the session's identity)."""
    if entry is not None:
        after = entry["after"]
        if after["kind"] == images.FILE and after.get("blob"):
            return bool(after["blob"] != state.content_hash)
        return True  # gone, a link or directory now, or too large to know: changed
    where = _split(path, roots)
    if where is None:
        return True
    image, data = images.look(*where, identity, state.size)
    if image["kind"] != images.FILE or data is None:
        return True
    return Blobs.digest(data) != state.content_hash


def _spellings(session_roots: list[str]) -> list[tuple[str, str]]:
    """(real root, root as the session spells it): the read state keeps the session's
    spelling, the change set the real path."""
    return [
        (os.path.realpath(r).rstrip("/"), os.path.normpath(r).rstrip("/")) for r in session_roots
    ]


def _names(path: str, spelled: list[tuple[str, str]]) -> set[str]:
    names = {path}
    for real, spelling in spelled:
        if path.startswith(real + "/"):
            names.add(spelling + path[len(real) :])
    return names


def _held_paths(held: list[Held]) -> set[str]:
    out: set[str] = set()
    for item in held:
        out.add(item.path)
        if item.moved_to:
            out.add(os.path.join(item.root, item.moved_to))
    return out


def _split(path: str, roots: Iterable[str]) -> tuple[str, str] | None:
    for root in sorted(roots, key=len, reverse=True):
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix):
            return root, path[len(prefix) :]
    return None
