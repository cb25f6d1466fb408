"""A journal whose write-ahead log was damaged does not come up silently short: the start
is refused in one line naming the file and the way out, nothing of the sessions is
touched, and `--accept-journal-loss` goes on with what the database holds.

The daemon is killed (-9) while a reader from the test holds a snapshot from before its
sessions, so no checkpoint could copy them into the database file: the log holds the only
copy of everything written, as in the field (a main file of 4 KiB, a log of ~1 MB).
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import wait_until
from tests.support.workspaces import reachable_workspace

SESSIONS = 3
GARBAGE = b"\xa5" * 4096


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
        return _run_serve(base, *extra)
    except subprocess.TimeoutExpired:
        pytest.fail("agentd started and served on a journal that lacks what it acknowledged")


def _run_serve(base: Path, *extra: str) -> subprocess.CompletedProcess[str]:
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


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, bytes, list[str]]]:
    """A daemon's base after a kill -9 with SESSIONS sessions (each ran a Bash call, so
    each has its directories, namespace and group), its log as it was, and their ids."""
    base = tmp_path_factory.mktemp("wal") / "d"
    workspace = reachable_workspace()
    daemon: DaemonProcess = start_daemon(base)
    db = Path(daemon.state_dir) / "agentd.db"
    # A snapshot from before the sessions: no checkpoint copies what follows it.
    reader = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    reader.execute("BEGIN")
    assert _sessions_in(db) == 0
    reader.execute("SELECT count(*) FROM sessions").fetchone()
    ids = []
    try:
        with Client(daemon.socket, timeout=60) as c:
            for n in range(SESSIONS):
                sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
                ids.append(sid)
                assert not c.run_tool(sid, "Bash", {"command": "true"}).is_error
                for k in range(40):
                    prompt = pb.AgentPrompt(text=f"prompt {n}.{k} " * 40)
                    c.append_agent_event(sid, pb.AgentEvent(conversation_id="c", prompt=prompt))
    finally:
        daemon.stop(signal.SIGKILL)
        reader.close()  # read-only: its close neither checkpoints nor removes the log
    wal = Path(str(db) + "-wal")
    assert wal.stat().st_size > 200 * 1024
    yield base, wal.read_bytes(), ids
    shutil.rmtree(workspace, ignore_errors=True)


def _owner_records(base: Path) -> set[str]:
    return {p.name for p in (base / "owners").iterdir() if not p.name.startswith(".")}


@pytest.mark.parametrize("where", ["first frame", "middle", "near the end"])
def test_damaged_log_refuses_the_start(killed: tuple[Path, bytes, list[str]], where: str) -> None:
    base, wal_bytes, ids = killed
    state = base / "state"
    offset = {"first frame": 32, "middle": len(wal_bytes) // 2, "near the end": -8192}[where]
    damaged = bytearray(wal_bytes)
    start = offset % len(damaged)
    damaged[start : start + len(GARBAGE)] = GARBAGE
    (state / "agentd.db-wal").write_bytes(bytes(damaged))
    (state / "agentd.db-shm").unlink(missing_ok=True)
    records = _owner_records(base)
    assert set(ids) <= records

    out = _serve(base)

    assert out.returncode == 2, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("agentd:")]
    assert len(lines) == 1, out.stderr
    assert str(state / "agentd.db") in lines[0]
    assert "restore it from a backup" in lines[0] and "--accept-journal-loss" in lines[0]
    assert "Traceback" not in out.stderr, out.stderr
    # Nothing of the sessions was touched by the refused start.
    assert _owner_records(base) == records


def test_undamaged_log_starts_with_every_session(
    killed: tuple[Path, bytes, list[str]],
) -> None:
    base, wal_bytes, ids = killed
    state = base / "state"
    (state / "agentd.db-wal").write_bytes(wal_bytes)
    (state / "agentd.db-shm").unlink(missing_ok=True)
    daemon = start_daemon(base)
    try:
        with Client(daemon.socket, timeout=60) as c:
            assert {s.id for s in c.list_sessions()} >= set(ids)
    finally:
        assert daemon.stop() == 0, daemon.log


def test_accepting_the_loss_starts_with_what_is_held(tmp_path: Path, workspace: Path) -> None:
    """A damaged log again, then `--accept-journal-loss`: the daemon serves with what the
    database holds and says in its log what it went on without."""
    base = tmp_path / "d"
    daemon = start_daemon(base)
    db = Path(daemon.state_dir) / "agentd.db"
    reader = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM sessions").fetchone()
    try:
        with Client(daemon.socket, timeout=60) as c:
            c.create_session(str(workspace), name="lost")
    finally:
        daemon.stop(signal.SIGKILL)
        reader.close()
    wal = Path(str(db) + "-wal")
    with open(wal, "r+b") as f:
        f.seek(32)
        f.write(GARBAGE)
    Path(str(db) + "-shm").unlink(missing_ok=True)
    assert _serve(base).returncode == 2

    again = start_daemon(base, ["--accept-journal-loss"])
    try:
        line = again.wait_for_log("--accept-journal-loss")
        assert "lacks" in line
        with Client(again.socket, timeout=60) as c:
            assert not [s for s in c.list_sessions() if s.name == "lost"]
    finally:
        assert again.stop() == 0, again.log
    # The next start counts from what it went on with: no refusal.
    third = start_daemon(base)
    wait_until(lambda: third.proc.poll() is None, 5, "a running daemon")
    assert third.stop() == 0, third.log
