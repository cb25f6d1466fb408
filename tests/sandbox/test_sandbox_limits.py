"""Limits hold with the rlimit fallback (a policy with no control group): fork and
memory bombs, disk fill, output flood, CPU and wall-clock runaways. Each bomb is small
and has a wall limit. Per-session groups: test_sandbox_session_limits.py."""

from __future__ import annotations

import asyncio
import os
import signal
import time

from agentd_sandbox import Limits, cgroups, limits

from .conftest import NOT_SANDBOXED, policy, run_capture

FORK_BOMB = """
import os, time
children = 0
try:
    while children < 1000:
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError as e:
    print("FORK FAILED after", children, "errno", e.errno)
"""


def test_this_host_reports_what_bounds_a_session():
    """v1 or v2 where a writable hierarchy holds memory and pids, else rlimits."""
    hierarchy = cgroups.detect()
    held = hierarchy is not None and {"memory", "pids"} <= hierarchy.controllers
    assert limits.mode() == (f"cgroup{hierarchy.version}" if held else "rlimit")


async def test_fork_bomb_is_bounded(ws, guarded_py):
    pol = policy(ws, limits=Limits(processes=64, wall_seconds=15))
    # The limit counts every process of the sandbox's uid on the host: while other
    # tests' sandboxes run as that uid, bwrap itself may not get to fork; then again.
    for _ in range(10):
        res = await run_capture(pol, guarded_py(FORK_BOMB))
        if "Creating new namespace failed" not in res.err:
            break
        await asyncio.sleep(1)
    assert res.rc != NOT_SANDBOXED, res.err
    assert "FORK FAILED after" in res.out, res.out + res.err
    assert int(res.out.split("after ")[1].split()[0]) < 64
    pid = os.fork()  # the host can still fork
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


async def test_shell_fork_bomb_ends_at_wall_limit(ws, guarded):
    pol = policy(ws, limits=Limits(processes=32, wall_seconds=2))
    started = time.monotonic()
    res = await run_capture(pol, guarded("bash", "-c", "b() { b | b & }; b; sleep 30"))
    assert res.rc != NOT_SANDBOXED
    assert time.monotonic() - started < 5  # bounded: killed at the wall, or gave up
    assert res.timed_out or res.rc != 0


async def test_memory_bomb_is_bounded(ws, guarded_py):
    code = "b = bytearray(1 << 30); print('ALLOCATED')"
    pol = policy(ws, limits=Limits(memory_bytes=256 << 20, wall_seconds=15))
    res = await run_capture(pol, guarded_py(code))
    assert res.rc not in (0, NOT_SANDBOXED)
    assert "MemoryError" in res.err and "ALLOCATED" not in res.out


async def test_disk_fill_is_bounded(ws, guarded):
    pol = policy(ws, limits=Limits(file_size_bytes=1 << 20, wall_seconds=15))
    res = await run_capture(pol, guarded("sh", "-c", f"head -c 10000000 /dev/zero > {ws}/big"))
    assert res.rc != 0
    assert os.path.getsize(f"{ws}/big") <= 1 << 20


async def test_output_flood_does_not_hang(ws, guarded):
    from agentd_sandbox import spawn

    proc = await spawn(policy(ws), guarded("head", "-c", "50000000", "/dev/zero"))
    total = 0
    while chunk := await proc.stdout.read(1 << 16):
        total += len(chunk)
    assert await proc.wait() == 0
    assert total == 50_000_000


async def test_cpu_runaway_is_killed(ws, guarded):
    pol = policy(ws, limits=Limits(cpu_seconds=1, wall_seconds=15))
    res = await run_capture(pol, guarded("sh", "-c", "while :; do :; done"))
    assert res.rc in (128 + signal.SIGXCPU, 128 + signal.SIGKILL), res.rc
    assert not res.timed_out


async def test_wall_limit_kills(ws, guarded):
    pol = policy(ws, limits=Limits(wall_seconds=1))
    res = await run_capture(pol, guarded("sleep", "100"))
    assert res.timed_out
    assert res.rc == 128 + signal.SIGKILL
