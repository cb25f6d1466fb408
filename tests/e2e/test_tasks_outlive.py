"""Background tasks outlive the daemon (issue 11): each runs under a shim of its own, and
the next daemon on the same state dir takes it over. Real daemons, real sandboxes; each
test ends every process it started (TaskStop, `agentd stop --tasks`, or by pid)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.processes import processes_with, wait_gone, wait_present
from tests.support.waiting import wait_until


def _count_lines(output: Path) -> int:
    """The numbered lines the counting task has written so far."""
    try:
        return output.read_bytes().count(b"line-")
    except FileNotFoundError:
        return 0


def _shims_of(state_dir: str) -> list[int]:
    """The pids of the task shims recorded under `state_dir` that still run."""
    pids = []
    root = Path(state_dir) / "shims"
    for info in root.glob("*/shim.json") if root.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            pid = json.loads(info.read_text())["pid"]
            os.kill(pid, 0)
            pids.append(pid)
    return pids


class Node:
    """A daemon on one state dir that can be killed and started again."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.daemon: DaemonProcess = start_daemon(base, keep_tasks=True)

    def restart(self, sig: int = signal.SIGKILL) -> float:
        self.daemon.stop(sig)
        t0 = time.monotonic()
        self.daemon = start_daemon(self.base, keep_tasks=True)
        return time.monotonic() - t0

    def client(self) -> Client:
        return Client(self.daemon.socket, timeout=60)

    def cleanup(self) -> None:
        state = self.daemon.state_dir
        subprocess.run(
            [sys.executable, "-m", "agentd", "stop", "--tasks", "--socket", self.daemon.socket]
            + ["--state-dir", state],
            capture_output=True,
            timeout=60,
        )
        self.daemon.stop(signal.SIGKILL)
        for pid in _shims_of(state):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path / "d")
    try:
        yield n
    finally:
        n.cleanup()


@pytest.fixture
def ws(workspace: Path) -> str:
    return str(workspace)


def _session(c: Client, ws: str) -> str:
    return c.create_session(ws, permission_mode="bypassPermissions").id


def _background(c: Client, sid: str, command: str) -> str:
    r = c.run_tool(sid, "Bash", {"command": command, "run_in_background": True})
    assert not r.is_error, r.text
    return str(r.data["backgroundTaskId"])


def _task(c: Client, sid: str, task_id: str):  # type: ignore[no-untyped-def]
    return next(t for t in c.list_tasks(sid) if t.id == task_id)


def _wait_end(c: Client, sid: str, task_id: str, timeout: float = 30):  # type: ignore[no-untyped-def]
    wait_until(lambda: _task(c, sid, task_id).status != "running", timeout, f"{task_id} ends")
    return _task(c, sid, task_id)


def test_kill9_restarts_lose_no_line_and_taskstop_leaves_nothing(node: Node, ws: str) -> None:
    # A numbered line every 10 ms, held at lines 100 and 200 until the test opens a gate:
    # each kill -9 lands while the task writes, however long a restart takes on a
    # loaded machine, and never after the count has ended.
    n = 300
    script = (
        f"for i in $(seq 1 {n}); do echo line-$i; sleep 0.01; "
        'case $i in 100|200) while [ ! -e "gate-$i" ]; do sleep 0.05; done;; esac; '
        "done; echo done"
    )
    with node.client() as c:
        sid = _session(c, ws)
        counting = _background(c, sid, script)
        sleeper = _background(c, sid, "sleep 7331.25")
        output = Path(_task(c, sid, counting).output_path)
    for gate in (100, 200):
        wait_until(lambda gate=gate: _count_lines(output) >= gate, 60, f"the count reaches {gate}")
        (Path(ws) / f"gate-{gate}").touch()
        # Killed while it counts: once it has written more since the gate opened.
        more = gate + 20
        wait_until(lambda more=more: _count_lines(output) >= more, 60, "the count goes on")
        node.restart(signal.SIGKILL)
        with node.client() as c:
            assert _task(c, sid, sleeper).status == "running"
    assert node.daemon.wait_for_log("took over")
    with node.client() as c:
        assert c.status().tasks_readopted >= 1
        done = _wait_end(c, sid, counting)
        assert (done.status, done.exit_code) == ("completed", 0)
        text = Path(done.output_path).read_text()
        lines = [x for x in text.splitlines() if x.startswith("line-")]
        assert lines == [f"line-{i}" for i in range(1, n + 1)], "lost or repeated lines"
        assert "[exited with code 0]" in text
        # The re-adopted sleeper: TaskStop ends it and everything it ran.
        assert processes_with("sleep 7331.25")
        r = c.run_tool(sid, "TaskStop", {"task_id": sleeper})
        assert not r.is_error, r.text
        assert _task(c, sid, sleeper).status == "killed"
    wait_gone("sleep 7331.25")
    wait_until(lambda: not _shims_of(node.daemon.state_dir), 10, "no shim left")


