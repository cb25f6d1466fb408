"""What a client sends at the RPC seam: undecodable bytes, out-of-range numbers,
cancelled streams and deeply nested tool inputs each get a clear answer, and the
daemon's log stays short and free of tracebacks."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agentd.api.decoding import RateLimitedLog
from agentd.sessions.event_types import TodosChanged
from agentd.sessions.events import EventLog, Replay
from agentd.sessions.store import Store
from agentd_client import Client
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import task_finished, wait_for_event

GARBAGE = [b"\xff\xff\xff\xff", b"\x0a\x05ab", b"\x08" + b"\xff" * 11]  # parse as no message


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    d = start_daemon(tmp_path_factory.mktemp("rpc"))
    yield d
    assert d.stop() == 0, d.log


@pytest.fixture(scope="module")
def session_id(daemon: DaemonProcess) -> Iterator[str]:
    ws = tempfile.mkdtemp(prefix="agentd-seams-", dir="/tmp")
    os.chmod(ws, 0o755)
    if os.geteuid() == 0:
        os.chown(ws, 65534, 65534)  # the sandbox's uid can work in it
    with Client(daemon.socket) as c:
        yield c.create_session(ws, permission_mode="bypassPermissions").id
    shutil.rmtree(ws, ignore_errors=True)


def test_undecodable_requests_are_invalid_argument_with_a_short_log(
    daemon: DaemonProcess,
) -> None:
    methods = pb.DESCRIPTOR.services_by_name["Agentd"].methods
    logged_before = len(daemon.log_lines)
    answers: list[grpc.StatusCode] = []
    with grpc.insecure_channel(f"unix:{daemon.socket}") as channel:
        for _ in range(10):
            for method in methods:
                path = f"/agentd.v1.Agentd/{method.name}"
                for raw in GARBAGE:
                    try:
                        if method.server_streaming:
                            list(channel.unary_stream(path)(raw, timeout=10))
                        else:
                            channel.unary_unary(path)(raw, timeout=10)
                    except grpc.RpcError as exc:
                        answers.append(exc.code())
                        assert "could not be decoded" in exc.details(), exc.details()
        health = channel.unary_unary("/grpc.health.v1.Health/Check")
        with pytest.raises(grpc.RpcError) as err:
            health(b"\xff\xff", timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert answers and set(answers) == {grpc.StatusCode.INVALID_ARGUMENT}
    new_log = daemon.log_lines[logged_before:]
    assert "Traceback" not in "".join(new_log)
    undecodable_lines = [line for line in new_log if "undecodable request" in line]
    assert 1 <= len(undecodable_lines) <= 2, new_log  # ~600 requests, rate-limited
    with Client(daemon.socket) as c:
        assert c.status().pid == daemon.proc.pid


def test_rate_limited_log_counts_what_it_left_out(caplog: pytest.LogCaptureFixture) -> None:
    limited = RateLimitedLog(every=3600)
    with caplog.at_level(logging.WARNING, logger="agentd.api.decoding"):
        assert limited.warning("first")
        assert not any(limited.warning("again") for _ in range(99))
        limited._last -= 7200  # an hour later, as far as the limiter can tell
        assert limited.warning("later")
    assert [r.getMessage() for r in caplog.records] == [
        "first",
        "later (99 more since the last such line)",
    ]


@pytest.mark.parametrize("after_seq", [2**63, 2**64 - 1])
def test_out_of_range_after_seq_is_invalid_argument(
    daemon: DaemonProcess, session_id: str, after_seq: int
) -> None:
    with Client(daemon.socket) as c, pytest.raises(grpc.RpcError) as err:
        list(c.stub.Attach(pb.AttachRequest(session_id=session_id, after_seq=after_seq)))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "after_seq" in err.value.details()


async def test_a_cancelled_subscriber_leaves_no_pending_task(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cancelled Attach used to leave its queue getter pending, reported at ERROR as
    "Task was destroyed but it is pending!" when collected."""
    store = Store(str(tmp_path / "agentd.db"))
    try:
        log = EventLog("s", store, Replay())
        log.emit(TodosChanged(todos=[]))
        seen = asyncio.Event()

        async def follow() -> None:
            async for _ in log.subscribe(0):
                seen.set()

        before = asyncio.all_tasks()
        follower = asyncio.ensure_future(follow())
        await asyncio.wait_for(seen.wait(), 10)
        await asyncio.sleep(0)  # now waiting for live events
        assert not follower.done()  # following live events now
        follower.cancel()
        await asyncio.gather(follower, return_exceptions=True)
        await asyncio.sleep(0)
        left = {t for t in asyncio.all_tasks() - before if not t.done()}
        assert left == set(), left
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            gc.collect()
        assert "destroyed" not in caplog.text
    finally:
        store.close()


