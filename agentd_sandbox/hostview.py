"""What a sandbox start looks up about the host (visibility.py: the homes, the allow-list
and the credentials found in them, the endpoint dirs; the cgroup mounts), kept between
starts while what it rests on is unchanged: these lookups walk tens of paths with a
realpath each, several milliseconds per start on a busy machine.

An answer is kept with a stamp of every directory it looked in and of every directory
on the way to each path it looked for (device, inode, mode, modification and change
times), and of /etc/passwd (the homes). A name made, removed, renamed or replaced in
one of them changes its times; a directory moved, or a mount over it, changes its device
or inode; a chmod changes its change time; so stamps that still match say the answer
still holds. Two changes in one tick of the file system's clock look alike, so an answer
whose stamps changed within RACY_SECONDS of its walk is not kept (as git treats a racily
clean index; agentd/runs/plans.py does the same). The cgroup mounts are read again when
the kernel says the mount table changed (mountinfo.py). The host's unix sockets
(/proc/net/unix) come and go all the time, and a policy's own hidden paths (the daemon's
state, often under a busy /tmp) are few: both are looked up at each start.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from . import visibility
from .identity import Identity, home_of

RACY_SECONDS = 1.0
# Where homes are listed and found, besides the homes themselves (and `~`).
PASSWD_PLACES: tuple[str, ...] = ("/etc/passwd", "/home", "/root")
# Answers kept (identities x allow-lists), least recently used dropped.
MAX_ENTRIES = 64

Stamp = tuple[int, int, int, int, int] | None


@dataclass(frozen=True)
class HostView:
    """visibility's answers for one identity, allow-list and hidden list."""

    dirs: tuple[str, ...]  # home_dirs
    homes: tuple[str, ...]  # user_homes
    endpoints: tuple[str, ...]  # endpoint_dirs
    allowed: tuple[str, ...]  # allowed_home_paths
    kept: tuple[str, ...]  # kept_targets of the covered dirs
    secrets: tuple[str, ...]  # secret_paths, but for a policy's own hidden paths

    @property
    def covered(self) -> list[str]:
        """What the sandbox covers with an empty tmpfs: /tmp, the endpoint dirs, the homes."""
        return ["/tmp", *self.endpoints, *self.dirs]


def stamp(path: str) -> Stamp:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mode, st.st_mtime_ns, st.st_ctime_ns)


def _ancestors(path: str, into: set[str]) -> None:
    """Every directory on the way to `path`, "/" included."""
    parent = os.path.dirname(os.path.abspath(path))
    while parent not in into:
        into.add(parent)
        if parent == "/":
            return
        parent = os.path.dirname(parent)


def compute(identity: Identity, allow: tuple[str, ...]) -> HostView:
    """The answers, looked up now."""
    dirs = visibility.home_dirs(identity)
    homes = visibility.user_homes(identity, dirs)
    endpoints = visibility.endpoint_dirs()
    covered = ["/tmp", *endpoints, *dirs]
    return HostView(
        dirs=tuple(dirs),
        homes=tuple(homes),
        endpoints=tuple(endpoints),
        allowed=tuple(visibility.allowed_home_paths(identity, allow, homes)),
        kept=tuple(visibility.kept_targets(covered)),
        secrets=tuple(visibility.secret_paths(identity, [], homes)),
    )


def _looked_at(view: HostView, identity: Identity, allow: tuple[str, ...]) -> list[str]:
    """Every directory whose change could change `view`: the ways to every candidate
    (a name made, removed or replaced changes its directory; a chmod on the way changes
    who can reach it), and to where each link among them points; the homes and what
    lists them (/home, the passwd file), the passwd homes of the daemon and the
    identity even where they are missing."""
    passwd = (home_of(os.geteuid()), home_of(identity.uid))
    found: set[str] = {*PASSWD_PLACES, os.path.expanduser("~"), *(h for h in passwd if h)}
    found.update(view.dirs, view.homes, view.endpoints)
    candidates = [e for e in allow if os.path.isabs(e)]
    for home in view.homes:
        candidates += [os.path.join(home, e) for e in allow if not os.path.isabs(e)]
        candidates += [os.path.join(home, e) for e in visibility.SECRET_HOME_ENTRIES]
    candidates += [*visibility.SECRET_PATHS, *visibility.ENDPOINT_DIRS]
    candidates += visibility.KEEP_TARGETS
    candidates += [os.path.realpath(p) for p in candidates if os.path.islink(p)]
    candidates += [*view.allowed, *view.kept, *view.secrets]
    ways: set[str] = set()
    for path in [*candidates, *found]:
        _ancestors(path, ways)
    return sorted(found | ways)


@dataclass(frozen=True)
class _Kept:
    view: HostView
    stamps: tuple[tuple[str, Stamp], ...]


class HostViews:
    """HostView by (identity, allow-list, euid, the home $HOME names), each kept while
    its stamps hold. Thread-safe: starts are planned on worker threads."""

    def __init__(
        self,
        racy_seconds: float = RACY_SECONDS,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self._racy_ns = int(racy_seconds * 1e9)
        self._max = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[object, ...], _Kept] = OrderedDict()
        self.computed = 0
        self.reused = 0

    def get(self, identity: Identity, allow: tuple[str, ...]) -> HostView:
        key = (identity, allow, os.geteuid(), os.path.expanduser("~"))
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and all(stamp(p) == s for p, s in kept.stamps):
            with self._lock:
                if key in self._kept:
                    self._kept.move_to_end(key)
                self.reused += 1
            return kept.view
        began = self._clock()
        view = compute(identity, allow)
        stamps = tuple((p, stamp(p)) for p in _looked_at(view, identity, allow))
        with self._lock:
            self.computed += 1
            if all(s is None or max(s[3], s[4]) < began - self._racy_ns for _, s in stamps):
                self._kept[key] = _Kept(view, stamps)
                self._kept.move_to_end(key)
                if len(self._kept) > self._max:
                    self._kept.popitem(last=False)
            else:
                self._kept.pop(key, None)
        return view

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


# The process's own: every start in it asks this one.
VIEWS = HostViews()
