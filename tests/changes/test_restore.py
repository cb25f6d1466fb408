"""Restores and rewinds through the real daemon: conflicts refuse (a file changed
outside the agent, a background task of the session still running), a rewind can be
rewound, and every terminal sees who restored what (agentd/changes/restore.py)."""

from __future__ import annotations

from pathlib import Path

from agentd_client import Client
from tests.support.waiting import task_finished, wait_for_event


def bash(client: Client, sid: str, command: str, call: str) -> str:
    return client.run_tool(sid, "Bash", {"command": command}, call).text


def test_a_file_changed_outside_the_agent_is_a_conflict(
    client: Client, session_id: str, workspace: Path
) -> None:
    bash(client, session_id, "echo 1 > o.txt", "r-o1")
    bash(client, session_id, "echo 2 > o.txt", "r-o2")
    (workspace / "o.txt").write_text("by a person\n")
    refused = client.restore_checkpoint(session_id, "r-o2")
    assert not refused.applied
    assert "changed outside the agent" in refused.message
    assert (workspace / "o.txt").read_text() == "by a person\n"
    dry = client.restore_checkpoint(session_id, "r-o2", dry_run=True)
    assert [(p.path, p.action) for p in dry.paths] == [("o.txt", "write")]
    forced = client.restore_checkpoint(session_id, "r-o2", on_conflict="overwrite")
    assert forced.applied, forced.message
    assert (workspace / "o.txt").read_text() == "1\n"


def test_restoring_one_call_that_a_later_call_changed_again_refuses(
    client: Client, session_id: str, workspace: Path
) -> None:
    bash(client, session_id, "echo 1 > l.txt", "r-l1")
    bash(client, session_id, "echo 2 > l.txt", "r-l2")
    refused = client.restore_checkpoint(session_id, "r-l1")
    assert not refused.applied and "later call" in refused.message
    done = client.rewind_to_call(session_id, "r-l1")
    assert done.applied and not (workspace / "l.txt").exists()


def test_a_rewind_can_be_rewound(client: Client, session_id: str, workspace: Path) -> None:
    bash(client, session_id, "echo 1 > r.txt; mkdir -p d; echo a > d/a", "r-1")
    bash(client, session_id, "echo 2 > r.txt; rm -r d; ln -s r.txt d", "r-2")
    first = client.rewind_to_call(session_id, "r-2")
    assert first.applied, first.message
    assert (workspace / "r.txt").read_text() == "1\n" and (workspace / "d/a").read_text() == "a\n"
    rewind = client.list_checkpoints(session_id)[-1]
    assert rewind.action == "rewind" and rewind.seq == first.checkpoint
    again = client.rewind_to_call(session_id, rewind.tool_use_id)
    assert again.applied, again.message
    assert (workspace / "r.txt").read_text() == "2\n"
    assert (workspace / "d").is_symlink() and str((workspace / "d").readlink()) == "r.txt"
    third = client.rewind_to_call(session_id, client.list_checkpoints(session_id)[-1].tool_use_id)
    assert third.applied and (workspace / "d/a").read_text() == "a\n"


def test_restore_is_refused_while_a_task_writes_the_file(
    client: Client, session_id: str, workspace: Path
) -> None:
    bash(client, session_id, "echo 0 > t.txt", "r-t0")
    bash(client, session_id, "echo 1 > t.txt", "r-t1")
    started = client.run_tool(
        session_id,
        "Bash",
        {"command": "while :; do echo x >> t.txt; sleep 0.05; done", "run_in_background": True},
        "r-task",
    )
    task_id = started.data["backgroundTaskId"]
    try:
        refused = client.restore_checkpoint(session_id, "r-t1")
        assert not refused.applied
        assert "still running" in refused.message
    finally:
        client.run_tool(session_id, "TaskStop", {"task_id": task_id})
    wait_for_event(client, session_id, task_finished(task_id), timeout=90)
    wait_for_event(
        client,
        session_id,
        lambda e: e.HasField("files_changed") and e.files_changed.tool_use_id == "r-task",
        timeout=90,
    )
    [task] = [c for c in client.list_checkpoints(session_id) if c.tool_use_id == "r-task"]
    assert task.action == "task" and task.changed == 1


def test_every_terminal_sees_what_changed_and_who_restored(
    client: Client, session_id: str, workspace: Path
) -> None:
    bash(client, session_id, "echo 1 > e.txt", "r-e1")
    seen = wait_for_event(
        client,
        session_id,
        lambda e: e.HasField("files_changed") and e.files_changed.tool_use_id == "r-e1",
    ).files_changed
    assert (seen.added, seen.changed, seen.deleted, list(seen.paths)) == (1, 0, 0, ["+e.txt"])
    done = client.rewind_to_call(session_id, "r-e1")
    event = wait_for_event(
        client,
        session_id,
        lambda e: e.HasField("files_changed") and e.files_changed.action == "rewind",
    ).files_changed
    assert event.checkpoint == done.checkpoint and event.by and event.paths == ["-e.txt"]


def test_requests_are_checked(client: Client, session_id: str) -> None:
    import grpc
    import pytest

    for call, code in (
        (lambda: client.diff_checkpoint(session_id, ""), grpc.StatusCode.INVALID_ARGUMENT),
        (lambda: client.diff_checkpoint(session_id, "nope"), grpc.StatusCode.NOT_FOUND),
        (
            lambda: client.diff_checkpoint(session_id, "x", fmt="html"),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            lambda: client.restore_checkpoint(session_id, "x", on_conflict="maybe"),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            lambda: client.restore_checkpoint(session_id, "x" * 300),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (lambda: client.list_checkpoints("0" * 32), grpc.StatusCode.NOT_FOUND),
    ):
        with pytest.raises(grpc.RpcError) as raised:
            call()
        assert raised.value.code() == code, raised.value.details()
        assert "\n" not in raised.value.details()