NESTED = [
    "(" * 5000,
    "[" * 5000,
    "{" * 5000,
    "(?:" * 2000,
    "$(" * 2000,
    "*" * 5000,
    "**/" * 2000,
    "\\" * 5001,
]


def _string_inputs(schema: dict) -> list[str]:
    return [k for k, v in schema.get("properties", {}).items() if v.get("type") == "string"]


def _base_args(name: str) -> dict:
    return {
        "Bash": {"command": "true"},
        "Read": {"file_path": "f.txt"},
        "Write": {"file_path": "w.txt", "content": "x"},
        "Edit": {"file_path": "f.txt", "old_string": "a", "new_string": "b"},
        "MultiEdit": {"file_path": "f.txt", "edits": [{"old_string": "a", "new_string": "b"}]},
        "Glob": {"pattern": "*"},
        "Grep": {"pattern": "x"},
        "LS": {"path": "."},
        "NotebookEdit": {"notebook_path": "n.ipynb", "new_source": "x"},
        "WebFetch": {"url": "http://127.0.0.1:9/", "prompt": "p"},
        "BashOutput": {"bash_id": "nope"},
        "TaskStop": {"task_id": "nope"},
        "KillShell": {"shell_id": "nope"},
    }.get(name, {})


def test_no_string_input_reaches_a_recursion_error(daemon: DaemonProcess, session_id: str) -> None:
    logged_before = len(daemon.log_lines)
    with Client(daemon.socket, timeout=120) as c:
        task = c.run_tool(session_id, "Bash", {"command": "echo x", "run_in_background": True})
        task_id = task.data.get("backgroundTaskId") if isinstance(task.data, dict) else None
        tools = c.list_tools()
        for tool in tools:
            name = tool["name"]
            for prop in _string_inputs(tool["input_schema"]):
                if name == "Bash" and prop == "command":
                    continue  # the classifier's and the shell's own: attacked below
                for value in NESTED:
                    args = {**_base_args(name), prop: value}
                    if name == "BashOutput" and prop != "bash_id" and task_id:
                        args["bash_id"] = task_id
                    r = c.run_tool(session_id, name, args)
                    assert "bug in agentd" not in r.text, (name, prop, value[:10], r.text)
        for value in NESTED:
            r = c.run_tool(session_id, "BashOutput", {"bash_id": task_id, "filter": value})
            assert "bug in agentd" not in r.text, r.text
    new_log = "".join(daemon.log_lines[logged_before:])
    assert "RecursionError" not in new_log and "Traceback" not in new_log, new_log[-3000:]


@pytest.mark.parametrize("value", ["$(" * 2000 + "true", "(" * 3000 + "true", "{ " * 3000])
def test_bash_commands_that_nest_deeply_are_answered(
    daemon: DaemonProcess, session_id: str, value: str
) -> None:
    with Client(daemon.socket, timeout=120) as c:
        r = c.run_tool(session_id, "Bash", {"command": value})
        assert "bug in agentd" not in r.text, r.text[:500]
        assert "read_only" in json.dumps(c.classify(value))


def test_a_backtracking_filter_is_stopped_and_loses_no_output(
    daemon: DaemonProcess, session_id: str
) -> None:
    """`^(a|a)*$` against forty `a` and a `b` backtracks for days under `re`, holding
    the event loop; it is stopped after a bounded time, and the output stays unread."""
    line = "a" * 40 + "b"
    with Client(daemon.socket, timeout=120) as c:
        task = c.run_tool(
            session_id, "Bash", {"command": f"echo {line}; echo ok", "run_in_background": True}
        )
        task_id = task.data["backgroundTaskId"]
        wait_for_event(c, session_id, task_finished(task_id))
        r = c.run_tool(session_id, "BashOutput", {"bash_id": task_id, "filter": "^(a|a)*$"})
        assert r.is_error and "took more than" in r.text, r.text
        assert c.status().pid == daemon.proc.pid
        r = c.run_tool(session_id, "BashOutput", {"bash_id": task_id, "filter": "^a+b$"})
        assert not r.is_error and line in r.text and "ok" not in r.text.split("<output>")[1]
