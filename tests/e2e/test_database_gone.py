"""The state database deleted under a running daemon: every RPC that reads answers, or
ends FAILED_PRECONDITION / UNAVAILABLE with a sentence saying what happened, never
INTERNAL; every RPC that would write (create, close, permissions, an agent's event,
trust, collecting) is refused at once instead of acknowledged into a database the next
start will not find."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from agentd_client import Client
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.daemon import start_daemon

ANSWERS = (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNAVAILABLE)


def _outcome(fn: Callable[[], Any]) -> tuple[grpc.StatusCode, str]:
    try:
        fn()
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


@pytest.mark.parametrize("files", ["agentd.db", "agentd.db agentd.db-wal agentd.db-shm"])
def test_reads_answer_and_writes_are_refused(tmp_path: Path, workspace: Path, files: str) -> None:
    daemon = start_daemon(tmp_path / "d")
    try:
        with Client(daemon.socket, timeout=60) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            other = c.create_session(str(workspace)).id
            done = c.run_tool(sid, "Bash", {"command": "echo hello"})
            (workspace / ".claude").mkdir()
            settings = workspace / ".claude" / "settings.json"
            settings.write_text('{"permissions": {"allow": ["Bash(ls:*)"]}}')
            sha = hashlib.sha256(settings.read_bytes()).hexdigest()
            for k in range(20):
                prompt = pb.AgentPrompt(text=f"prompt {k}")
                c.append_agent_event(sid, pb.AgentEvent(conversation_id="c", prompt=prompt))
            for name in files.split():
                os.unlink(Path(daemon.state_dir) / name)

            reads = {
                "Attach": lambda: list(c.attach(sid, 0, follow=False, timeout=30)),
                "Attach (follow)": lambda: next(iter(c.attach(sid, 0, timeout=30))),
                "ListSessions": lambda: c.list_sessions(include_closed=True),
                "GetSession": lambda: c.get_session(sid),
                "ListTasks": lambda: c.list_tasks(sid),
                "GetStatus": lambda: c.status(),
                "ReadOutput": lambda: list(c.read_output(sid, done.tool_use_id, timeout=30)),
                "ListTrust": lambda: c.list_trust(),
                "CollectSessions (dry run)": lambda: c.collect_sessions(dry_run=True),
                "Read": lambda: c.run_tool(sid, "Read", {"file_path": "/etc/hostname"}),
            }
            for name, fn in reads.items():
                code, details = _outcome(fn)
                assert code == grpc.StatusCode.OK or code in ANSWERS, (name, code, details)
                if code != grpc.StatusCode.OK:
                    assert "was deleted" in details, (name, details)

            prompt = pb.AgentPrompt(text="after")
            writes = {
                "CreateSession": lambda: c.create_session(str(workspace)),
                "CloseSession": lambda: c.close_session(other),
                "UpdatePermissions": lambda: c.update_permissions(sid, mode="acceptEdits"),
                "AppendAgentEvent": lambda: c.append_agent_event(
                    sid, pb.AgentEvent(conversation_id="c", prompt=prompt)
                ),
                "ApproveTrust": lambda: c.approve_trust(str(settings), sha),
                "CollectSessions": lambda: c.collect_sessions(idle_seconds=0),
            }
            for name, fn in writes.items():
                code, details = _outcome(fn)
                assert code == grpc.StatusCode.FAILED_PRECONDITION, (name, code, details)
                assert "refused" in details and "was deleted" in details, (name, details)
            assert {s.id for s in c.list_sessions()} == {sid, other}  # nothing closed
    finally:
        assert daemon.stop() == 0, daemon.log
    assert "Traceback" not in daemon.log, daemon.log