def test_sigterm_restart_keeps_tasks_and_follows_their_output(node: Node, ws: str) -> None:
    with node.client() as c:
        sid = _session(c, ws)
        task_id = _background(c, sid, "echo first; sleep 2; echo second; sleep 1000.75")
        wait_present("sleep 1000.75")
    took = node.restart(signal.SIGTERM)
    assert node.daemon.proc.poll() is None and took < 20
    with node.client() as c:
        assert _task(c, sid, task_id).status == "running"
        # Following the output after the takeover: ReadOutput sees what comes next.
        stream = c.read_output(sid, task_id, 0, follow=True, timeout=20)
        seen = b""
        for chunk in stream:
            seen += chunk.data
            if b"second" in seen:
                stream.cancel()
                break
        assert b"first\nsecond\n" in seen
        r = c.run_tool(sid, "BashOutput", {"bash_id": task_id})
        assert "second" in r.text and "running" in r.text, r.text
        r = c.run_tool(sid, "TaskStop", {"task_id": task_id})
        assert not r.is_error, r.text
    wait_gone("sleep 1000.75")


def test_stop_with_tasks_stops_them(node: Node, ws: str) -> None:
    with node.client() as c:
        sid = _session(c, ws)
        task_id = _background(c, sid, "sleep 2718.5")
    wait_present("sleep 2718.5")
    out = subprocess.run(
        [sys.executable, "-m", "agentd", "stop", "--tasks", "--json"]
        + ["--socket", node.daemon.socket, "--state-dir", node.daemon.state_dir],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "daemon": "stopped",
        "pid": node.daemon.proc.pid,
        "tasks_stopped": 1,
    }
    assert node.daemon.proc.wait(10) == 0
    assert not processes_with("sleep 2718.5")
    node.daemon = start_daemon(node.base, keep_tasks=True)
    with node.client() as c:
        assert _task(c, sid, task_id).status == "killed"


def test_task_that_ends_while_down_reports_its_real_end(node: Node, ws: str) -> None:
    with node.client() as c:
        sid = _session(c, ws)
        task_id = _background(c, sid, "sleep 1; echo bye; exit 7")
    node.daemon.stop(signal.SIGKILL)
    wait_until(
        lambda: (Path(node.daemon.state_dir) / "shims" / task_id / "status.json").exists(),
        10,
        "ended",
    )
    ended_before = int(time.time() * 1000)  # the next daemon starts well after this
    node.daemon = start_daemon(node.base, keep_tasks=True)
    with node.client() as c:
        task = _task(c, sid, task_id)
        assert (task.status, task.exit_code) == ("failed", 7)
        assert task.started_ms < task.ended_ms <= ended_before
        assert "[exited with code 7]" in Path(task.output_path).read_text()
        stream = c.attach(sid, 0)
        kinds = []
        for event in stream:
            kinds.append(event.WhichOneof("kind"))
            if event.HasField("task_finished"):
                assert event.task_finished.task.exit_code == 7
                stream.cancel()
                break
        assert "task_finished" in kinds
        # The model hears of it with its next result.
        r = c.run_tool(sid, "Bash", {"command": "true"})
        assert f"<task-id>{task_id}</task-id>" in r.text and "exit code 7" in r.text
    assert not (Path(node.daemon.state_dir) / "shims" / task_id).exists()


def test_shim_of_a_session_closed_while_down_is_reaped(node: Node, ws: str) -> None:
    with node.client() as c:
        sid = _session(c, ws)
        task_id = _background(c, sid, "sleep 1618.5")
    wait_present("sleep 1618.5")
    node.daemon.stop(signal.SIGKILL)
    # The session's record says closed (a close whose task stop never ran, a retention
    # reaper, ...) while its task's shim runs on.
    db = sqlite3.connect(Path(node.daemon.state_dir) / "agentd.db")
    (body,) = db.execute("SELECT body FROM sessions WHERE id = ?", (sid,)).fetchone()
    db.execute(
        "UPDATE sessions SET body = ? WHERE id = ?",
        (json.dumps({**json.loads(body), "closed": True}), sid),
    )
    db.commit()
    db.close()
    node.daemon = start_daemon(node.base, keep_tasks=True)
    assert not processes_with("sleep 1618.5")
    with node.client() as c:
        assert _task(c, sid, task_id).status == "killed"
    assert not _shims_of(node.daemon.state_dir)


def test_foreground_call_moved_to_background_outlives_the_daemon(node: Node, ws: str) -> None:
    with node.client() as c:
        sid = _session(c, ws)
        r = c.run_tool(sid, "Bash", {"command": "echo up; sleep 3141.5", "timeout": 1000})
        task_id = r.data["backgroundTaskId"]
    node.restart(signal.SIGKILL)
    with node.client() as c:
        assert _task(c, sid, task_id).status == "running"
        assert processes_with("sleep 3141.5")
        r = c.run_tool(sid, "TaskStop", {"task_id": task_id})
        assert not r.is_error, r.text
    wait_gone("sleep 3141.5")


def test_a_plain_foreground_call_dies_with_the_daemon(node: Node, ws: str) -> None:
    import threading

    with node.client() as c:
        sid = _session(c, ws)

    def call() -> None:
        with contextlib.suppress(Exception), node.client() as c2:
            c2.run_tool(sid, "Bash", {"command": "sleep 1414.5", "timeout": 600000})

    threading.Thread(target=call, daemon=True).start()
    wait_present("sleep 1414.5 ")
    node.daemon.stop(signal.SIGKILL)
    wait_gone("sleep 1414.5")
