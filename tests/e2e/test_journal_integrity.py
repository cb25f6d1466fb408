"""A journal whose write-ahead log was damaged does not come up silently short: the start
is refused in one line naming the file and the way out, nothing of the sessions is
touched; `--accept-journal-loss` goes on with what the database holds, and its start-up
sweeps leave (and report) the namespaces, control groups, directories and owner records
of the sessions it no longer knows.

The daemon is killed (-9) while a reader from the test holds a snapshot from before its
sessions, so no checkpoint could copy them into the database file: the log holds the only
copy of everything written, as in the field (a main file of 4 KiB, a log of ~1 MB).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentd_client import Client
from agentd_client.v1 import agentd_pb2 as pb
from agentd_sandbox import cgroups
from tests.sandboxing.test_groups import group_of
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.processes import processes_with, wait_gone, wait_present
from tests.support.workspaces import reachable_workspace

SESSIONS = 3
GARBAGE = b"\xa5" * 4096
# A background task's command line, found among the host's processes.
TASK_MARKER = "7331.4281"
# The state files a test puts back as the kill left them (the log apart).
KEPT = ("agentd.db", "journal-commits")


@dataclass
class Killed:
    """A daemon's base after a kill -9 with SESSIONS sessions, each of which ran a Bash
    call (so each has its directories, namespace and control group)."""

    base: Path
    ids: list[str]
    wal: bytes
    kept: dict[str, bytes]

    @property
    def state(self) -> Path:
        return self.base / "state"

    def put_back(self, damage_at: int | None = None) -> None:
        """The state as the kill left it; the log with GARBAGE at `damage_at`."""
        for name, data in self.kept.items():
            (self.state / name).write_bytes(data)
        wal = bytearray(self.wal)
        if damage_at is not None:
            start = damage_at % len(wal)
            wal[start : start + len(GARBAGE)] = GARBAGE
        (self.state / "agentd.db-wal").write_bytes(bytes(wal))
        (self.state / "agentd.db-shm").unlink(missing_ok=True)

    def owner_records(self) -> set[str]:
        return {p.name for p in (self.base / "owners").iterdir() if not p.name.startswith(".")}

    def session_dirs(self) -> list[Path]:
        """Every directory the sessions' owner records name."""
        return [
            Path(path)
            for sid in self.ids
            for path in json.loads((self.base / "owners" / sid).read_text())["paths"]
        ]

    def namespaces(self) -> set[str]:
        netns = self.state / "netns"
        return {p.name for p in netns.iterdir()} if netns.is_dir() else set()

    def groups(self) -> set[str]:
        if cgroups.detect() is None:
            return set()
        return {sid for sid in self.ids if group_of(str(self.state), sid).exists()}


def _sessions_in(db: Path) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT count(*) FROM sessions").fetchone()[0])
    finally:
        con.close()


