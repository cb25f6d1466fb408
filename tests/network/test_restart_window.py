"""A restart refuses no connection of a sandboxed client: the proxy's listening sockets
are held across it (agentd/foundation/holder.py), so a background task that connects to its
proxy in a loop while the daemon is killed (-9) and started again sees every connection
accepted, those made meanwhile once the next daemon takes the sockets back."""

from __future__ import annotations

import signal
from pathlib import Path

from agentd_client import Client
from tests.support.daemon import start_daemon
from tests.support.knocker import PROXY_LOOP, proxy_log
from tests.support.waiting import wait_until


def test_a_restart_refuses_no_proxied_connection(tmp_path: Path, workspace: Path) -> None:
    base = tmp_path / "d"
    daemon = start_daemon(base, keep_tasks=True)
    try:
        with Client(daemon.socket, timeout=60) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            started = c.run_tool(sid, "Bash", {"command": PROXY_LOOP, "run_in_background": True})
            assert not started.is_error, started.text
        wait_until(lambda: len(proxy_log(workspace)) >= 20, 60, "the loop's first connections")
        before = len(proxy_log(workspace))
        daemon.stop(signal.SIGKILL)
        again = start_daemon(base)  # its stop ends the task
        try:
            again.wait_for_log("took over 1 running task", timeout=60)
            wait_until(
                lambda: len(proxy_log(workspace)) >= before + 40,
                60,
                "connections after the restart",
            )
        finally:
            (workspace / "stop").touch()
            assert again.stop() == 0, again.log
    finally:
        daemon.stop(signal.SIGKILL)
    lines = proxy_log(workspace)
    refused = lines.count("refused")
    assert refused == 0, f"{refused} of {len(lines)} connections refused across the restart"
