"""A session's name or a unique id prefix, accepted wherever the API takes a session id
(resolved once in the daemon, agentd/api/names.py): the Python client, a raw stub, a
streaming call; an ambiguous reference refused with its candidates; people's messages
name a session by its name."""

from __future__ import annotations

import uuid
from pathlib import Path

import grpc
import pytest

from agentd_client import Client
from agentd_client.core.errors import InvalidRequest, SessionClosed, SessionNotFound
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.daemon import DaemonProcess


def _name() -> str:
    return f"web-{uuid.uuid4().hex[:8]}"


def test_the_client_takes_a_name_or_a_prefix(client: Client, workspace: Path) -> None:
    name = _name()
    sid = client.create_session(str(workspace), name=name, permission_mode="bypassPermissions").id
    (workspace / "hello.txt").write_text("hi from the workspace\n")
    try:
        assert client.get_session(name).id == sid
        assert client.get_session(sid[:12]).id == sid
        result = client.run_tool(name, "Read", {"file_path": str(workspace / "hello.txt")})
        assert "hi from the workspace" in result.text, result.text
        ran = client.run_tool(sid[:10], "Bash", {"command": "echo by-prefix"})
        assert "by-prefix" in ran.text
        # A server-streaming call: the session's journal, by name.
        events = list(client.attach(name, follow=False, timeout=30))
        assert events and all(e.session_id == sid for e in events)
        # A raw stub, as any gRPC client in any language calls it.
        got = client.stub.GetSession(pb.GetSessionRequest(session_id=name))
        assert got.id == sid
    finally:
        client.close_session(name)
    assert client.get_session(sid).closed


def test_a_stream_whose_first_message_names_the_session(client: Client, workspace: Path) -> None:
    name = _name()
    sid = client.create_session(str(workspace), name=name, permission_mode="bypassPermissions").id
    try:
        task = client.stub.StartTask(
            pb.StartTaskRequest(session_id=name, command="cat", stdin=True)
        )
        sent = client.stub.WriteInput(
            iter([pb.TaskInput(session_id=name, task_id=task.task_id), pb.TaskInput(data=b"x\n")])
        )
        assert sent.bytes == 2
        assert [t.id for t in client.list_tasks(sid)] == [task.task_id]
    finally:
        client.close_session(sid)


def test_an_ambiguous_reference_is_refused_with_its_candidates(
    client: Client, workspace: Path
) -> None:
    name = _name()
    twins = [client.create_session(str(workspace), name=name).id for _ in range(1)]
    client.close_session(twins[0])
    twins.append(client.create_session(str(workspace), name=name).id)
    client.close_session(twins[1])
    with pytest.raises(InvalidRequest) as raised:
        client.get_session(name)
    message = raised.value.details()
    assert "ambiguous" in message and all(t in message for t in twins), message
    # A prefix two sessions share.
    made: dict[str, str] = {}
    for _ in range(17):
        s = client.create_session(str(workspace)).id
        if s[:1] in made:
            pair = (made[s[:1]], s)
            break
        made[s[:1]] = s
    with pytest.raises(InvalidRequest) as raised:
        client.run_tool(pair[0][:1], "Read", {"file_path": "/etc/hostname"})
    assert "ambiguous" in raised.value.details() and pair[1] in raised.value.details()


def test_unknown_and_closed_say_so_by_name(client: Client, workspace: Path) -> None:
    with pytest.raises(SessionNotFound) as raised:
        client.get_session("no-such-session-name")
    assert "by id, name or unique id prefix" in raised.value.details()
    name = _name()
    client.create_session(str(workspace), name=name)
    client.close_session(name)
    with pytest.raises(SessionClosed) as closed:
        client.run_tool(name, "Bash", {"command": "true"})
    assert repr(name) in closed.value.details(), closed.value.details()


def test_a_name_over_grpc_without_the_python_client(daemon: DaemonProcess, workspace: Path) -> None:
    name = _name()
    with Client(daemon.socket) as c:
        sid = c.create_session(str(workspace), name=name).id
    with grpc.insecure_channel(f"unix:{daemon.socket}") as channel:
        from agentd_client.v1 import agentd_pb2_grpc

        stub = agentd_pb2_grpc.AgentdStub(channel)
        closed = stub.CloseSession(pb.CloseSessionRequest(session_id=name), timeout=30)
        assert closed.id == sid and closed.closed
