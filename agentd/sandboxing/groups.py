"""Each session's control group: what all of a session's processes may use together.

One group per session, `<parent>/agentd-<key>/<session id>` in each hierarchy
(agentd_sandbox.cgroups), with the session's memory (tmpfs pages its commands write
included), process count and CPU weight. Every sandbox started for the session (Bash
calls, background tasks, hooks, searches) and every unsandboxed command joins it
before its first instruction. `<key>` is derived from the state dir, so the next daemon
on the same state finds the same groups and keeps using them for the tasks it takes
over; the parent is the cgroup the daemon runs in (a systemd unit's delegated cgroup)
unless `cgroup_parent` names one.

A group is made at the session's first start, removed (what is left in it killed) when
the session closes, and at the daemon's stop when nothing runs in it (it is made again
when needed). At start, the groups of sessions that are no longer open are removed.
Without a usable hierarchy (no cgroup mounted writable here, `session_cgroups = "off"`)
there are none, and the per-process rlimits `bash_memory_bytes` and `bash_processes`
apply instead; each controller missing from the hierarchy falls back the same way.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from typing import Any

from agentd.foundation.config import Config
from agentd_sandbox import cgroups

log = logging.getLogger(__name__)

_SESSION_ID = re.compile(r"[0-9a-f]{32}")


class SessionGroups:
    """The daemon's tree of session groups, or none when this machine offers no cgroup."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.tree: cgroups.Tree | None = None
        self.problems: list[str] = []
        self._made: set[str] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        """Find the hierarchy and set our tree up in it; before the daemon forks anything
        (on cgroup v2 it may move itself into a leaf). `say` logs what holds, once the
        daemon serves (a daemon that cannot start prints one line only)."""
        hierarchy = cgroups.detect(self.config.session_cgroups, self.config.cgroup_parent or None)
        if hierarchy is None:
            if self.config.session_cgroups != "off":
                self.problems = [
                    "no control group hierarchy agentd may write here: sessions' limits are "
                    "per process (rlimits); run agentd as root, or give it a delegated "
                    "cgroup v2 (systemd: Delegate=yes)"
                ]
            return
        tree = cgroups.Tree(hierarchy, tree_name(self.config.state_dir))
        try:
            self.problems = tree.setup()
        except OSError as exc:
            self.problems = [f"cannot make agentd's control groups ({exc}): limits are per process"]
            return
        self.tree = tree

    def say(self) -> None:
        """One log line on how sessions are limited here, and one per problem met."""
        for problem in self.problems:
            log.warning("control groups: %s", problem)
        if self.tree is not None:
            used = ", ".join(sorted(self.controllers)) or "none (placement only)"
            log.info(
                "sessions' control groups: cgroup v%d under %s (controllers: %s)",
                self.tree.hierarchy.version,
                " ".join(self.tree.paths),
                used,
            )

    @property
    def controllers(self) -> frozenset[str]:
        """What the groups limit; the rest falls back to rlimits."""
        return self.tree.hierarchy.controllers if self.tree else frozenset()

    def limits(self) -> cgroups.GroupLimits:
        c = self.config
        return cgroups.GroupLimits(
            memory_bytes=c.session_memory_bytes,
            processes=c.session_processes,
            cpu_weight=c.session_cpu_weight,
        )

    def join(self, session_id: str) -> list[str]:
        """The cgroup.procs files a start for `session_id` joins (the group made now if
        it is missing); [] without groups. Raises OSError if the group cannot be made."""
        if self.tree is None:
            return []
        group = self._group(session_id)
        with self._lock:
            if session_id not in self._made or not group.exists():
                group.create(self.limits())
                self._made.add(session_id)
        return group.procs_files

    def release(self, session_id: str) -> None:
        """Kill what is left in the session's group and remove it (its session closed)."""
        if self.tree is None:
            return
        with self._lock:
            self._made.discard(session_id)
        if not self._group(session_id).remove():
            log.warning("cannot remove the control group of session %s", session_id)

    def sweep(self, is_open: Any, known_closed: Any) -> tuple[int, list[str]]:
        """At start: remove the groups of sessions the database knows closed (closed or
        reaped while no daemon ran, or left by a crash); a group of a session it does
        not know is left as it is, with what runs in it. (removed, those left)."""
        if self.tree is None:
            return 0, []
        removed, unknown = 0, []
        for name in sorted(self.tree.names()):
            if not _SESSION_ID.fullmatch(name) or is_open(name):
                continue
            if known_closed(name):
                removed += self._group(name).remove()
            else:
                unknown.append(name)
        return removed, unknown

    def close(self, keep: Any = lambda _: False) -> None:
        """At the daemon's stop: remove the groups nothing runs in (the tasks left
        running keep theirs, for the next daemon), but those `keep` names (of sessions
        the database does not know: a start-up sweep left them)."""
        if self.tree is None:
            return
        for name in self.tree.names():
            if _SESSION_ID.fullmatch(name) and not keep(name):
                group = self._group(name)
                if not group.pids():
                    group.remove()
        self.tree.remove_if_empty()

    def where(self) -> str:
        """The tree's directories, for a log line ("" without groups)."""
        return " ".join(self.tree.paths) if self.tree is not None else ""

    def report(self) -> dict[str, Any]:
        """For `agentctl status --json`: how sessions are limited here."""
        if self.tree is None:
            return {"mode": "rlimit"}
        h = self.tree.hierarchy
        return {
            "mode": f"cgroup{h.version}",
            "controllers": sorted(h.controllers),
            "paths": list(self.tree.paths),
            "memory_bytes": self.config.session_memory_bytes,
            "processes": self.config.session_processes,
            "cpu_weight": self.config.session_cpu_weight,
        }

    def _group(self, session_id: str) -> cgroups.Group:
        if not _SESSION_ID.fullmatch(session_id):
            raise ValueError(f"not a session id: {session_id!r}")
        assert self.tree is not None
        return self.tree.group(session_id)


def tree_name(state_dir: str) -> str:
    """The tree's name: the same for every daemon of one state dir, another for others."""
    return "agentd-" + hashlib.sha256(state_dir.encode()).hexdigest()[:16]
