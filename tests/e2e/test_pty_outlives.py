"""A task's terminal outlives the daemon as the task does (issue 22): the shim owns the
PTY's master, so after a kill -9 of the daemon and a new one on the same state dir, a
person attaches again and types into the same REPL. The attached client sees the daemon
go, says so on one line and gives its terminal back. Real daemons, real ptys."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client.v1 import agentd_pb2 as pb
from tests.e2e.test_tasks_outlive import Node, _shims_of
from tests.support.screen import Terminal
from tests.support.waiting import wait_until


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path / "d")
    try:
        yield n
    finally:
        n.cleanup()


def test_kill_9_the_daemon_then_attach_again_and_type(node: Node, workspace: Path) -> None:
    with node.client() as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        started = c.stub.StartTask(
            pb.StartTaskRequest(
                session_id=sid, command="python3 -i -q", pty=pb.TerminalSize(rows=20, cols=70)
            )
        )
    task_id = started.task_id
    with Terminal("attach-task", "--socket", node.daemon.socket, task_id, rows=20, cols=70) as term:
        term.wait_for(">>>")
        term.send("kept = 'before the restart'\r")
        term.wait_for(lambda t: t.text().count(">>>") >= 2, what="the second prompt")
        node.daemon.stop(signal.SIGKILL)
        assert term.wait_exit() == 2  # the daemon went: the link says so and ends
        lost = term.raw.decode(errors="replace")
        assert re.search(rf"lost the daemon .*task {task_id} runs on", lost), lost
        assert b"\r\nagentctl: lost the daemon" in term.raw  # said on a line of its own
    node.restart()
    with node.client() as c:
        assert [t.status for t in c.list_tasks(sid) if t.id == task_id] == ["running"]
    with Terminal("attach-task", "--socket", node.daemon.socket, task_id, rows=20, cols=70) as term:
        term.wait_for("before the restart", what="the replayed output")
        term.send("kept.upper(), 6 * 7\r")
        term.wait_for("('BEFORE THE RESTART', 42)")
        term.send("import os; os.get_terminal_size()\r")
        term.wait_for("columns=70, lines=20")  # the PTY kept its size
        term.send("exit()\r")
        assert term.wait_exit() == 0
    with node.client() as c:
        wait_until(
            lambda: [t.status for t in c.list_tasks(sid) if t.id == task_id] == ["completed"]
        )
    wait_until(lambda: not _shims_of(node.daemon.state_dir), what="no shim left")
