"""The settled-read cache of settings files (settings.py `files`, trust.stamp): a file
whose stamp is unchanged is not read again, and any change of it is seen at once."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from agentd.permissions import trust

from .conftest import Env

ALLOW_MAKE = {"permissions": {"allow": ["Bash(make:*)"]}}
ALLOW_MIKE = {"permissions": {"allow": ["Bash(mike:*)"]}}  # same size, other content

CLOCK_REALTIME_COARSE = 5  # the clock file timestamps come from


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every settings file the worker really reads; and every read counts as settled
    (as if the file had not changed for a while), so the cache is used."""
    seen: list[str] = []
    real_read = trust._read_sync

    def counting(root: str, name: str) -> Any:
        seen.append(name)
        return real_read(root, name)

    monkeypatch.setattr(trust, "_read_sync", counting)
    monkeypatch.setattr(trust, "SETTLED_NS", -(10**12))
    return seen


def next_tick() -> None:
    """Wait until the coarse clock moves, so a write now gets a new ctime."""
    start = time.clock_gettime_ns(CLOCK_REALTIME_COARSE)
    while time.clock_gettime_ns(CLOCK_REALTIME_COARSE) == start:
        pass


async def test_unchanged_file_is_not_read_again(env: Env, reads: list[str]) -> None:
    env.settings(ALLOW_MAKE)
    env.trust()
    assert (await env.bash("make")).decided_by == "rule"
    assert reads == [".claude/settings.json"]
    for _ in range(3):
        assert (await env.bash("make")).decided_by == "rule"
    assert reads == [".claude/settings.json"]  # no file: no read; settled: reused


async def test_in_place_write_of_the_same_size_is_seen(env: Env, reads: list[str]) -> None:
    path = env.settings(ALLOW_MAKE)
    env.trust()
    assert (await env.bash("make")).decided_by == "rule"
    before = path.stat()
    next_tick()
    with open(path, "r+b") as f:  # same inode, same size, mtime put back
        f.write(path.read_bytes().replace(b"make", b"mike"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (await env.bash("make")).decided_by != "rule"
    assert len(reads) == 2


async def test_file_renamed_over_is_seen(env: Env, reads: list[str]) -> None:
    path = env.settings(ALLOW_MAKE)
    env.trust()
    assert (await env.bash("make")).decided_by == "rule"
    other = env.ws / "other.json"
    other.write_bytes(path.read_bytes().replace(b"make", b"mike"))
    os.utime(other, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    os.rename(other, path)
    assert (await env.bash("make")).decided_by != "rule"


async def test_claude_dir_swapped_for_a_symlink_is_seen(env: Env, reads: list[str]) -> None:
    env.settings(ALLOW_MAKE)
    env.trust()
    assert (await env.bash("make")).decided_by == "rule"
    os.rename(env.ws / ".claude", env.ws / "real-claude")
    (env.ws / ".claude").symlink_to(env.ws / "real-claude")  # absolute: leads out by name
    decision = await env.bash("make")
    assert decision.decided_by != "rule"
    assert any("outside the workspace" in e["reason"] for e in env.events("settings_ignored"))
