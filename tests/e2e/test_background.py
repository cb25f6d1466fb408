"""A person's daemon: in the foreground it says what to do next; `agentd serve
--detach` (`make run-background`) returns once it serves, and `agentd stop` stops it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agentd_client import Client
from tests.support.daemon import start_daemon


def test_the_foreground_daemon_says_what_to_do_next(tmp_path: Path) -> None:
    daemon = start_daemon(tmp_path / "d")
    try:
        line = daemon.wait_for_log("in another terminal")
        assert "`agentctl status`" in line and "agentctl session new" in line, line
        assert "--detach" in line, line
    finally:
        assert daemon.stop() == 0, daemon.log


def test_detach_starts_serves_and_stops(tmp_path: Path, workspace: Path) -> None:
    socket, state = str(tmp_path / "run" / "agentd.sock"), str(tmp_path / "state")
    where = ["--socket", socket, "--state-dir", state]
    started = subprocess.run(
        [sys.executable, "-m", "agentd", "serve", "--detach", *where]
        + ["--tmp-owners-dir", str(tmp_path / "owners"), "--stop-tasks-on-exit"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert started.returncode == 0, started.stderr
    assert "running in the background" in started.stdout, started.stdout
    assert f"{state}/agentd.log" in started.stdout and "agentd stop" in started.stdout
    try:
        with Client(socket, timeout=60) as c:
            pid = c.status().pid
            sid = c.create_session(str(workspace)).id
            assert c.run_tool(sid, "Bash", {"command": "echo hi"}).text.startswith("hi")
        # A second one refuses: the first still serves.
        again = subprocess.run(
            [sys.executable, "-m", "agentd", "serve", "--detach", *where],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert again.returncode == 1 and "already serves" in again.stderr, again.stderr
    finally:
        stopped = subprocess.run(
            [sys.executable, "-m", "agentd", "stop", *where],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert stopped.returncode == 0, stopped.stderr
    assert not os.path.exists(f"/proc/{pid}/stat") or _zombie(pid)
    assert "agentd serving on unix:" in Path(state, "agentd.log").read_text()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True
