"""A burst of output on an attached terminal (issue 19.1): a prompt raised in the middle
of 300,000 lines shows at once and is answered; the skipped lines are counted and named
with where to read them; the status line says how the command ended."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from agentd_client import Client
from tests.support.daemon import DaemonProcess
from tests.support.screen import Terminal, plain_lines

BURST = "for i in $(seq 1 300000); do echo burst-line-$i; done"


def test_a_prompt_raised_during_a_300000_line_burst_shows_and_is_answered(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), permission_mode="default").id
    with Terminal("--socket", daemon.socket, "attach", sid, rows=40, cols=160) as term:
        client.run_tool(sid, "Glob", {"pattern": "burst-ready"})
        term.wait_for("burst-ready")
        # Read-only: it runs unasked, in the background, and prints 300,000 lines.
        r = client.run_tool(sid, "Bash", {"command": BURST, "run_in_background": True})
        assert not r.is_error, r.text
        task_id = r.data["backgroundTaskId"]
        term.wait_for("burst-line-", what="the burst on the screen")
        out: dict[str, Any] = {}
        writer = threading.Thread(
            target=lambda: out.update(
                r=client.run_tool(sid, "Write", {"file_path": "mid.txt", "content": "m"})
            )
        )
        writer.start()
        term.wait_for(
            lambda t: t.last_line().startswith("╰ Allow?") and "mid.txt" in t.text(),
            what="the prompt raised mid-burst",
        )
        term.send("y\n")
        writer.join(60)
        assert not out["r"].is_error, out["r"].text
        assert (workspace / "mid.txt").read_text() == "m"
        term.wait_for("burst-line-300000", what="the end of the burst")
        # Written, though the burst's last frames may have scrolled it off the screen since.
        ended = f"task {task_id} completed with exit code 0"
        term.wait_for(lambda t: any(ended in ln for ln in plain_lines(t.raw)), what=ended)
    written = plain_lines(term.raw)
    skips = [ln for ln in written if re.search(r"… [\d,]+ lines, see `agentctl logs", ln)]
    assert skips, "a burst this size is skipped, not written line by line"
    assert all(f"--from-start {task_id}`" in ln for ln in skips), skips[:3]
    shown = sum(1 for ln in written if ln.startswith("burst-line-"))
    skipped = sum(int(re.search(r"… ([\d,]+) lines", ln)[1].replace(",", "")) for ln in skips)
    assert shown + skipped == 300000, (shown, skipped)


def test_the_status_line_says_how_a_finished_command_ended(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    """While its last output is still being shown, a finished command's status line says
    how it ended; its event line says the exit status, not its first line of output."""
    with Terminal("--socket", daemon.socket, "attach", session_id, cols=160) as term:
        client.run_tool(session_id, "Glob", {"pattern": "status-ready"})
        term.wait_for("status-ready")
        r = client.run_tool(session_id, "Bash", {"command": "echo first-line; exit 3"})
        assert r.is_error
        term.wait_for(lambda t: any("✗ Bash" in ln and "exit 3" in ln for ln in t.lines()))
        finished = next(ln for ln in term.lines() if "✗ Bash" in ln)
        assert "first-line" not in finished, finished
