"""What the tracker knows of a root's code-bearing files beyond their names: which file
each one *is* (device, inode), which of them a sandboxed process holds open for writing
or mapped shared, and which changes no event explains.

A file has as many names as links: a write through any of them changes the code-bearing
file, so a path an event names is matched to the baseline by identity as well as by
name. A write through a shared memory mapping raises no event at all, and a mapping
outlives the call that made it: a file open for writing, or mapped writable, by any
process of the session's sandbox identity counts as possibly changed until its last
close, and is compared by content, not by its stat.

A change to a code-bearing file that no event attributes to a known writer (the
person's own programs, seen by the host watch; the daemon's tools) is never taken as
the new known good: the old entry stays, and the path is a *suspect*, held at the next
hold. What a daemon restart, lost events or a writer that left no event changed is
held, never adopted.
"""

from __future__ import annotations

import contextlib
import os
import stat

from agentd.changes import files
from agentd.changes.walk import Baseline

# Notes a person reads on a held change that no run's event explains.
UNSEEN = (
    "it changed with no event naming who wrote it "
    "(a memory mapping, another name of the file, or events lost)"
)
WHILE_AWAY = (
    "it changed while agentd was not watching "
    "(a task that ran while the daemon was stopped, or an edit then)"
)


def by_identity(baseline: Baseline) -> dict[tuple[int, int], str]:
    """(device, inode) -> the code-bearing file's path below the root."""
    out: dict[tuple[int, int], str] = {}
    for rel, entry in baseline.entries.items():
        if entry.kind == files.FILE and len(entry.key) >= 2:
            out[(entry.key[0], entry.key[1])] = rel
    return out


def identity_of(path: str) -> tuple[int, int] | None:
    """(device, inode) of a regular file at `path`, never through a symlink."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def open_for_writing(uid: int | None) -> set[tuple[int, int]]:
    """(device, inode) of every file a process of `uid` (the sandbox identity) holds open
    for writing or has mapped shared and writable. None: no identity, nothing is known
    to be held open (the daemon's own runs without one are not followed this way)."""
    found: set[tuple[int, int]] = set()
    if uid is None:
        return found
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        base = f"/proc/{pid}"
        try:
            if os.stat(base).st_uid != uid:
                continue
        except OSError:
            continue
        _writable_fds(base, found)
        _shared_maps(base, found)
    return found


def _writable_fds(base: str, found: set[tuple[int, int]]) -> None:
    """A descriptor's link in /proc/PID/fd carries its open mode in its own mode bits
    (owner write: open for writing): one lstat per descriptor, a stat per writable one."""
    try:
        fds = os.listdir(f"{base}/fd")
    except OSError:
        return
    for fd in fds:
        link = f"{base}/fd/{fd}"
        try:
            if not os.lstat(link).st_mode & stat.S_IWUSR:
                continue
            st = os.stat(link)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.add((st.st_dev, st.st_ino))


def _shared_maps(base: str, found: set[tuple[int, int]]) -> None:
    """Shared writable mappings of files (`rw-s` in /proc/PID/maps: dev major:minor, inode)."""
    try:
        with open(f"{base}/maps", "rb") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 5 or len(parts[1]) < 4 or parts[1][1:2] != b"w" or parts[1][3:4] != b"s":
            continue
        with contextlib.suppress(ValueError):
            major, minor = (int(x, 16) for x in parts[3].split(b":"))
            inode = int(parts[4])
            if inode:
                found.add((os.makedev(major, minor), inode))


def settle(
    old: Baseline,
    fresh: Baseline,
    attributed: set[str],
    skip: set[str],
    note: str,
    *,
    new_too: bool,
) -> None:
    """Keep in `fresh` the old entry of every code-bearing file that differs from `old`
    without an event explaining it (not in `attributed`; `skip` is what running commands
    touched, left as it is), and make it a suspect with `note`. `new_too`: files that
    did not exist in `old` count as well (after lost events or a restart; else a new
    file was made by a call, whose own events judged it, or by the person). Suspects
    not yet held stay suspects."""
    for rel, why in old.suspects.items():
        fresh.suspects.setdefault(rel, why)
    for rel in set(old.entries) | (set(fresh.entries) if new_too else set()):
        if rel in attributed or rel in skip:
            continue
        before, now = old.entries.get(rel), fresh.entries.get(rel)
        if before is not None and before.same(now):
            continue
        fresh.forget(rel)
        if before is not None:
            fresh.record(rel, before, old.reasons.get(rel, ""))
        fresh.suspects.setdefault(rel, note)


def restated(baseline: Baseline, unsure: set[tuple[int, int]]) -> set[str]:
    """Known code-bearing files whose stat differs from their entry (or that are gone),
    and those open for writing (`unsure`): what changed without an event naming it, a
    write through another name or a mapping among them. A stat each."""
    out: set[str] = set()
    for rel, entry in baseline.entries.items():
        if tuple(entry.key[:2]) in unsure:
            out.add(rel)
            continue
        try:
            with files.parent_of(baseline.root, rel) as fd:
                st = os.stat(os.path.basename(rel), dir_fd=fd, follow_symlinks=False)
        except OSError:
            out.add(rel)
            continue
        if files.stat_key(st) != entry.key:
            out.add(rel)
    return out
