"""Each session's own group, from the configured range (`sandbox_gid_range`).

Sessions of one owner (or of root-owned workspaces, all run as `sandbox_uid`) share a
uid, so the uid cannot keep one session's files from another's sandbox. The group can:
a root daemon runs each session's commands and file work with a group of its own as a
supplementary group, and makes the session's temp dir and output files root's with that
group (agentd/sessions/dirs.py). A sandbox of another session, same uid or not, then has
no way into them, whatever is bound where. The uid and gid stay what they were, so what
a command creates in the workspace still belongs to the workspace's owner and group.

Groups are chosen at random among those no session of this daemon holds (a reaped
session's group is seldom given again soon), and kept in the session's record, so a
restarted daemon and the tasks that outlived it agree on it.
"""

from __future__ import annotations

import grp
import os
import secrets
from collections.abc import Iterable

from agentd.foundation.errors import ConfigError, Unavailable

SUBGID_FILE = "/etc/subgid"


def enabled(gid_range: list[int]) -> bool:
    """Whether sessions get groups of their own: a root daemon with a range set."""
    return bool(gid_range) and os.geteuid() == 0


def allocate(gid_range: list[int], taken: Iterable[int]) -> int:
    """A group of the range no session in `taken` holds; Unavailable when none is left."""
    first, count = gid_range
    used = {g for g in taken if first <= g < first + count}
    if len(used) >= count:
        raise Unavailable(
            f"every group of sandbox_gid_range ({count}) is held by a session: close or "
            "reap sessions (agentctl session gc), or widen the range"
        )
    while True:
        gid = first + secrets.randbelow(count)
        if gid not in used:
            return gid


def check_range(gid_range: list[int]) -> None:
    """ConfigError when a group of the host, or a subordinate range (/etc/subgid), lies in
    the range: a session would hold that group's rights on the host's files."""
    if not gid_range:
        return
    first, count = gid_range
    last = first + count - 1
    for group in grp.getgrall():
        if first <= group.gr_gid <= last:
            raise ConfigError(
                f"sandbox_gid_range [{first}, {count}] holds the group {group.gr_name} "
                f"(gid {group.gr_gid}); choose a range no group of this host uses"
            )
    for owner, start, size in _subordinate_ranges():
        if start <= last and first <= start + size - 1:
            raise ConfigError(
                f"sandbox_gid_range [{first}, {count}] overlaps {owner}'s subordinate groups "
                f"in {SUBGID_FILE} ({start}:{size}); choose a range apart from them"
            )


def _subordinate_ranges() -> list[tuple[str, int, int]]:
    try:
        with open(SUBGID_FILE) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            found.append((parts[0], int(parts[1]), int(parts[2])))
    return found
