"""What a session's launches keep between commands: each workspace root's protected
paths (agentd/sandboxing/protected.py), the part of planning a Bash command that walks
the workspace, looked up again only when what it rests on changed.

A root's protection is an answer about the entries of a few directories (the root, its
.git, the git dirs inside it). It is kept with a stamp of each of them and of every
directory on the way to them from the root, the root itself included: device, inode,
mode, modification and change times. Any entry made, removed, renamed or replaced in
one of them changes its times; a directory moved, or another mounted in its place,
changes its device or inode; so a stamp that still matches says the answer still
holds. Change times cannot be set back, and two changes in one tick of the file
system's clock look alike, so an answer whose directories changed within RACY_SECONDS
of its walk is not kept (as git treats a racily clean index). Everything else of a plan
(identity, writable roots, network, environment, mounts of the daemon's own) is built
anew for each command.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable

from agentd.fs.identity import FsIdentity
from agentd.sandboxing.codebearing import table
from agentd.sandboxing.protected import SandboxProtection, sandbox_protection
from agentd_sandbox.stamped import RACY_SECONDS, StampedCache

# Roots kept for the whole daemon (least recently used dropped first).
MAX_ENTRIES = 1024


def _on_the_way(looked_at: list[str]) -> list[str]:
    """Every directory in `looked_at` and each of its parents up to the root ("")."""
    found = {""}
    for rel in looked_at:
        while rel and rel not in found:
            found.add(rel)
            rel = os.path.dirname(rel)
    return sorted(found)


class PlanCache:
    """Protected paths by (session, root, identity), each kept while its stamps hold
    (agentd_sandbox/stamped.py)."""

    def __init__(
        self,
        racy_seconds: float = RACY_SECONDS,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self._cache: StampedCache[SandboxProtection] = StampedCache(
            max_entries, racy_seconds, clock
        )

    @property
    def walked(self) -> int:
        return self._cache.computed

    @property
    def reused(self) -> int:
        return self._cache.reused

    def for_session(self, session_id: str) -> Callable[[str, FsIdentity | None], SandboxProtection]:
        """policy_for's `protection` for one session's plans."""
        return lambda root, identity: self.protection(session_id, root, identity)

    def protection(
        self, session_id: str, root: str, identity: FsIdentity | None
    ) -> SandboxProtection:
        def walk() -> tuple[SandboxProtection, list[str]]:
            found = sandbox_protection(root, identity)
            return found, [os.path.join(root, rel) for rel in _on_the_way(found.looked_at)]

        # A copy each way: a plan may change what it is given.
        return _copy(self._cache.get((session_id, root, identity, id(table())), walk))

    def forget(self, session_id: str) -> None:
        self._cache.forget(lambda key: isinstance(key, tuple) and key[0] == session_id)


def _copy(protection: SandboxProtection) -> SandboxProtection:
    return dataclasses.replace(
        protection,
        pinned=list(protection.pinned),
        read_only=list(protection.read_only),
        ensure_dirs=list(protection.ensure_dirs),
        looked_at=list(protection.looked_at),
    )
