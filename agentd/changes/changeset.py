"""What one run changed: added, changed and deleted paths, built from its change log.

The log holds fanotify events of the run's own processes, in the order they happened.
Each names a directory (by handle) and an entry in it; a directory's handle is turned
into the path it has *now*, so events inside a directory renamed later land on its new
path, which is where the file is after the run. A directory deleted before the events
are read has no path any more: its path is learnt from the events themselves (the event
that created, renamed or deleted it carries its own handle), repeated until nothing new
is learnt.

A path's first event says whether it existed before the run (a create: no; a rename
onto it: unknown, it may have replaced a file), its last whether it exists after.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from agentd.changes import fanotify
from agentd.changes.fanotify import Event, Fid
from agentd.changes.resolve import Resolver

ADDED = "added"
CHANGED = "changed"
DELETED = "deleted"
REPLACED = "replaced"  # a file was renamed onto this name: it may not have existed before


@dataclass(frozen=True, slots=True)
class Change:
    """A path the run left different (absolute, as seen on the host)."""

    path: str
    kind: str  # ADDED, CHANGED, DELETED or REPLACED
    is_dir: bool


@dataclass
class _Path:
    before: bool | None  # existed before the run (None: unknown)
    after: bool
    is_dir: bool
    handle: Fid | None = None
    was_dir: bool | None = None  # its kind at its first event (a file may become a directory)


@dataclass
class ChangeSet:
    """Everything a run changed so far; `add` more events as they are read.

    `complete` is False once events were lost (a queue overflow, the log cap): the set
    is then a lower bound, and only a scan of the workspace can say the rest. `ended`:
    the last record read is the reader's end mark (every event of the run is in).
    """

    roots: list[str]
    complete: bool = True
    ended: bool = False
    moves: list[tuple[str, str]] = field(default_factory=list)  # directories: (from, to)
    unresolved: int = 0
    _paths: dict[str, _Path] = field(default_factory=dict)
    _touched: set[str] = field(default_factory=set)

    def add(self, events: list[Event], resolver: Resolver) -> None:
        """Take a batch of events (in order) from the run's log."""
        learnt: dict[Fid, str] = {}
        ops: list[tuple[str, str, bool, Fid | None]] = []
        pending: list[Event] = []
        for event in events:
            if event.marker:
                if event.marker == fanotify.MARK_LOST:
                    self.complete = False
                elif event.marker == fanotify.MARK_END:
                    self.ended = True
                continue
            self.ended = False  # an END of an earlier start of the same call is not the last
            pending.append(event)
            if event.mask & fanotify.FAN_RENAME and event.is_dir:
                resolver.forget()
        # Directories deleted meanwhile: their paths from the events that name them.
        for _ in range(8):
            known = len(learnt)
            for event in pending:
                for d, name in ((event.dir, event.name), (event.new_dir, event.new_name)):
                    if d is None or not name or event.obj is None or not event.is_dir:
                        continue
                    parent = learnt.get(d) or resolver.path(d)
                    if parent is not None:
                        learnt.setdefault(event.obj, os.path.join(parent, name))
            if len(learnt) == known:
                break

        def where(d: Fid | None, name: str) -> str | None:
            if d is None or not name:
                return None
            parent = resolver.path(d) or learnt.get(d)
            return os.path.join(parent, name) if parent is not None else None

        for event in pending:
            mask = event.mask
            if mask & fanotify.FAN_RENAME:
                old = where(event.old_dir, event.old_name)
                new = where(event.new_dir, event.new_name)
                if old is None or new is None:
                    self.unresolved += 1
                if old is not None:
                    ops.append(("from", old, event.is_dir, event.obj))
                if new is not None:
                    ops.append(("to", new, event.is_dir, event.obj))
                if event.is_dir and old is not None and new is not None:
                    self.moves.append((old, new))
                continue
            path = where(event.dir, event.name)
            if path is None:
                if event.dir is not None:
                    self.unresolved += 1
                continue
            if mask & fanotify.FAN_CREATE:
                ops.append(("create", path, event.is_dir, event.obj))
            if mask & (fanotify.FAN_MODIFY | fanotify.FAN_CLOSE_WRITE | fanotify.FAN_ATTRIB):
                ops.append(("write", path, event.is_dir, event.obj))
            if mask & fanotify.FAN_DELETE:
                ops.append(("delete", path, event.is_dir, event.obj))
        for op, path, is_dir, handle in ops:
            if not self._inside(path):
                continue
            self._touched.add(path)
            state = self._paths.get(path)
            if state is None:
                before: bool | None = {"create": False, "to": None}.get(op, True)
                state = self._paths[path] = _Path(before, True, is_dir, was_dir=is_dir)
            state.after = op not in ("delete", "from")
            state.is_dir = is_dir
            if handle is not None:
                state.handle = handle

    def _inside(self, path: str) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in self.roots)

    def changes(self) -> list[Change]:
        """The net changes, by path."""
        out: list[Change] = []
        for path, state in sorted(self._paths.items()):
            if state.before is False:
                kind = ADDED if state.after else None
            elif state.before is None:
                kind = REPLACED if state.after else DELETED
            else:
                kind = CHANGED if state.after else DELETED
            kind_kept = state.was_dir is None or state.was_dir == state.is_dir
            if kind is not None and not (state.is_dir and kind == CHANGED and kind_kept):
                out.append(Change(path, kind, state.is_dir))
        return out

    def take_touched(self) -> set[str]:
        """Paths with events since the last call (what a periodic check looks at)."""
        touched, self._touched = self._touched, set()
        return touched

    def paths(self) -> list[str]:
        """Every path the run has touched so far."""
        return list(self._paths)

    def made_dirs(self) -> list[str]:
        """Directories the run created that still exist."""
        return [p for p, s in self._paths.items() if s.is_dir and s.before is False and s.after]

    def existed_before(self, path: str) -> bool | None:
        state = self._paths.get(path)
        return None if state is None else state.before

    def handle(self, path: str) -> Fid | None:
        state = self._paths.get(path)
        return None if state is None else state.handle
