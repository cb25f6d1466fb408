"""Where this machine's control groups are, and which of them this process may use.

Two layouts exist: cgroup v2 (one hierarchy, `0::/path` in /proc/self/cgroup) and
cgroup v1 (one hierarchy per controller, each mounted on its own; hybrid machines have
both, with the controllers bound to v1). A controller is bound to exactly one of them,
so the layout is chosen by where `memory` and `pids` are. The parent of every group we
make is the cgroup this process already runs in, in each hierarchy (systemd's
"delegated subtree": Delegate=yes gives the unit's own cgroup), or one configured.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..mountinfo import MOUNTS

# What a session's group limits, in the order they matter.
CONTROLLERS = ("memory", "pids", "cpu")
# The controllers without which a group limits nothing worth having.
ESSENTIAL = frozenset({"memory", "pids"})


@dataclass(frozen=True)
class Hierarchy:
    """Where groups are made: `dirs` maps each controller used to the parent directory of
    our groups in its hierarchy (v2: the same directory for all). `placement` is the
    directory a process must join in a hierarchy that has no controller we use (v2
    without memory or pids still gives a group to kill and to count)."""

    version: int
    dirs: dict[str, str] = field(default_factory=dict)
    placement: str | None = None

    @property
    def controllers(self) -> frozenset[str]:
        return frozenset(self.dirs)

    def parents(self) -> list[str]:
        """Each distinct parent directory (one per v1 hierarchy; one for v2)."""
        found = list(dict.fromkeys(self.dirs.values()))
        if not found and self.placement:
            found = [self.placement]
        return found


@dataclass(frozen=True)
class _Mount:
    point: str
    root: str
    version: int
    controllers: frozenset[str]


def _mounts(mountinfo: str | None = None) -> list[_Mount]:
    """The cgroup mounts of `mountinfo` (default: this process's, read again only when
    the mount table changed: mountinfo.MOUNTS)."""
    global _parsed
    try:
        if mountinfo is None:
            text = MOUNTS.text()
            if _parsed is not None and _parsed[0] is text:
                return list(_parsed[1])
        else:
            with open(mountinfo) as f:
                text = f.read()
    except OSError:
        return []
    found = _parse(text)
    if mountinfo is None:
        _parsed = (text, tuple(found))
    return found


# The last mount table read (mountinfo.MOUNTS) and its cgroup mounts.
_parsed: tuple[str, tuple[_Mount, ...]] | None = None


def _parse(text: str) -> list[_Mount]:
    found = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        if not sep:
            continue
        fields = head.split()
        fstype, _source, options = (tail.split() + ["", "", ""])[:3]
        if fstype == "cgroup2":
            found.append(_Mount(_unescape(fields[4]), fields[3], 2, frozenset()))
        elif fstype == "cgroup":
            names = frozenset(o for o in options.split(",") if o in CONTROLLERS)
            found.append(_Mount(_unescape(fields[4]), fields[3], 1, names))
    return found


def _unescape(path: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        path = path.replace(code, char)
    return path


def _own_paths(proc_cgroup: str = "/proc/self/cgroup") -> tuple[str | None, dict[str, str]]:
    """(the v2 path, {v1 controller: path}) of this process."""
    v2: str | None = None
    v1: dict[str, str] = {}
    try:
        with open(proc_cgroup) as f:
            lines = f.read().splitlines()
    except OSError:
        return None, {}
    for line in lines:
        _hid, names, path = (line.split(":", 2) + ["", ""])[:3]
        if names == "":
            v2 = path
        for name in names.split(","):
            if name in CONTROLLERS:
                v1[name] = path
    return v2, v1


def _dir_of(mount: _Mount, path: str) -> str | None:
    """The directory of cgroup `path` under `mount`, or None if the mount does not show it
    (a mount of a subtree that does not hold `path`)."""
    root = mount.root.rstrip("/")
    if root and path != root and not path.startswith(root + "/"):
        return None
    inner = path[len(root) :].strip("/")
    return os.path.join(mount.point, inner) if inner else mount.point


def _v2_available(directory: str) -> frozenset[str]:
    try:
        with open(os.path.join(directory, "cgroup.controllers")) as f:
            return frozenset(f.read().split()) & frozenset(CONTROLLERS)
    except OSError:
        return frozenset()


def _writable(directory: str) -> bool:
    return os.path.isdir(directory) and os.access(directory, os.W_OK | os.X_OK)


def v2(parent: str | None = None) -> Hierarchy | None:
    """The v2 hierarchy under `parent` (a path in the hierarchy, default our own
    cgroup's, or its parent when we already moved ourselves into its `daemon` leaf), if
    it is mounted and writable here."""
    own, _ = _own_paths()
    mount = next((m for m in _mounts() if m.version == 2), None)
    if mount is None or own is None:
        return None
    path = parent or own
    if parent is None and os.path.basename(path.rstrip("/")) == LEAF:
        path = os.path.dirname(path.rstrip("/")) or "/"
    directory = _dir_of(mount, path)
    if directory is None or not _writable(directory):
        return None
    used = {name: directory for name in _v2_available(directory)}
    return Hierarchy(2, used, directory)


def v1(parent: str | None = None) -> Hierarchy | None:
    """The v1 hierarchies of our controllers under `parent` (default: our own cgroup in
    each), those mounted and writable here; None if there is none."""
    _, own = _own_paths()
    dirs: dict[str, str] = {}
    for mount in _mounts():
        if mount.version != 1:
            continue
        for name in mount.controllers:
            path = parent or own.get(name)
            if path is None or name in dirs:
                continue
            directory = _dir_of(mount, path)
            if directory is not None and _writable(directory):
                dirs[name] = directory
    return Hierarchy(1, dirs) if dirs else None


def detect(prefer: str = "auto", parent: str | None = None) -> Hierarchy | None:
    """The hierarchy to make groups in: `prefer` "v1" or "v2" forces one, "auto" takes
    the one holding more of memory and pids (v2 on a tie), "off" none."""
    if prefer == "off":
        return None
    if prefer == "v2":
        return v2(parent)
    if prefer == "v1":
        return v1(parent)
    two, one = v2(parent), v1(parent)
    score2 = len(two.controllers & ESSENTIAL) if two else -1
    score1 = len(one.controllers & ESSENTIAL) if one else -1
    if max(score1, score2) <= 0:
        return None  # a group that limits nothing is not worth a start's cost
    return two if score2 >= score1 else one


# The leaf a v2 daemon moves itself into, so that its own cgroup may hand controllers
# down (cgroup v2 forbids processes in a cgroup whose children get controllers).
LEAF = "daemon"


def mount_points() -> list[str]:
    """Where each cgroup hierarchy (v1 of any controller, or v2) is mounted here."""
    return [m.point for m in _mounts()]
