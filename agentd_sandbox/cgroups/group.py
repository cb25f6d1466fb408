"""A control group across the hierarchies of a `Hierarchy`: made, limited, joined,
emptied and removed.

Nothing here reads what a sandboxed process could write: the files read are the
kernel's (cgroup.procs, subtree_control), in directories only root (or the delegated
owner) may write, and the sandbox never sees them (bwrap hides every cgroup mount).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import signal
import time
from dataclasses import dataclass

from .. import binaries
from .hierarchy import LEAF, Hierarchy

# The join step in front of a sandbox's chain: the shell writes 0 ("this process") into
# each cgroup.procs given before `--`, then execs the rest, so the chain is in the
# group before its first instruction; a failed write ends it before anything runs.
_JOIN = (
    'while [ "$1" != -- ]; do echo 0 >"$1" || '
    '{ echo "agentd: cannot join the session\'s control group" >&2; exit 125; }; '
    'shift; done; shift; exec "$@"'
)
JOIN_EXIT = 125
# v1 cpu.shares per unit of v2 cpu.weight (1024 and 100 are each one's default).
_SHARES_PER_WEIGHT = 1024 / 100
# Rounds of SIGKILL a v1 group (no cgroup.kill) gets before we give up on emptying it.
_KILL_ROUNDS = 100


@dataclass(frozen=True)
class GroupLimits:
    """What one group may use in all; None: no limit of that kind."""

    memory_bytes: int | None = None
    processes: int | None = None
    # cgroup v2's cpu.weight scale (1-10000, default 100); v1 gets cpu.shares.
    cpu_weight: int | None = None


def join_prefix(procs_files: list[str] | tuple[str, ...]) -> list[str]:
    """argv prefix that moves itself into the groups whose cgroup.procs are given, then
    execs what follows; [] for none."""
    if not procs_files:
        return []
    sh = binaries.find("sh") or "/bin/sh"
    return [sh, "-c", _JOIN, "agentd-join", *procs_files, "--"]


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


class Group:
    """One group: the same name under each parent directory of the hierarchy."""

    def __init__(self, hierarchy: Hierarchy, relative: str) -> None:
        self.hierarchy = hierarchy
        self.relative = relative
        self.dirs = {name: os.path.join(d, relative) for name, d in hierarchy.dirs.items()}
        self.paths = [os.path.join(p, relative) for p in hierarchy.parents()]

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(p, "cgroup.procs") for p in self.paths]

    def exists(self) -> bool:
        return all(os.path.isdir(p) for p in self.paths)

    def create(self, limits: GroupLimits) -> None:
        """Make the group where it is missing and (re)apply `limits`; OSError if the
        kernel refuses."""
        for path in self.paths:
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o755)
        self.apply(limits)

    def apply(self, limits: GroupLimits) -> None:
        v2 = self.hierarchy.version == 2
        memory = self.dirs.get("memory")
        if memory is not None and limits.memory_bytes is not None:
            size = str(limits.memory_bytes)
            if v2:
                _write(os.path.join(memory, "memory.max"), size)
                # No swap either: what is over the limit is reclaimed or killed, not paged out.
                with contextlib.suppress(FileNotFoundError):
                    _write(os.path.join(memory, "memory.swap.max"), "0")
            else:
                _write(os.path.join(memory, "memory.limit_in_bytes"), size)
                with contextlib.suppress(FileNotFoundError):  # no swap accounting
                    _write(os.path.join(memory, "memory.memsw.limit_in_bytes"), size)
        pids = self.dirs.get("pids")
        if pids is not None and limits.processes is not None:
            _write(os.path.join(pids, "pids.max"), str(limits.processes))
        cpu = self.dirs.get("cpu")
        if cpu is not None and limits.cpu_weight is not None:
            if v2:
                _write(os.path.join(cpu, "cpu.weight"), str(limits.cpu_weight))
            else:
                shares = max(2, round(limits.cpu_weight * _SHARES_PER_WEIGHT))
                _write(os.path.join(cpu, "cpu.shares"), str(shares))

    def pids(self) -> set[int]:
        """Every process in the group (in any of its hierarchies)."""
        found: set[int] = set()
        for path in self.paths:
            text = _read(os.path.join(path, "cgroup.procs")) or ""
            found.update(int(p) for p in text.split() if p.isdigit())
        return found

    def kill(self) -> bool:
        """SIGKILL everything in the group; True once it is empty. cgroup v2's
        cgroup.kill does it at once; v1 is killed round by round (what forks meanwhile
        is bounded by pids.max and caught in the next round)."""
        kill_file = os.path.join(self.paths[0], "cgroup.kill")
        if self.hierarchy.version == 2 and os.path.exists(kill_file):
            with contextlib.suppress(OSError):
                _write(kill_file, "1")
        for _ in range(_KILL_ROUNDS):
            found = self.pids()
            if not found:
                return True
            for pid in found:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)  # the killed leave the group as they are reaped
        return not self.pids()

    def remove(self) -> bool:
        """Remove the group (killing what is left in it); True if it is gone."""
        if self.pids() and not self.kill():
            return False
        gone = True
        for path in self.paths:
            for _ in range(_KILL_ROUNDS):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    # EBUSY: a killed process not reaped yet still counts for a moment.
                    if exc.errno != errno.EBUSY:
                        gone = False
                        break
                    time.sleep(0.01)
            else:
                gone = False
        return gone


class Tree:
    """The groups of one owner (a daemon), in `<parent>/<name>/` of each hierarchy."""

    def __init__(self, hierarchy: Hierarchy, name: str) -> None:
        self.hierarchy = hierarchy
        self.name = name
        self.paths = [os.path.join(p, name) for p in hierarchy.parents()]

    def setup(self) -> list[str]:
        """Make the tree's directories and, on v2, hand our controllers down to it;
        the problems met, one line each (the controllers that could not be used are
        dropped from `hierarchy`)."""
        problems: list[str] = []
        if self.hierarchy.version == 2:
            problems += self._hand_down()
        for path in self.paths:
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o755)
        if self.hierarchy.version == 2 and self.hierarchy.dirs:
            _enable(self.paths[0], self.hierarchy.controllers)
        return problems

    def _hand_down(self) -> list[str]:
        """v2: enable our controllers in the parent's subtree_control. A cgroup that
        hands controllers down may hold no process, so if the parent holds us (a
        delegated unit's cgroup), we move into its `daemon` leaf first."""
        parent = self.hierarchy.placement
        assert parent is not None
        wanted = self.hierarchy.controllers
        if not wanted:
            return []
        try:
            _enable(parent, wanted)
            return []
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return self._give_up(f"cannot enable {' '.join(sorted(wanted))} in {parent}: {exc}")
        leaf = os.path.join(parent, LEAF)
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(leaf, 0o755)
            _write(os.path.join(leaf, "cgroup.procs"), str(os.getpid()))
            _enable(parent, wanted)
        except OSError as exc:
            return self._give_up(
                f"{parent} holds processes other than agentd, so it cannot hand controllers "
                f"down ({exc}); give agentd a cgroup of its own (systemd: Delegate=yes)"
            )
        return []

    def _give_up(self, why: str) -> list[str]:
        self.hierarchy = dataclasses.replace(self.hierarchy, dirs={})
        return [why]

    def group(self, name: str) -> Group:
        return Group(self.hierarchy, os.path.join(self.name, name))

    def names(self) -> list[str]:
        """The groups in the tree now (of any hierarchy)."""
        found: set[str] = set()
        for path in self.paths:
            with contextlib.suppress(OSError):
                found.update(e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False))
        return sorted(found)

    def remove_if_empty(self) -> None:
        for path in self.paths:
            with contextlib.suppress(OSError):
                os.rmdir(path)


def _enable(directory: str, controllers: frozenset[str]) -> None:
    """Turn `controllers` on in `directory`'s cgroup.subtree_control (those already on stay)."""
    current = set((_read(os.path.join(directory, "cgroup.subtree_control")) or "").split())
    missing = sorted(controllers - current)
    if missing:
        _write(
            os.path.join(directory, "cgroup.subtree_control"), " ".join(f"+{c}" for c in missing)
        )