def _serve(base: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`agentd serve` on `base` in the foreground, for a start that is expected to fail
    (one that serves instead is killed after 60 s and fails the test)."""
    try:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "agentd",
                "serve",
                "--socket",
                str(base / "run" / "agentd.sock"),
                "--state-dir",
                str(base / "state"),
                "--tmp-owners-dir",
                str(base / "owners"),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("agentd started and served on a journal that lacks what it acknowledged")


def _hold_snapshot(db: Path) -> sqlite3.Connection:
    """A read-only reader holding a snapshot: no checkpoint copies what follows it."""
    reader = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM sessions").fetchone()
    return reader


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Killed]:
    base = tmp_path_factory.mktemp("wal") / "d"
    workspace = reachable_workspace()
    daemon: DaemonProcess = start_daemon(base)
    db = Path(daemon.state_dir) / "agentd.db"
    assert _sessions_in(db) == 0
    reader = _hold_snapshot(db)
    ids = []
    try:
        with Client(daemon.socket, timeout=60) as c:
            for n in range(SESSIONS):
                sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
                ids.append(sid)
                assert not c.run_tool(sid, "Bash", {"command": "true"}).is_error
                if n == 0:
                    # A writing task: its changes are followed, in a log of its own.
                    command = f"touch made-by-task; exec sleep {TASK_MARKER}"
                    task = {"command": command, "run_in_background": True}
                    assert not c.run_tool(sid, "Bash", task).is_error
                for k in range(40):
                    prompt = pb.AgentPrompt(text=f"prompt {n}.{k} " * 40)
                    c.append_agent_event(sid, pb.AgentEvent(conversation_id="c", prompt=prompt))
    finally:
        daemon.stop(signal.SIGKILL)
        reader.close()  # read-only: its close neither checkpoints nor removes the log
    wal = Path(str(db) + "-wal")
    assert wal.stat().st_size > 200 * 1024
    kept = {name: (db.parent / name).read_bytes() for name in KEPT}
    yield Killed(base, ids, wal.read_bytes(), kept)
    shutil.rmtree(workspace, ignore_errors=True)
    for pid in processes_with(f"sleep {TASK_MARKER}"):  # a test that did not take it over
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("where", ["first frame", "middle", "near the end"])
def test_damaged_log_refuses_the_start(killed: Killed, where: str) -> None:
    offset = {"first frame": 32, "middle": len(killed.wal) // 2, "near the end": -8192}[where]
    killed.put_back(damage_at=offset)
    records = killed.owner_records()
    assert set(killed.ids) <= records

    out = _serve(killed.base)

    assert out.returncode == 2, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("agentd:")]
    assert len(lines) == 1, out.stderr
    assert str(killed.state / "agentd.db") in lines[0]
    assert "restore it from a backup" in lines[0] and "--accept-journal-loss" in lines[0]
    assert "Traceback" not in out.stderr, out.stderr
    # Nothing of the sessions was touched by the refused start.
    assert killed.owner_records() == records


def test_accepted_loss_leaves_what_it_cannot_prove_closed(killed: Killed) -> None:
    """With --accept-journal-loss the daemon serves without the lost sessions, and its
    sweeps remove none of what they had: namespaces, control groups, directories, owner
    records are left, each kind reported in one line with its count."""
    killed.put_back(damage_at=32)  # the first frame: every session is lost
    namespaces, groups = killed.namespaces(), killed.groups()
    assert groups == set(killed.ids) or cgroups.detect() is None
    dirs = killed.session_dirs()
    assert set(killed.ids) <= namespaces
    task = wait_present(f"sleep {TASK_MARKER}")
    assert all(d.is_dir() for d in dirs), dirs
    change_logs = set((killed.base / "state" / "changes").glob("*.log"))
    assert change_logs  # the task's

    daemon = start_daemon(killed.base, ["--accept-journal-loss"])
    try:
        assert "lacks" in daemon.wait_for_log("--accept-journal-loss")
        with Client(daemon.socket, timeout=60) as c:
            assert not {s.id for s in c.list_sessions()} & set(killed.ids)
        for kind in ["network namespaces", "directories"] + ["control groups"] * bool(groups):
            line = daemon.wait_for_log(f"left the {kind} of {SESSIONS} sessions", timeout=60)
            assert "not removed" in line
        assert set(killed.ids) <= killed.namespaces()
        assert killed.groups() == groups
        assert all(d.is_dir() for d in dirs)
        assert set(killed.ids) <= killed.owner_records()
        assert "left 1 task(s) of sessions" in daemon.wait_for_log("task(s) of sessions")
        assert processes_with(f"sleep {TASK_MARKER}") == task  # not stopped
        assert change_logs <= set((killed.base / "state" / "changes").glob("*.log"))
    finally:
        assert daemon.stop() == 0, daemon.log
    assert processes_with(f"sleep {TASK_MARKER}") == task
    # Nor removed by its stop.
    assert set(killed.ids) <= killed.namespaces()
    assert killed.groups() == groups
    assert all(d.is_dir() for d in dirs)
    assert set(killed.ids) <= killed.owner_records()


def test_undamaged_log_starts_with_every_session(killed: Killed) -> None:
    killed.put_back()
    daemon = start_daemon(killed.base)
    try:
        with Client(daemon.socket, timeout=60) as c:
            assert {s.id for s in c.list_sessions()} >= set(killed.ids)
            assert [t for t in c.list_tasks(killed.ids[0]) if t.status == "running"]
    finally:
        assert daemon.stop() == 0, daemon.log
    wait_gone(f"sleep {TASK_MARKER}")  # taken over, and stopped with the daemon


def test_accepting_the_loss_once_then_starting_as_usual(tmp_path: Path, workspace: Path) -> None:
    """After --accept-journal-loss the count starts from what the database holds: the
    next start is not refused."""
    base = tmp_path / "d"
    daemon = start_daemon(base)
    db = Path(daemon.state_dir) / "agentd.db"
    reader = _hold_snapshot(db)
    try:
        with Client(daemon.socket, timeout=60) as c:
            c.create_session(str(workspace), name="lost")
    finally:
        daemon.stop(signal.SIGKILL)
        reader.close()
    with open(str(db) + "-wal", "r+b") as f:
        f.seek(32)
        f.write(GARBAGE)
    Path(str(db) + "-shm").unlink(missing_ok=True)
    assert _serve(base).returncode == 2

    again = start_daemon(base, ["--accept-journal-loss"])
    try:
        with Client(again.socket, timeout=60) as c:
            assert not [s for s in c.list_sessions() if s.name == "lost"]
    finally:
        assert again.stop() == 0, again.log
    third = start_daemon(base)
    assert third.stop() == 0, third.log
