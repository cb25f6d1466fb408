"""Answers kept while the directories they rest on are unchanged: each answer is stored
with the stamps (device, inode, mode, mtime, ctime) of the paths it looked at, reused
while every stamp holds, and not kept at all when one of them changed within a clock
tick or so of the computation (a change in the same tick would leave the stamp as it
was). The least recently used go first past a bound. Thread-safe: starts are planned
on worker threads. The sandbox's host view (hostview.py) and the daemon's protected
paths per root (agentd/runs/plans.py) are kept so."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V")

# Changes this close to a computation may share a file system clock tick with it.
RACY_SECONDS = 1.0

Stamp = tuple[int, int, int, int, int] | None


def stamp(path: str) -> Stamp:
    """What says a directory is unchanged (None: nothing at `path`)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mode, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(frozen=True)
class _Kept(Generic[V]):
    value: V
    stamps: tuple[tuple[str, Stamp], ...]


class StampedCache(Generic[V]):
    def __init__(
        self,
        max_entries: int,
        racy_seconds: float = RACY_SECONDS,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self._racy_ns = int(racy_seconds * 1e9)
        self._max = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: OrderedDict[Hashable, _Kept[V]] = OrderedDict()
        # How often an answer was computed, and how often one kept was used.
        self.computed = 0
        self.reused = 0

    def get(self, key: Hashable, compute: Callable[[], tuple[V, Iterable[str]]]) -> V:
        """The answer kept for `key` while its stamps hold; else `compute()`'s, which
        gives the answer and the paths it rests on."""
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and all(stamp(p) == s for p, s in kept.stamps):
            with self._lock:
                if key in self._kept:
                    self._kept.move_to_end(key)
                self.reused += 1
            return kept.value
        began = self._clock()
        value, rests_on = compute()
        stamps = tuple((p, stamp(p)) for p in rests_on)
        with self._lock:
            self.computed += 1
            if all(s is None or max(s[3], s[4]) < began - self._racy_ns for _, s in stamps):
                self._kept[key] = _Kept(value, stamps)
                self._kept.move_to_end(key)
                if len(self._kept) > self._max:
                    self._kept.popitem(last=False)
            else:
                self._kept.pop(key, None)
        return value

    def forget(self, which: Callable[[Hashable], bool]) -> None:
        with self._lock:
            for key in [k for k in self._kept if which(k)]:
                del self._kept[key]

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
