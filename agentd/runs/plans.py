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
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from agentd.fs.identity import FsIdentity
from agentd.sandboxing.codebearing import table
from agentd.sandboxing.protected import SandboxProtection, sandbox_protection

# Changes this close to a walk may share a file system clock tick with it.
RACY_SECONDS = 1.0
# Roots kept for the whole daemon (least recently used dropped first).
MAX_ENTRIES = 1024

Stamp = tuple[int, int, int, int, int] | None


def stamp(path: str) -> Stamp:
    """What says a directory is unchanged (None: nothing at `path`)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mode, st.st_mtime_ns, st.st_ctime_ns)


def _on_the_way(looked_at: list[str]) -> list[str]:
    """Every directory in `looked_at` and each of its parents up to the root ("")."""
    found = {""}
    for rel in looked_at:
        while rel and rel not in found:
            found.add(rel)
            rel = os.path.dirname(rel)
    return sorted(found)


@dataclass(frozen=True)
class _Kept:
    protection: SandboxProtection
    stamps: tuple[tuple[str, Stamp], ...]


class PlanCache:
    """Protected paths by (session, root, identity), each kept while its stamps hold."""

    def __init__(
        self,
        racy_seconds: float = RACY_SECONDS,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self._racy_ns = int(racy_seconds * 1e9)
        self._max = max_entries
        self._clock = clock
        self._kept: OrderedDict[tuple[object, ...], _Kept] = OrderedDict()
        # How often an answer was walked for, and how often one kept was used.
        self.walked = 0
        self.reused = 0

    def for_session(self, session_id: str) -> Callable[[str, FsIdentity | None], SandboxProtection]:
        """policy_for's `protection` for one session's plans."""
        return lambda root, identity: self.protection(session_id, root, identity)

    def protection(
        self, session_id: str, root: str, identity: FsIdentity | None
    ) -> SandboxProtection:
        key = (session_id, root, identity, id(table()))
        kept = self._kept.get(key)
        if kept is not None:
            if all(stamp(os.path.join(root, rel)) == s for rel, s in kept.stamps):
                self._kept.move_to_end(key)
                self.reused += 1
                return _copy(kept.protection)
            del self._kept[key]
        began = self._clock()
        found = sandbox_protection(root, identity)
        self.walked += 1
        stamps = tuple(
            (rel, stamp(os.path.join(root, rel))) for rel in _on_the_way(found.looked_at)
        )
        if all(s is None or max(s[3], s[4]) < began - self._racy_ns for _, s in stamps):
            self._kept[key] = _Kept(_copy(found), stamps)
            if len(self._kept) > self._max:
                self._kept.popitem(last=False)
        return found

    def forget(self, session_id: str) -> None:
        for key in [k for k in self._kept if k[0] == session_id]:
            del self._kept[key]


def _copy(protection: SandboxProtection) -> SandboxProtection:
    return dataclasses.replace(
        protection,
        pinned=list(protection.pinned),
        read_only=list(protection.read_only),
        ensure_dirs=list(protection.ensure_dirs),
        looked_at=list(protection.looked_at),
    )
