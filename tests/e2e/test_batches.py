"""RunTools: results in call order; safe calls run together, unsafe ones alone.

Concurrency is proven from the session's event log, not the clock: a group of
concurrency-safe calls runs together when every CallStarted of the group comes before
any CallFinished of it; an unsafe call waits for the calls before it when its
CallStarted comes after their CallFinished, and holds the calls after it when theirs
comes after its CallFinished.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import grpc
import pytest

from agentd_client import Client, Event
from agentd_client.v1 import agentd_pb2 as pb


def _write(path: Path, text: str) -> None:
    """A file the sandboxed commands (uid 65534 under a root daemon) may change."""
    path.write_text(text)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)


def _events_of(client: Client, sid: str, ids: list[str], timeout: float = 30) -> list[Event]:
    """The journaled events of the session up to the CallFinished of every id in `ids`."""
    stream = client.attach(sid, 0)
    timer = threading.Timer(timeout, stream.cancel)
    timer.start()
    events: list[Event] = []
    pending = set(ids)
    try:
        for event in stream:
            events.append(event)
            if event.HasField("call_finished"):
                pending.discard(event.call_finished.result.tool_use_id)
            if not pending:
                break
    finally:
        timer.cancel()
        stream.cancel()
    assert not pending, f"no CallFinished for {pending}"
    return events


def _positions(events: list[Event]) -> tuple[dict[str, int], dict[str, int]]:
    """Index in the log of each call's CallStarted and CallFinished, by tool_use_id."""
    started: dict[str, int] = {}
    finished: dict[str, int] = {}
    for i, e in enumerate(events):
        if e.HasField("call_started"):
            started[e.call_started.tool_use_id] = i
        elif e.HasField("call_finished"):
            finished[e.call_finished.result.tool_use_id] = i
    return started, finished


def _batch(names_inputs: list[tuple[str, dict]], prefix: str) -> list[dict]:
    return [
        {"name": n, "input": i, "id": f"toolu_{prefix}_{k}"}
        for k, (n, i) in enumerate(names_inputs)
    ]


def test_mixed_batch_order_and_grouping(client: Client, session_id: str, workspace: Path) -> None:
    _write(workspace / "a.txt", "A\n")
    _write(workspace / "b.txt", "B\n")
    _write(workspace / "c.txt", "old\n")
    calls = _batch(
        [
            ("Read", {"file_path": str(workspace / "a.txt")}),
            ("Read", {"file_path": str(workspace / "b.txt")}),
            ("Bash", {"command": "echo new > c.txt"}),
            ("Read", {"file_path": str(workspace / "c.txt")}),
        ],
        "mix",
    )
    ids = [c["id"] for c in calls]
    results = client.run_tools(session_id, calls)

    # Results in call order, each the answer to its own call.
    assert [r.tool_use_id for r in results] == ids
    assert [r.is_error for r in results] == [False] * 4, [r.text for r in results]
    assert results[0].text.startswith("1\tA")
    assert results[1].text.startswith("1\tB")
    # The Read after the Bash saw what the Bash wrote: it did not run before it.
    assert results[3].text.startswith("1\tnew")

    started, finished = _positions(_events_of(client, session_id, ids))
    read_a, read_b, bash, read_c = ids
    # The two Reads ran together: both started before either finished.
    assert max(started[read_a], started[read_b]) < min(finished[read_a], finished[read_b])
    # The Bash waited for both Reads, and held the Read after it.
    assert started[bash] > max(finished[read_a], finished[read_b])
    assert started[read_c] > finished[bash]


def test_glob_grep_read_group_then_write(client: Client, session_id: str, workspace: Path) -> None:
    _write(workspace / "x.py", "needle = 1\n")
    calls = _batch(
        [
            ("Glob", {"pattern": "*.py"}),
            ("Grep", {"pattern": "needle"}),
            ("Read", {"file_path": str(workspace / "x.py")}),
            ("Write", {"file_path": str(workspace / "y.py"), "content": "needle = 2\n"}),
            ("Glob", {"pattern": "*.py"}),
            ("Grep", {"pattern": "needle", "output_mode": "count"}),
        ],
        "ggr",
    )
    ids = [c["id"] for c in calls]
    results = client.run_tools(session_id, calls)
    assert [r.tool_use_id for r in results] == ids
    assert not any(r.is_error for r in results), [r.text for r in results]
    assert results[0].text == "x.py"
    assert sorted(results[4].text.splitlines()) == ["x.py", "y.py"]
    assert "Found 2 total occurrences across 2 files." in results[5].text

    started, finished = _positions(_events_of(client, session_id, ids))
    first, write, second = ids[:3], ids[3], ids[4:]
    assert max(started[i] for i in first) < min(finished[i] for i in first)
    assert started[write] > max(finished[i] for i in first)
    assert min(started[i] for i in second) > finished[write]
    assert max(started[i] for i in second) < min(finished[i] for i in second)


def test_consecutive_unsafe_calls_run_one_at_a_time(
    client: Client, session_id: str, workspace: Path
) -> None:
    calls = _batch(
        [
            ("Bash", {"command": "echo 1 >> log.txt"}),
            ("Bash", {"command": "echo 2 >> log.txt"}),
            ("Bash", {"command": "echo 3 >> log.txt; cat log.txt"}),
        ],
        "seq",
    )
    ids = [c["id"] for c in calls]
    results = client.run_tools(session_id, calls)
    assert results[2].text == "1\n2\n3"
    started, finished = _positions(_events_of(client, session_id, ids))
    assert finished[ids[0]] < started[ids[1]]
    assert finished[ids[1]] < started[ids[2]]


def _run_tools_raw(client: Client, request: pb.RunToolsRequest) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        list(client.stub.RunTools(request, timeout=30))
    return err.value


def test_duplicate_tool_use_ids_refused(client: Client, session_id: str) -> None:
    use = pb.ToolUse(tool_use_id="toolu_same", name="Glob", input={"pattern": "*"})
    err = _run_tools_raw(client, pb.RunToolsRequest(session_id=session_id, calls=[use, use]))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "distinct" in err.details()


def test_empty_batch_refused(client: Client, session_id: str) -> None:
    err = _run_tools_raw(client, pb.RunToolsRequest(session_id=session_id, calls=[]))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "empty" in err.details()


def test_refused_batch_runs_nothing(client: Client, session_id: str, workspace: Path) -> None:
    """A batch refused for a duplicate id runs none of its calls, not even the first."""
    first = pb.ToolUse(tool_use_id="toolu_d1", name="Bash", input={"command": "touch ran.txt"})
    dup = pb.ToolUse(tool_use_id="toolu_d1", name="Glob", input={"pattern": "*"})
    err = _run_tools_raw(client, pb.RunToolsRequest(session_id=session_id, calls=[first, dup]))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert not (workspace / "ran.txt").exists()
