"""Client and AsyncClient: the same methods, the caller's ids kept, deadlines, typed errors,
and gRPC waiting/retrying only for calls that read."""

from __future__ import annotations

import inspect
import threading
import time
from pathlib import Path

import grpc
import pytest
from anthropic.types import TextBlock as SDKTextBlock
from anthropic.types import ToolUseBlock

from agentd_client import AsyncClient, Client, PermissionAsk
from agentd_client.core import errors
from tests.support.daemon import DaemonProcess, start_daemon


def _public(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def _params(sig: inspect.Signature) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def test_both_faces_have_the_same_methods_and_signatures() -> None:
    sync, aio = _public(Client), _public(AsyncClient)
    assert sorted(sync) == sorted(aio)
    for name in sync:
        assert _params(sync[name]) == _params(aio[name]), name
    assert _params(inspect.signature(Client)) == _params(inspect.signature(AsyncClient))
    # Every RPC method takes a deadline.
    for name, sig in sync.items():
        if name not in ("close", "approver"):
            assert "timeout" in sig.parameters, name


def _calls_in_every_form(workspace: Path) -> list[object]:
    (workspace / "f.txt").write_text("x\n")
    return [
        SDKTextBlock(type="text", text="I will look."),  # skipped: not a tool_use
        ToolUseBlock(type="tool_use", id="toolu_sdk_1", name="Read", input={"file_path": "f.txt"}),
        {"type": "tool_use", "id": "toolu_dict_2", "name": "Glob", "input": {"pattern": "*"}},
        ("LS", {"path": str(workspace)}, "toolu_tuple_3"),
    ]


def _journal_ids(client: Client, session_id: str) -> list[str]:
    last = client.get_session(session_id).last_seq
    ids, stream = [], client.attach(session_id, 0)
    for e in stream:
        if e.HasField("call_started"):
            ids.append(e.call_started.tool_use_id)
        if e.seq >= last:
            break
    stream.cancel()
    return ids


WANTED = ["toolu_sdk_1", "toolu_dict_2", "toolu_tuple_3"]


def test_run_tools_keeps_the_callers_ids(client: Client, session_id: str, workspace: Path) -> None:
    results = client.run_tools(session_id, _calls_in_every_form(workspace))
    assert [r.tool_use_id for r in results] == WANTED
    assert not any(r.is_error for r in results), [r.text for r in results]
    assert _journal_ids(client, session_id) == WANTED
    block = results[0].to_tool_result_block()
    assert block["tool_use_id"] == "toolu_sdk_1" and "is_error" not in block
    assert block["content"][0]["type"] == "text" and "x" in block["content"][0]["text"]


async def test_async_run_tools_keeps_the_callers_ids(
    daemon: DaemonProcess, client: Client, session_id: str, workspace: Path
) -> None:
    async with AsyncClient(daemon.socket) as aio:
        results = await aio.run_tools(session_id, _calls_in_every_form(workspace))
    assert [r.tool_use_id for r in results] == WANTED
    assert _journal_ids(client, session_id) == WANTED


def _sleep_call(client: Client, session_id: str, **kw: object) -> str:
    tool_use_id = f"toolu_sleep_{time.monotonic_ns()}"
    try:
        client.run_tool(session_id, "Bash", {"command": "sleep 5"}, tool_use_id, **kw)
    finally:
        client.cancel(session_id, tool_use_id)  # the call goes on in the daemon otherwise
    return tool_use_id


def test_a_call_past_its_deadline_raises_deadline_exceeded(
    daemon: DaemonProcess, session_id: str
) -> None:
    with Client(daemon.socket, tool_timeout=0.5) as c:
        started = time.monotonic()
        with pytest.raises(errors.DeadlineExceeded) as caught:
            _sleep_call(c, session_id)
        assert time.monotonic() - started < 4
        assert isinstance(caught.value, grpc.RpcError)
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # The call's own timeout overrides the client's default.
        with pytest.raises(errors.DeadlineExceeded):
            c.run_tool(session_id, "Bash", {"command": "sleep 5"}, timeout=0.3)
        ok = c.run_tool(session_id, "Bash", {"command": "sleep 1; echo done"}, timeout=30)
        assert ok.text.strip() == "done"


async def test_async_deadline(daemon: DaemonProcess, session_id: str) -> None:
    async with AsyncClient(daemon.socket) as aio:
        with pytest.raises(errors.DeadlineExceeded):
            await aio.run_tool(
                session_id, "Bash", {"command": "sleep 5"}, "toolu_async_dl", timeout=0.3
            )
        await aio.cancel(session_id, "toolu_async_dl")


def test_errors_are_typed_like_the_daemons(client: Client, workspace: Path) -> None:
    with pytest.raises(errors.SessionNotFound) as nf:
        client.get_session("no-such-session")
    assert isinstance(nf.value, errors.NotFound) and "agentctl session ls" in str(nf.value)
    s = client.create_session(str(workspace))
    with pytest.raises(errors.InvalidRequest):
        client.run_tools(s.id, [])
    client.close_session(s.id)
    with pytest.raises(errors.SessionClosed):
        client.run_tool(s.id, "LS", {})
    with pytest.raises(errors.SessionClosed):
        list(client.stream_tool(s.id, "LS", {}))


async def test_async_errors_are_typed(daemon: DaemonProcess) -> None:
    async with AsyncClient(daemon.socket) as aio:
        with pytest.raises(errors.SessionNotFound):
            await aio.get_session("no-such-session")
        with pytest.raises(errors.NotFound):
            async for _ in aio.attach("no-such-session"):
                pass


def test_no_daemon_calls_that_change_things_fail_at_once(tmp_path: Path) -> None:
    socket = str(tmp_path / "none.sock")
    with Client(socket, timeout=20) as c:
        started = time.monotonic()
        with pytest.raises(errors.Unavailable):
            c.create_session(str(tmp_path))
        with pytest.raises(errors.Unavailable):
            c.run_tool("s", "LS", {})
        assert time.monotonic() - started < 5
    # Without wait_for_ready (agentctl's way), reads fail fast too, after gRPC's retries.
    with Client(socket, timeout=20, wait_for_ready=False) as c, pytest.raises(errors.Unavailable):
        c.status()


def test_reads_wait_for_a_daemon_that_is_starting(tmp_path: Path) -> None:
    base = tmp_path / "late"
    socket = str(base / "run" / "agentd.sock")
    out: dict[str, object] = {}
    with Client(socket, timeout=60) as c:
        waiter = threading.Thread(target=lambda: out.update(status=c.status()))
        waiter.start()
        late = start_daemon(base)  # only now is there a daemon to answer
        try:
            waiter.join(60)
            assert not waiter.is_alive()
            assert out["status"].socket_path == socket  # type: ignore[attr-defined]
        finally:
            late.stop()


def test_the_approver_is_in_place_before_the_first_call(client: Client, workspace: Path) -> None:
    # Many times over: an ask right after the approver starts is always answered by it.
    for _ in range(5):
        sid = client.create_session(str(workspace), permission_mode="acceptEdits").id
        asks: list[PermissionAsk] = []

        def always(ask: PermissionAsk, asks: list[PermissionAsk] = asks) -> str:
            asks.append(ask)
            return "always"

        before = client.get_session(sid).last_seq
        with client.approver(sid, always):
            # Attach's agentd-attached says it is in place: no event of its own is needed.
            assert client.get_session(sid).last_seq == before
            r = client.run_tool(sid, "Bash", {"command": "touch approved.txt"})
        assert not r.is_error, r.text
        assert [a.tool_name for a in asks] == ["Bash"]
        # "always" added the rule the daemon suggested.
        assert asks[0].suggested_rule in client.get_session(sid).allow_rules


async def test_wait_attached_on_both_faces(daemon: DaemonProcess, session_id: str) -> None:
    """An attach says when the daemon counts it; one that fails says it never was."""
    with Client(daemon.socket) as c:
        stream = c.attach(session_id, c.get_session(session_id).last_seq)
        assert stream.wait_attached() is True
        stream.cancel()
        missing = c.attach("nope")
        assert missing.wait_attached() is False
        with pytest.raises(errors.SessionNotFound):
            next(missing)
    async with AsyncClient(daemon.socket) as a:
        stream = a.attach(session_id, (await a.get_session(session_id)).last_seq)
        assert await stream.wait_attached() is True
        stream.cancel()
        missing = a.attach("nope")
        assert await missing.wait_attached() is False
        with pytest.raises(errors.SessionNotFound):
            await anext(missing)


def test_a_failing_approver_callback_denies(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), permission_mode="acceptEdits").id

    def broken(ask: PermissionAsk) -> bool:
        raise RuntimeError("boom")

    with client.approver(sid, broken) as approver:
        r = client.run_tool(sid, "Bash", {"command": "touch denied.txt"})
    assert r.is_error and "denied" in r.text.lower()
    assert [(a.tool_name, d, s) for a, d, s in approver.answered] == [("Bash", "deny", "once")]
    assert not (workspace / "denied.txt").exists()


def test_an_approver_on_a_closed_session_says_so(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace)).id
    client.close_session(sid)
    with pytest.raises(errors.SessionClosed), client.approver(sid, lambda ask: True):
        pass


async def test_an_approver_of_an_unknown_session_says_so(daemon: DaemonProcess) -> None:
    with Client(daemon.socket) as c, pytest.raises(errors.SessionNotFound):
        c.approver("nope", lambda ask: True).start()
    async with AsyncClient(daemon.socket) as a:
        with pytest.raises(errors.SessionNotFound):
            await a.approver("nope", lambda ask: True).start()


def test_an_error_quotes_a_clients_input_only_cut_to_a_bound(client: Client) -> None:
    """A 70,000-character session id is NOT_FOUND, not RESOURCE_EXHAUSTED about the size
    of the metadata its whole echo would have made."""
    with pytest.raises(errors.SessionNotFound) as nf:
        client.get_session("x" * 70_000)
    assert "70000 characters" in str(nf.value) and len(str(nf.value)) < 1000
