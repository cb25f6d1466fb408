"""`agentctl attach` across a daemon restart, and a late `attach --from start` (issue
19.10): it says the daemon went away, reconnects with back-off, and goes on after the
last event it showed (nothing twice, nothing lost); a replay shows each finished call's
output from its file, before the call's end."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.screen import Terminal, plain_lines
from tests.support.waiting import task_finished, wait_for_event


@pytest.fixture
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="agentd-restart-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_attach_reconnects_after_a_restart_and_goes_on_after_the_last_event(
    base: Path, workspace: Path
) -> None:
    first = start_daemon(base)
    second: DaemonProcess | None = None
    try:
        with Client(first.socket) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            with Terminal("--socket", first.socket, "attach", sid) as term:
                c.run_tool(sid, "Bash", {"command": "echo printed-before-restart"})
                term.wait_for("exit 0")
                assert first.stop() == 0
                term.wait_for("lost the daemon", what="that the daemon went away")
                second = start_daemon(base)
                term.wait_for("reconnected to agentd", what="the reconnection")
                with Client(second.socket) as c2:
                    c2.run_tool(sid, "Bash", {"command": "echo printed-after-restart"})
                term.wait_for(lambda t: "printed-after-restart" in t.lines(), what="new output")
                assert term.proc.poll() is None  # still attached
        written = plain_lines(term.raw)
        # Nothing shown twice: the replay went on after the last event shown.
        assert written.count("printed-before-restart") == 1, written
        assert sum("✓ Bash" in ln for ln in written) == 2, written
        notes = [ln for ln in written if "reconnected to agentd" in ln]
        assert len(notes) == 1 and f"pid {second.proc.pid}" in notes[0], notes
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_attach_from_start_replays_finished_calls_output(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    client.run_tool(session_id, "Bash", {"command": "for i in 1 2 3; do echo replay-a-$i; done"})
    task = client.run_tool(
        session_id, "Bash", {"command": "echo replay-task", "run_in_background": True}
    )
    task_id = task.data["backgroundTaskId"]
    client.run_tool(session_id, "Bash", {"command": "echo replay-b; exit 4"})
    client.run_tool(session_id, "Glob", {"pattern": "replay-end"})
    wait_for_event(client, session_id, task_finished(task_id))
    with Terminal("--socket", daemon.socket, "attach", session_id, "--from", "start") as term:
        term.wait_for("replay-end")
        term.wait_for(lambda t: "replay-b" in t.lines())
    written = plain_lines(term.raw)

    def at(text: str) -> int:
        return next(i for i, ln in enumerate(written) if ln == text or text in ln)

    # Each call's output between its start and its end, in the order they ran.
    assert at("▶ Bash") < at("replay-a-1") < at("replay-a-3") < at("✓ Bash")
    assert "exit 0" in written[at("✓ Bash")]
    assert written.index("replay-task") < at(f"task {task_id} completed")
    assert at("echo replay-b") < written.index("replay-b") < at("✗ Bash"), written
    assert "exit 4" in written[at("✗ Bash")]
    assert written.index("replay-b") < at("replay-end")
