"""The engine wired into a real daemon, through the real client."""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import pytest

from agentd_client import Client


@pytest.fixture
def session_id(client: Client, workspace: Path) -> str:
    """A session in default mode: edits ask the people attached."""
    return client.create_session(str(workspace), permission_mode="default").id


def test_nobody_attached_is_denied_with_how_to(
    client: Client, session_id: str, workspace: Path
) -> None:
    r = client.run_tool(session_id, "Write", {"file_path": "a.txt", "content": "x"})
    assert r.is_error
    assert f"agentctl attach {session_id}" in r.text
    assert not (workspace / "a.txt").exists()


def test_malformed_rule_is_refused(client: Client, session_id: str) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        client.update_permissions(session_id, allow=["Bash(npm test"])
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "closing ')'" in (raised.value.details() or "")


def test_session_rule_and_mode_apply(client: Client, session_id: str, workspace: Path) -> None:
    client.update_permissions(session_id, allow=["Write(/a.txt)"])
    r = client.run_tool(session_id, "Write", {"file_path": "a.txt", "content": "x"})
    assert not r.is_error, r.text
    client.update_permissions(session_id, mode="plan")
    r = client.run_tool(session_id, "Write", {"file_path": "b.txt", "content": "x"})
    assert r.is_error and "plan mode" in r.text


def test_an_attached_client_answers(client: Client, session_id: str, workspace: Path) -> None:
    stream = client.attach(session_id)
    answers: list[object] = []

    def answer() -> None:
        for event in stream:
            if event.WhichOneof("kind") == "permission_requested":
                req = event.permission_requested
                answers.append(client.resolve_permission(session_id, req.request_id, "allow"))
                answers.append(client.resolve_permission(session_id, req.request_id, "deny"))
                return

    assert stream.wait_attached()  # the daemon counts it: the call has someone to ask
    answerer = threading.Thread(target=answer)
    answerer.start()
    try:
        r = client.run_tool(session_id, "Write", {"file_path": "c.txt", "content": "y"})
        answerer.join(30)
    finally:
        stream.cancel()
    assert not r.is_error, r.text
    assert (workspace / "c.txt").read_text() == "y"
    first, late = answers
    assert first.accepted and not late.accepted  # type: ignore[attr-defined]
