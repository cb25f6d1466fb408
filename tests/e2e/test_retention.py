"""The state stays bounded: a closed session's temp dir goes at once, its journal and
output files after its retention time (or sooner past the size cap), idle sessions are
closed by the daemon itself, and the numbers show in `agentctl status`."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agentd.sessions import tmp_owners
from agentd_client import AgentdError, Client
from tests.support import ctl
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import wait_until


def _daemon(
    tmp_path: Path, tmp_owners_dir: Path | None = None, **settings: object
) -> DaemonProcess:
    lines = [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    config = tmp_path / "agentd.toml"
    config.write_text("\n".join(lines) + "\n")
    return start_daemon(tmp_path / "d", ["--config", str(config)], tmp_owners_dir=tmp_owners_dir)


@pytest.fixture
def quick(tmp_path: Path) -> Iterator[DaemonProcess]:
    """A daemon that closes sessions idle 3 s and reaps them 1 s after they close."""
    daemon = _daemon(
        tmp_path, session_idle_seconds=3.0, retention_seconds=1.0, reap_interval_seconds=0.3
    )
    yield daemon
    assert daemon.stop() == 0, daemon.log
    assert "Traceback" not in daemon.log, daemon.log


def _dirs(c: Client, sid: str, state_dir: str) -> dict[str, str]:
    """Where the session's temp dir, output dir and saved results are."""
    tmp = c.run_tool(sid, "Bash", {"command": 'printf %s "$TMPDIR"'})
    return {
        "tmp": tmp.text,
        "out": os.path.join(os.path.dirname(tmp.text), "output"),  # <base>/<sid>/output
        "state": os.path.join(state_dir, "sessions", sid),
    }


def test_idle_sessions_closed_then_reaped(quick: DaemonProcess, workspace: Path) -> None:
    with Client(quick.socket, timeout=30) as c:
        idle = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        busy = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        dirs = _dirs(c, idle, quick.state_dir)
        # Output to keep after close (a background task's file), and a saved result as
        # a large Grep or Glob result leaves it.
        c.run_tool(idle, "Bash", {"command": "echo kept", "run_in_background": True})
        os.makedirs(os.path.join(dirs["state"], "tool-results"))
        Path(dirs["state"], "tool-results", "toolu_x.txt").write_text("saved")
        assert all(os.path.isdir(d) for d in dirs.values()), dirs
        c.run_tool(busy, "Bash", {"command": "sleep 60", "run_in_background": True})

        # Closed by the daemon once idle; its temp dir goes at once, the rest stays
        # until its retention ends.
        wait_until(lambda: c.get_session(idle).closed, 15)
        assert not os.path.exists(dirs["tmp"])
        # Reaped: rows, journal and files gone.
        wait_until(lambda: idle not in {s.id for s in c.list_sessions(include_closed=True)}, 15)
        with pytest.raises(AgentdError) as gone:
            c.get_session(idle)
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND
        assert not os.path.exists(dirs["out"]) and not os.path.exists(dirs["state"])
        # The one with a running task is neither closed nor reaped.
        assert not c.get_session(busy).closed
        st = c.status().state
        assert st.sessions_idle_closed >= 1 and st.sessions_reaped >= 1
        assert st.retention_seconds == 1.0 and st.session_idle_seconds == 3.0
        c.close_session(busy)
    status = ctl.run("--socket", quick.socket, "status", "--json")
    assert json.loads(status.stdout)["state"]["sessions_reaped"] >= 1
    text = ctl.run("--socket", quick.socket, "status").stdout
    assert "closed idle" in text and "reaped since start" in text


def test_size_cap_reaps_oldest_closed_first(tmp_path: Path, workspace: Path) -> None:
    # No idle closing, a week's retention: only the cap can reap here.
    daemon = _daemon(tmp_path, session_idle_seconds=0, state_max_bytes=1, reap_interval_seconds=0.3)
    try:
        with Client(daemon.socket, timeout=30) as c:
            old, new, open_ = (
                c.create_session(str(workspace), permission_mode="bypassPermissions").id
                for _ in range(3)
            )
            c.close_session(old)
            c.close_session(new)
            # Over the cap (1 byte) both closed ones go, the open one never does.
            left = lambda: {s.id for s in c.list_sessions(include_closed=True)}  # noqa: E731
            wait_until(lambda: left() == {open_}, 15, lambda: daemon.log)
            assert c.status().state.used_bytes > 1
        # Logged after the rows go, by another thread: wait for the lines themselves.
        daemon.wait_for_log(f"reaped session {old}")
        daemon.wait_for_log(f"reaped session {new}")
        reaped = [line for line in daemon.log_lines if "reaped session" in line]
        assert old in reaped[0] and new in reaped[1], reaped
    finally:
        assert daemon.stop() == 0, daemon.log


