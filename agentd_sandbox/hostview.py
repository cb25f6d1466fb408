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
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import visibility
from .identity import Identity, home_of
from .stamped import RACY_SECONDS, StampedCache

# Where homes are listed and found, besides the homes themselves (and `~`).
PASSWD_PLACES: tuple[str, ...] = ("/etc/passwd", "/home", "/root")
# Answers kept (identities x allow-lists), least recently used dropped.
MAX_ENTRIES = 64


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


def _ancestors(path: str, into: set[str]) -> None:
    """Every directory on the way to `path`, "/" included."""
    parent = os.path.dirname(os.path.abspath(path))
    while parent not in into:
        into.add(parent)
        if parent == "/":
            return
        parent = os.path.dirname(parent)


def compute_view(identity: Identity, allow: tuple[str, ...]) -> HostView:
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


class HostViews:
    """HostView by (identity, allow-list, euid, the home $HOME names), each kept while
    its stamps hold (stamped.py)."""

    def __init__(
        self,
        racy_seconds: float = RACY_SECONDS,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self._cache: StampedCache[HostView] = StampedCache(max_entries, racy_seconds, clock)

    @property
    def computed(self) -> int:
        return self._cache.computed

    @property
    def reused(self) -> int:
        return self._cache.reused

    def get(self, identity: Identity, allow: tuple[str, ...]) -> HostView:
        def compute() -> tuple[HostView, list[str]]:
            view = compute_view(identity, allow)
            return view, _looked_at(view, identity, allow)

        key = (identity, allow, os.geteuid(), os.path.expanduser("~"))
        return self._cache.get(key, compute)

    def clear(self) -> None:
        self._cache.clear()


# The process's own: every start in it asks this one.
VIEWS = HostViews()
