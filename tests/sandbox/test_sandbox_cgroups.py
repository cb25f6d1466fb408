"""agentd_sandbox.cgroups on its own: a sandbox started with a group is in it from the
chain's first process, and a group that cannot be joined starts nothing."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from agentd_sandbox import cgroups, spawn
from tests.support.waiting import wait_until

from .conftest import policy, run_capture

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or cgroups.detect() is None, reason="needs a writable cgroup hierarchy"
)


@pytest.fixture
def group() -> Iterator[cgroups.Group]:
    tree = cgroups.Tree(cgroups.detect(), f"agentd-test-{uuid.uuid4().hex[:12]}")
    tree.setup()
    made = tree.group("g")
    made.create(cgroups.GroupLimits(processes=32))
    yield made
    made.remove()
    tree.remove_if_empty()


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        found.add(parent)
        for tid in os.listdir(f"/proc/{parent}/task"):
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except OSError:
                continue
    return found


async def test_the_whole_chain_is_in_the_group(ws, group) -> None:
    pol = policy(ws, cgroup_procs=group.procs_files)
    proc = await spawn(pol, ["sleep", "30"])
    try:
        assert wait_until(lambda: any(_is_sleep(p) for p in group.pids()), 10)
        chain = _descendants(proc.pid)
        assert len(chain) >= 3  # unshare, bwrap, its init, sleep (setpriv and sh exec'd)
        assert chain <= group.pids(), (chain, group.pids())
    finally:
        proc.kill()
        await proc.wait()
    assert wait_until(lambda: not group.pids(), 10)


async def test_a_group_that_cannot_be_joined_starts_nothing(ws, group) -> None:
    missing = os.path.join(os.path.dirname(group.procs_files[0]), "gone", "cgroup.procs")
    pol = policy(ws, cgroup_procs=[missing])
    res = await run_capture(pol, ["sh", "-c", f"touch {ws}/ran"])
    assert res.rc == cgroups.JOIN_EXIT
    assert "cannot join the session's control group" in res.err
    assert not os.path.exists(f"{ws}/ran")


def _is_sleep(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().startswith(b"sleep\0")
    except OSError:
        return False


@pytest.fixture
def v2_group() -> Iterator[cgroups.Group]:
    hierarchy = cgroups.detect("v2")
    if hierarchy is None:
        pytest.skip("no writable cgroup v2 hierarchy here")
    tree = cgroups.Tree(hierarchy, f"agentd-test-{uuid.uuid4().hex[:12]}")
    tree.setup()
    made = tree.group("g")
    made.create(cgroups.GroupLimits())
    yield made
    made.remove()
    tree.remove_if_empty()


async def test_on_cgroup_v2_the_sandbox_is_made_in_its_group(ws, v2_group) -> None:
    """agentd-launch makes bwrap in the group (clone3 CLONE_INTO_CGROUP) rather than
    moving itself in: bwrap, its init and the command are in it from their start."""
    pol = policy(ws, cgroup_procs=v2_group.procs_files)
    proc = await spawn(pol, ["sleep", "30"])
    try:
        assert wait_until(lambda: any(_is_sleep(p) for p in v2_group.pids()), 10)
        sandbox = _descendants(proc.pid) - {proc.pid}
        assert len(sandbox) >= 3  # bwrap, its init, sleep
        assert sandbox <= v2_group.pids(), (sandbox, v2_group.pids())
    finally:
        proc.kill()
        await proc.wait()
    assert wait_until(lambda: not v2_group.pids(), 10)


async def test_on_cgroup_v2_a_group_that_cannot_be_joined_starts_nothing(ws, v2_group) -> None:
    missing = os.path.join(os.path.dirname(v2_group.procs_files[0]), "gone", "cgroup.procs")
    res = await run_capture(policy(ws, cgroup_procs=[missing]), ["sh", "-c", f"touch {ws}/ran"])
    assert res.rc == cgroups.JOIN_EXIT
    assert "cannot join the session's control group" in res.err
    assert not os.path.exists(f"{ws}/ran")
