"""Exit codes, kill, no orphans, die-with-parent, refusals, and the CLI."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap

import pytest

from agentd_sandbox import SandboxPolicy, SandboxUnavailable, run, spawn
from tests.support.processes import processes_with, wait_gone
from tests.support.waiting import wait_until

from .conftest import policy, run_capture


def _marker() -> str:
    return f"1000.{random.randrange(10**8, 10**9)}"


def _escapes(marker: str) -> str:
    """Shell that leaves behind setsid, nohup and double-forked sleeps tagged `marker`."""
    return (
        f"setsid sleep {marker} >/dev/null 2>&1 & "
        f"nohup sleep {marker} >/dev/null 2>&1 & "
        f"(sh -c 'sleep {marker} >/dev/null 2>&1 &') ; "
        f"while [ $(pgrep -c -x sleep) -lt 3 ]; do :; done; "
    )


async def test_exit_code_passes_through(ws, guarded):
    assert (await run_capture(policy(ws), guarded("sh", "-c", "exit 42"))).rc == 42


async def test_death_by_signal_is_128_plus_n(ws, guarded):
    res = await run_capture(policy(ws), guarded("sh", "-c", "kill -TERM $$"))
    assert res.rc == 128 + signal.SIGTERM


async def test_nothing_survives_normal_exit(ws, guarded):
    marker = _marker()
    res = await run_capture(policy(ws), guarded("sh", "-c", _escapes(marker) + "exit 0"))
    assert res.rc == 0, res.err
    wait_gone(marker)


async def test_kill_ends_the_whole_tree(ws, guarded):
    marker = _marker()
    proc = await spawn(policy(ws), guarded("sh", "-c", _escapes(marker) + "echo READY; sleep 1000"))
    assert (await proc.stdout.readline()).strip() == b"READY"
    assert len(processes_with(marker)) >= 3
    proc.kill()
    assert await proc.wait() == 128 + signal.SIGKILL
    wait_gone(marker)


async def test_killing_the_spawner_kills_the_sandbox(ws, guarded):
    marker = _marker()
    inner = guarded("sh", "-c", _escapes(marker) + "sleep 1000")
    helper = textwrap.dedent(f"""
        import sys
        from agentd_sandbox import SandboxPolicy, run
        print("SPAWNING", flush=True)
        run(SandboxPolicy(writable=[{ws!r}]), {inner!r})
    """)
    parent = subprocess.Popen([sys.executable, "-c", helper], stdout=subprocess.PIPE)
    try:
        assert parent.stdout.readline().strip() == b"SPAWNING"
        wait_until(lambda: len(processes_with(marker)) >= 3, what="the sandbox and its shell")
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    wait_gone(marker)


@pytest.mark.skipif(os.geteuid() != 0, reason="uid switching needs root")
async def test_uid_zero_is_refused():
    with pytest.raises(SandboxUnavailable, match="uid 0"):
        await spawn(SandboxPolicy(uid=0), ["true"])


@pytest.mark.skipif(os.geteuid() != 0, reason="uid switching needs root")
async def test_session_owner_uid_is_used(ws, guarded):
    os.chown(ws, 4242, 4242)
    res = await run_capture(
        policy(ws, uid=4242, gid=4242), guarded("sh", "-c", f"id -u; touch {ws}/f")
    )
    assert res.rc == 0, res.err
    assert res.out.strip() == "4242"
    assert os.stat(f"{ws}/f").st_uid == 4242


def test_sync_run_returns_exit_code(ws):
    assert run(policy(ws), ["sh", "-c", "exit 3"], stdout=subprocess.DEVNULL) == 3


def test_cli_run_and_check(ws):
    cmd = [sys.executable, "-m", "agentd_sandbox"]
    out = subprocess.run(
        [*cmd, "run", "--write", ws, "--", "sh", "-c", "id -u; exit 5"],
        capture_output=True,
        text=True,
        cwd=ws,  # the CLI starts in its own cwd, which must exist inside the sandbox
    )
    assert out.returncode == 5
    assert out.stdout.strip() != "0"
    out = subprocess.run([*cmd, "check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    import json

    report = json.loads(out.stdout)
    assert report["in_force"]["uid_drop"] and report["in_force"]["seccomp"]
    assert report["in_force"]["no_capabilities"]
    from agentd_sandbox import limits

    assert report["limits_mode"] == limits.mode()
    if report["limits_mode"] != "rlimit":  # the hierarchy a group would go in is named
        assert report["cgroups"]["version"] == int(report["limits_mode"][-1])


def test_check_reports_the_orphan_guard_a_start_uses():
    """`check` names the pid-namespace chain a start here uses: agentd-launch's where it
    is built, a root spawner's own (unshare drops the ids itself) when it can, else the
    user-namespace one."""
    from agentd_sandbox import identity, launcher
    from agentd_sandbox.probe import check
    from agentd_sandbox.runner import (
        orphan_guard_prefix,
        pid_namespace_prefix,
        root_pid_namespace_prefix,
    )

    ident = identity.resolve(SandboxPolicy())
    prefix, unshare_drops = orphan_guard_prefix(ident, True)
    if os.geteuid() == 0 and root_pid_namespace_prefix(ident):
        assert unshare_drops and f"--setuid={ident.uid}" in prefix
    else:
        assert not unshare_drops and prefix == pid_namespace_prefix()
    report = check()
    assert report["in_force"]["orphan_guard"] is (bool(prefix) or bool(report["launcher_path"]))
    if os.geteuid() == 0:  # agentd-launch makes the namespace where it is built
        assert report["launcher_path"] == launcher.helper()
