"""One tracked run: its fanotify group (handed to its shim's reader), its change log in the
daemon's private state dir, and the change set read from that log so far."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field

from agentd.changes import fanotify
from agentd.changes.changeset import ChangeSet
from agentd.changes.reader import LOG_CAP, Watch
from agentd.changes.resolve import Resolver
from agentd.fs.identity import FsIdentity

# Bytes read from a log per step (a task's log may grow to the reader's cap).
_READ = 4 * 1024 * 1024


@dataclass(frozen=True)
class Taken:
    """What a run changed since the last take, as one consistent snapshot."""

    touched: set[str]
    moves: list[tuple[str, str]]
    complete: bool  # no event was lost
    ended: bool  # the reader's end mark was the last record
    made_dirs: list[str]
    existed: dict[str, bool | None]  # for each touched path: did it exist before the run

    def existed_before(self, path: str) -> bool | None:
        return self.existed.get(path)


@dataclass
class Tracked:
    """A run whose changes are followed: `events` when its shim's reader writes its log,
    else (no root, no shim) its changes are found by a scan at the end."""

    id: str
    session_id: str
    roots: list[str]
    identity: FsIdentity | None
    log_path: str = ""
    group: int = -1
    log: int = -1
    events: bool = False
    log_cap: int = LOG_CAP
    changes: ChangeSet = field(init=False)
    started: float = field(default_factory=time.monotonic)
    _offset: int = 0
    _moves_seen: int = 0
    _resolver: Resolver | None = None
    # Held while the change set is read or changed: by worker threads only (collect can
    # take a while on a long log; the event loop must never wait for it).
    _reading: threading.Lock = field(default_factory=threading.Lock)
    # Guards the count of readers and the close: held for a few instructions, by anyone.
    # A close while a reader reads (another run's refresh looks at this one's log) is
    # left to the last reader: the log's descriptor is never closed, or reused, under it.
    _guard: threading.Lock = field(default_factory=threading.Lock)
    _readers: int = 0
    _closing: bool = False
    _keep_log: bool = False

    def __post_init__(self) -> None:
        self.changes = ChangeSet(list(self.roots))

    def watch(self) -> Watch | None:
        """What the shim's reader needs, or None when this run is not followed by events."""
        if self.group < 0 or self.log < 0:
            return None
        return Watch(self.group, self.log, self.log_cap)

    def handed_over(self) -> None:
        """A shim took the fds: its reader writes the log from now on."""
        self.events = True

    def release_group(self) -> None:
        """Once the run started for good: our copy of the group goes (held on, it would
        keep the group, and its queue, alive after the run's reader has ended)."""
        if self.group >= 0:
            os.close(self.group)
            self.group = -1

    def collect(self) -> bool:
        """Read what the log holds beyond what was read; whether anything new came.
        (A worker thread's job: it resolves handles, a system call per new directory.)"""
        if not self._enter():
            return False
        try:
            with self._reading:
                return self._collect()
        finally:
            self._leave()

    def _enter(self) -> bool:
        with self._guard:
            if self._closing:
                return False
            self._readers += 1
            return True

    def _leave(self) -> None:
        with self._guard:
            self._readers -= 1
            last = self._closing and self._readers == 0
        if last:
            self._close_now()

    def _collect(self) -> bool:
        if self.log < 0:
            return False
        if self._resolver is None:
            self._resolver = Resolver(self.roots)
        got = False
        while True:
            chunk = os.pread(self.log, _READ, self._offset)
            if not chunk:
                return got
            events, used = fanotify.parse(chunk)
            if used == 0:
                return got
            self._offset += used
            self.changes.add(events, self._resolver)
            got = True

    def take(self) -> Taken:
        """Read the log on, and take what changed since the last take (a worker
        thread's job)."""
        entered = self._enter()
        try:
            with self._reading:
                if self.events and entered:
                    self._collect()
                return self._take()
        finally:
            if entered:
                self._leave()

    def _take(self) -> Taken:
        changes = self.changes
        touched = changes.take_touched()
        moves = changes.moves[self._moves_seen :]
        self._moves_seen = len(changes.moves)
        existed = {p: changes.existed_before(p) for p in touched}
        return Taken(touched, moves, changes.complete, changes.ended, changes.made_dirs(), existed)

    def touched_paths(self) -> list[str]:
        """Every path the run touched so far, the log read on (a worker thread's job)."""
        entered = self._enter()
        try:
            with self._reading:
                if self.events and entered:
                    self._collect()
                return self.changes.paths()
        finally:
            if entered:
                self._leave()

    def close(self, *, keep_log: bool = False) -> None:
        """Let go of the run; its log goes too unless `keep_log` (a task that outlives
        this daemon: the next one reads on). While a worker reads the log, the last one
        to finish closes it."""
        with self._guard:
            if self._closing:
                return
            self._closing, self._keep_log = True, keep_log
            now = self._readers == 0
        if now:
            self._close_now()

    def _close_now(self) -> None:
        keep_log = self._keep_log
        for fd in (self.group, self.log):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.group = self.log = -1
        if self._resolver is not None:
            self._resolver.close()
            self._resolver = None
        if self.log_path and not keep_log:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.log_path)