def test_temp_dirs_left_by_a_crash_go_at_start(tmp_path: Path, workspace: Path) -> None:
    daemon = _daemon(tmp_path, session_idle_seconds=0)
    try:
        with Client(daemon.socket, timeout=30) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            tmp = _dirs(c, sid, daemon.state_dir)["tmp"]
            c.close_session(sid)
            # As if the daemon had died before removing it.
            os.mkdir(tmp)
            (Path(tmp) / "left").write_text("x")
    finally:
        assert daemon.stop() == 0, daemon.log
    again = start_daemon(tmp_path / "d", ["--config", str(tmp_path / "agentd.toml")])
    try:
        wait_until(lambda: not os.path.exists(tmp), 15)
    finally:
        assert again.stop() == 0, again.log


@pytest.mark.parametrize("field", ["idle_seconds", "reap_after_seconds"])
@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf"), 1e300])
def test_collect_refuses_out_of_range_times(client: Client, field: str, value: float) -> None:
    with pytest.raises(AgentdError) as refused:
        client.collect_sessions(**{field: value}, dry_run=True)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in refused.value.details()


def test_directories_of_a_daemon_gone_for_good_are_removed(tmp_path: Path, workspace: Path) -> None:
    # A daemon whose state dir is deleted (as a test's is) leaves its sessions'
    # directories under /tmp; the next daemon to start removes them, once the record
    # is older than the grace time, and nothing a record names outside them. Both
    # daemons keep their records in an owners dir of this test's: in the machine's,
    # any other daemon of this uid could sweep them first.
    owners = tmp_path / "owners"
    gone = start_daemon(tmp_path / "gone", tmp_owners_dir=owners)
    try:
        with Client(gone.socket, timeout=30) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            dirs = _dirs(c, sid, gone.state_dir)
            c.run_tool(sid, "Bash", {"command": "echo out", "run_in_background": True})
    finally:
        assert gone.stop() == 0, gone.log
    assert os.path.isdir(dirs["tmp"]) and os.path.isdir(dirs["out"])
    record = owners / sid
    assert json.loads(record.read_text())["state_dir"] == gone.state_dir
    shutil.rmtree(gone.state_dir)
    hour_ago = time.time() - tmp_owners.GRACE_SECONDS - 60
    os.utime(record, (hour_ago, hour_ago))
    # Two forged records: one whose owner still has its database (kept), one naming a
    # path that is no session directory (the record goes, the path stays).
    live, forged = uuid.uuid4().hex, uuid.uuid4().hex
    victim = tmp_path / "victim"
    victim.mkdir()
    other_state = tmp_path / "other" / "state"
    other_state.mkdir(parents=True)
    (other_state / "agentd.db").write_bytes(b"")
    (owners / live).write_text(json.dumps({"state_dir": str(other_state), "paths": []}))
    (owners / forged).write_text(
        json.dumps({"state_dir": str(tmp_path / "nowhere"), "paths": [str(victim)]})
    )
    for name in (live, forged):
        os.utime(owners / name, (hour_ago, hour_ago))

    daemon = _daemon(tmp_path, tmp_owners_dir=owners, session_idle_seconds=0)
    try:
        # Logged once the sweep is through: the gone daemon's session and the forged one.
        daemon.wait_for_log("removed the directories of 2 sessions whose daemon is gone")
        assert not record.exists() and not (owners / forged).exists()
        assert not os.path.exists(dirs["tmp"]) and not os.path.exists(dirs["out"])
        # Its base in /tmp (agentd/sessions/dirs.py) went with its last session.
        assert not os.path.exists(os.path.dirname(os.path.dirname(dirs["tmp"])))
        assert victim.is_dir()
        assert (owners / live).exists()
    finally:
        assert daemon.stop() == 0, daemon.log


def test_the_start_sweep_keeps_a_session_made_while_it_runs(tmp_path: Path) -> None:
    """The sweep runs while the daemon serves: a session of its own state dir that its
    start-time list lacks, but whose record is newer than its start, was just made."""
    owners, state = str(tmp_path / "owners"), tmp_path / "state"
    started = time.time()
    made_now, left_before = uuid.uuid4().hex, uuid.uuid4().hex
    base = Path(tempfile.mkdtemp(prefix="agentd-", dir="/tmp"))  # as dirs.py names one
    dirs = {sid: base / sid for sid in (made_now, left_before)}
    try:
        for sid, path in dirs.items():
            path.mkdir(parents=True)
            tmp_owners.record(owners, sid, str(state), [str(path)])
        before = started - 10
        os.utime(Path(owners, left_before), (before, before))
        # A file's time is the kernel's coarse clock, a tick behind time.time(): a record
        # written just after the start may read a few milliseconds older than it.
        os.utime(Path(owners, made_now), (started - 0.004, started - 0.004))
        # Not known to the store: left as they are, and named.
        assert tmp_owners.sweep(owners, str(state), lambda sid: False, started) == (
            0,
            [left_before],
        )
        assert dirs[left_before].is_dir() and Path(owners, left_before).exists()
        # Removed only when asked (a test run's end): still not the one made since.
        assert tmp_owners.sweep(
            owners, str(state), lambda sid: False, started, remove_unknown=True
        ) == (1, [])
        assert dirs[made_now].is_dir() and not dirs[left_before].exists()
        assert Path(owners, made_now).exists()
        assert not Path(owners, left_before).exists()
    finally:
        shutil.rmtree(base, ignore_errors=True)
