"""The daemon end to end through the real client: status, sessions, bad input."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import grpc
import pytest

from agentd_client import Client
from agentd_client.core.errors import InvalidRequest
from tests.support.daemon import DaemonProcess, start_daemon


def test_status_answers(client: Client, daemon: DaemonProcess) -> None:
    st = client.status()
    assert st.pid == daemon.proc.pid
    assert st.socket_path == daemon.socket


def test_socket_is_private(daemon: DaemonProcess) -> None:
    assert stat.S_IMODE(os.stat(daemon.socket).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(daemon.socket)).st_mode) == 0o700


def test_session_lifecycle(client: Client, workspace: Path) -> None:
    s = client.create_session(str(workspace), name="t", labels={"k": "v"}, env={"A": "1"})
    assert s.cwd == str(workspace.resolve())
    assert client.get_session(s.id).labels["k"] == "v"
    assert s.id in [x.id for x in client.list_sessions()]
    client.close_session(s.id)
    assert s.id not in [x.id for x in client.list_sessions()]
    assert s.id in [x.id for x in client.list_sessions(include_closed=True)]
    with pytest.raises(grpc.RpcError) as err:
        client.run_tool(s.id, "Read", {"file_path": "x"})
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_a_name_is_unique_among_open_sessions(client: Client, workspace: Path) -> None:
    first = client.create_session(str(workspace), name="unique-name")
    with pytest.raises(grpc.RpcError) as err:
        client.create_session(str(workspace), name="unique-name")
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "already open" in err.value.details() and first.id in err.value.details()
    # Nothing was made of the refused one.
    named = [s for s in client.list_sessions(include_closed=True) if s.name == "unique-name"]
    assert [s.id for s in named] == [first.id]
    # Closed, the name is free again; a name that reads as an id is refused.
    client.close_session(first.id)
    again = client.create_session(str(workspace), name="unique-name")
    assert again.id != first.id
    client.close_session(again.id)
    with pytest.raises(grpc.RpcError) as err:
        client.create_session(str(workspace), name="0123456789abcdef0123456789abcdef")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    "roots,cwd",
    [([], ""), (["relative/dir"], ""), (["/nonexistent/agentd"], ""), (["/tmp"], "/etc")],
)
def test_bad_sessions_are_refused(client: Client, roots: list[str], cwd: str) -> None:
    from agentd_client.v1 import agentd_pb2 as pb

    with pytest.raises(grpc.RpcError) as err:
        client.stub.CreateSession(pb.CreateSessionRequest(workspace_roots=roots, cwd=cwd))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details()


def test_unknown_session(client: Client) -> None:
    with pytest.raises(grpc.RpcError) as err:
        client.run_tool("nope", "Read", {"file_path": "x"})
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "agentctl session ls" in err.value.details()


def test_unknown_tool(client: Client, session_id: str) -> None:
    r = client.run_tool(session_id, "NoSuchTool", {})
    assert r.is_error
    assert r.text == "<tool_use_error>Error: No such tool available: NoSuchTool</tool_use_error>"


@pytest.mark.parametrize(
    "raw,needle",
    [("{not json", "not valid JSON"), ("[1, 2]", "must be a JSON object, not list")],
)
def test_input_text_that_is_no_json_object_is_refused(
    client: Client, session_id: str, raw: str, needle: str
) -> None:
    """Input travels as a Struct: text that is not a JSON object cannot be sent at all."""
    with pytest.raises(InvalidRequest) as err:
        client.run_tool(session_id, "Read", raw)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert needle in str(err.value) and "Read input" in str(err.value)


@pytest.mark.parametrize(
    "raw,needle",
    [
        ("{}", "The required parameter `file_path` is missing"),
        (
            '{"file_path": "x", "limit": "ten"}',
            "The parameter `limit` type is expected as `number` but provided as `string`",
        ),
        ('{"file_path": 5}', "`file_path` type is expected as `string`"),
        ('{"file_path": "x", "bogus": 1}', "unexpected parameter `bogus`"),
    ],
)
def test_bad_input_is_a_tool_error(client: Client, session_id: str, raw: str, needle: str) -> None:
    r = client.run_tool(session_id, "Read", raw)
    assert r.is_error
    assert r.text.startswith("<tool_use_error>")
    assert needle in r.text


def test_usual_slips_are_coerced(client: Client, session_id: str, workspace: Path) -> None:
    (workspace / "n.txt").write_text("".join(f"{i}\n" for i in range(1, 10)))
    r = client.run_tool(session_id, "Read", {"file_path": "n.txt", "offset": "3", "limit": "2"})
    assert not r.is_error, r.text
    assert r.text.startswith("3\t3\n4\t4")


def test_huge_input_is_refused_and_daemon_serves_on(client: Client, session_id: str) -> None:
    with pytest.raises(grpc.RpcError) as err:
        client.run_tool(session_id, "Write", {"file_path": "big", "content": "x" * (20 << 20)})
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert client.status().pid


def test_disconnect_mid_call_keeps_daemon_serving(daemon: DaemonProcess, session_id: str) -> None:
    c = Client(daemon.socket)
    stream = c.stream_tool(session_id, "Glob", {"pattern": "**/*"})
    stream.cancel() if hasattr(stream, "cancel") else None
    c.close()
    with Client(daemon.socket) as again:
        assert again.status().pid == daemon.proc.pid


@pytest.mark.parametrize("env", [{"": "x"}, {"A=B": "x"}, {"A": "x\0y"}])
def test_bad_session_environment_is_refused(client: Client, workspace: Path, env) -> None:
    with pytest.raises(grpc.RpcError) as err:
        client.create_session(str(workspace), env=env)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    "tool,args",
    [
        ("Read", {"file_path": "a\0b"}),
        ("Write", {"file_path": "a\0b", "content": "x"}),
        ("Edit", {"file_path": "a\0b", "old_string": "", "new_string": "x"}),
        ("Glob", {"pattern": "a\0b"}),
        ("Grep", {"pattern": "a\0b"}),
        ("LS", {"path": "a\0b"}),
    ],
)
def test_nul_bytes_are_input_errors(client: Client, session_id: str, tool: str, args) -> None:
    r = client.run_tool(session_id, tool, args)
    assert r.is_error
    assert r.text.startswith("<tool_use_error>") and "NUL" in r.text


def test_a_daemon_that_does_not_start_shows_its_log_tail(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as failed:
        start_daemon(tmp_path / "d", ["--config", str(tmp_path / "missing.toml")])
    message = str(failed.value)
    assert "agentd did not start (exited with" in message
    assert "cannot read config file" in message  # the tail of what it logged
