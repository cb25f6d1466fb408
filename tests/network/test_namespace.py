"""A proxied session's network namespace is the session's, not the call's: a server a
background task starts is reached by the session's later calls, across a restart of
the daemon, and by no other session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentd_client import Client
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(180)

FETCH = "curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:38017/marker.txt"


def bash(c: Client, sid: str, command: str) -> str:
    return c.run_tool(sid, "Bash", {"command": command}).text


def test_a_tasks_server_is_the_sessions_across_calls_and_a_restart(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / "marker.txt").write_text("IN-THE-SESSIONS-NAMESPACE\n")
    base = tmp_path / "d"
    daemon = start_daemon(base, keep_tasks=True)
    try:
        with Client(daemon.socket, timeout=60) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            other = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            r = c.run_tool(
                sid,
                "Bash",
                {
                    "command": "exec python3 -m http.server 38017 --bind 127.0.0.1",
                    "run_in_background": True,
                },
            )
            assert not r.is_error, r.text
            wait_until(
                lambda: "IN-THE-SESSIONS-NAMESPACE" in bash(c, sid, FETCH),
                timeout=60,
                what="the task's server, from a later call",
                interval=0.2,
            )
            assert "IN-THE-SESSIONS" not in bash(c, other, FETCH)
        daemon.stop(signal.SIGTERM)  # the task runs on
        daemon = start_daemon(base, keep_tasks=True)
        with Client(daemon.socket, timeout=60) as c:
            assert "IN-THE-SESSIONS-NAMESPACE" in bash(c, sid, FETCH)
            # The new daemon's proxy listens in the same namespace.
            out = bash(c, sid, "curl -sS http://unknown.invalid/")
            assert "agentd refused the connection to unknown.invalid:80" in out, out
            c.close_session(sid)
        assert not os.path.exists(os.path.join(daemon.state_dir, "netns", sid))
    finally:
        subprocess.run(
            [sys.executable, "-m", "agentd", "stop", "--tasks", "--socket", daemon.socket]
            + ["--state-dir", daemon.state_dir],
            capture_output=True,
            timeout=60,
        )
        daemon.stop(signal.SIGKILL)


def test_searches_make_no_namespace(daemon: DaemonProcess, client: Client, workspace: Path) -> None:
    """Grep and Glob run with no network: they neither make the session's namespace nor
    walk its protected paths; its first Bash call makes the namespace."""
    (workspace / "a.txt").write_text("needle\n")
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    netns = Path(daemon.state_dir) / "netns" / sid
    assert not client.run_tool(sid, "Grep", {"pattern": "needle"}).is_error
    assert not client.run_tool(sid, "Glob", {"pattern": "*.txt"}).is_error
    assert not netns.exists()
    assert not client.run_tool(sid, "Bash", {"command": "true"}).is_error
    assert netns.exists()
