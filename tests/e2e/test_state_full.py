"""A full state disk: every call answered clearly, a Read still works, nothing is
half-created, and all works again once space is freed.

The state dir is a small tmpfs this test mounts on a directory it made itself, and
unmounts in a finally (the test runs as root; it mounts nowhere else).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agentd_client import AgentdError, Client
from tests.conftest import SANDBOX_UID
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

BIG = "x" * (3 * 1024 * 1024)  # more than the whole state disk


@contextlib.contextmanager
def small_state_disk() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="agentd-full-"))
    state = base / "state"
    state.mkdir(mode=0o700)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(state)], check=True
    )
    try:
        yield base
    finally:
        subprocess.run(["umount", "-l", str(state)], check=True)
        shutil.rmtree(base)


def fill(state: Path) -> Path:
    filler = state / "filler"
    with open(filler, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    return filler


def _journaled(state: Path, session_id: str, kind: str) -> int:
    """The session's events of `kind` committed to the daemon's journal, as a reader sees
    them (and with them every event before: commits are whole groups)."""
    with contextlib.closing(sqlite3.connect(f"file:{state / 'agentd.db'}?mode=ro", uri=True)) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM events WHERE session_id = ? AND kind = ?", (session_id, kind)
        ).fetchone()
    return int(count)


@pytest.fixture
def full_daemon(workspace: Path) -> Iterator[tuple[DaemonProcess, Path]]:
    with small_state_disk() as base:
        daemon = start_daemon(base)
        try:
            yield daemon, base / "state"
        finally:
            assert daemon.stop() == 0, daemon.log


def test_full_state_disk(full_daemon: tuple[DaemonProcess, Path], workspace: Path) -> None:
    daemon, state = full_daemon
    (workspace / "a.txt").write_text("hello\n")
    os.chown(workspace / "a.txt", SANDBOX_UID, SANDBOX_UID)
    with Client(daemon.socket, timeout=30) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        assert not c.run_tool(sid, "Bash", {"command": "echo before"}).is_error
        # Its events committed (commits are grouped), before the disk fills.
        wait_until(lambda: _journaled(state, sid, "call_finished"), what="the call journaled")
        filler = fill(state)

        # A session that cannot be stored is refused and does not exist afterwards.
        before = {s.id for s in c.list_sessions(include_closed=True)}
        with pytest.raises(AgentdError) as refused:
            c.create_session(str(workspace), labels={"big": BIG})
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "state disk is full" in refused.value.details()
        assert {s.id for s in c.list_sessions(include_closed=True)} == before

        # A write whose call could not be journaled is refused, as a tool result.
        written = c.run_tool(sid, "Write", {"file_path": str(workspace / "b.txt"), "content": BIG})
        assert written.is_error and "state disk is full" in written.text, written
        assert not (workspace / "b.txt").exists()

        # A Read needs no storage: it works (its journal entry may be lost).
        read = c.run_tool(sid, "Read", {"file_path": str(workspace / "a.txt")})
        assert not read.is_error and "hello" in read.text

        # Replaying the journal needs no space either.
        stream = c.attach(sid, 0, timeout=20)
        first = next(iter(stream))
        stream.cancel()
        assert first.WhichOneof("kind") == "call_started", first

        # Smaller calls either work or are refused clearly, never an internal error.
        for name, args in (
            ("Bash", {"command": "echo hi"}),
            ("Write", {"file_path": str(workspace / "c.txt"), "content": "c"}),
        ):
            result = c.run_tool(sid, name, args)
            assert not result.is_error or "state disk is full" in result.text, result
        try:
            small = c.create_session(str(workspace)).id
            assert small in {s.id for s in c.list_sessions()}
        except AgentdError as exc:
            assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc

        filler.unlink()
        again = c.create_session(str(workspace), labels={"big": "y" * 100_000}).id
        assert again in {s.id for s in c.list_sessions()}
        written = c.run_tool(sid, "Write", {"file_path": str(workspace / "b.txt"), "content": "b"})
        assert not written.is_error, written
        assert (workspace / "b.txt").read_text() == "b"
    assert "Traceback" not in daemon.log, daemon.log
    assert daemon.log.count("state disk full") == 1, daemon.log
