"""What a run changed is known exactly, for every kind of run (issue 17 item 3): existing
code-bearing files changed, deleted, renamed over or moved into are put back as they
were; concurrent calls and the person's own edits are told apart; a background task is
checked while it runs; without events (a scan) the same holds.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from agentd_client import Client, ToolResult
from tests.security._held import as_sandbox_user, held_paths
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import wait_for_event

NESTED_CONFIG = b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
DENY = b'{"permissions": {"deny": ["Bash(curl:*)"]}}\n'


@pytest.fixture
def sid(client: Client, workspace: Path) -> str:
    return client.create_session(str(workspace), permission_mode="bypassPermissions").id


@pytest.fixture
def existing(sid: str, workspace: Path) -> Path:
    """The person's nested repository config and agent settings, below the root, made
    after the session was (its first walk may have missed them: the host watch tells)."""
    (workspace / "vendor" / "lib" / ".git").mkdir(parents=True)
    (workspace / "vendor" / "lib" / ".git" / "config").write_bytes(NESTED_CONFIG)
    (workspace / "app" / ".claude").mkdir(parents=True)
    (workspace / "app" / ".claude" / "settings.json").write_bytes(DENY)
    (workspace / "docs").mkdir()
    (workspace / "docs" / "index.md").write_text("# docs\n")
    as_sandbox_user(workspace)
    return workspace


@pytest.mark.parametrize(
    ("command", "path"),
    [
        ("printf '\\tfsmonitor = x\\n' >> vendor/lib/.git/config", "vendor/lib/.git/config"),
        ("rm app/.claude/settings.json", "app/.claude/settings.json"),
        ("echo '{}' > t && mv t app/.claude/settings.json", "app/.claude/settings.json"),
        ("ln -f docs/index.md vendor/lib/.git/config", "vendor/lib/.git/config"),
    ],
    ids=["appended", "deleted", "renamed-over", "hard-linked-over"],
)
def test_an_existing_code_bearing_file_is_put_back_as_it_was(
    client: Client, sid: str, existing: Path, command: str, path: str
) -> None:
    r = client.run_tool(sid, "Bash", {"command": command + " && echo done"})
    assert "done" in r.text, r.text
    assert str(existing / path) in held_paths(r.text), r.text
    assert (existing / "vendor/lib/.git/config").read_bytes() == NESTED_CONFIG
    assert (existing / "app/.claude/settings.json").read_bytes() == DENY


def test_a_directory_moved_onto_a_code_bearing_name_is_moved_back(
    client: Client, sid: str, existing: Path
) -> None:
    r = client.run_tool(sid, "Bash", {"command": "mv docs app/.vscode && echo done"})
    assert "done" in r.text, r.text
    assert "moved to app/.vscode" in r.text, r.text
    assert (existing / "docs" / "index.md").read_text() == "# docs\n"
    assert not (existing / "app" / ".vscode").exists()


def test_concurrent_calls_and_the_persons_own_edits_are_told_apart(
    client: Client, sid: str, workspace: Path
) -> None:
    os.mkfifo(workspace / "go")
    as_sandbox_user(workspace)
    results: dict[str, ToolResult] = {}

    def call(name: str, command: str) -> None:
        results[name] = client.run_tool(sid, "Bash", {"command": command}, f"toolu_{name}")

    slow = threading.Thread(
        target=call, args=("slow", "read line < go && mkdir -p a && echo x > a/.npmrc && echo a")
    )
    slow.start()
    wait_for_event(
        client,
        sid,
        lambda e: e.HasField("call_started") and e.call_started.tool_use_id == "toolu_slow",
    )
    # While the slow call runs: the person edits a code-bearing file of their own, and
    # another call of the same session writes an ordinary file.
    (workspace / "mine").mkdir()
    (workspace / "mine" / ".npmrc").write_text("registry=https://example.org/\n")
    call("quick", "echo hi > b.txt && echo b")
    with open(workspace / "go", "w") as fifo:
        fifo.write("go\n")
    slow.join(60)
    assert held_paths(results["slow"].text) == [str(workspace / "a" / ".npmrc")], results
    assert "held" not in results["quick"].text, results["quick"].text
    assert (workspace / "mine" / ".npmrc").read_text() == "registry=https://example.org/\n"
    assert (workspace / "b.txt").read_text() == "hi\n"


def test_a_background_task_is_checked_while_it_runs(
    daemon: DaemonProcess, client: Client, sid: str, workspace: Path
) -> None:
    planted = workspace / "x" / ".claude" / "settings.json"
    command = (
        "mkdir -p x/.claude && echo '{\"hooks\": {}}' > x/.claude/settings.json && exec sleep 300"
    )
    mark = len(daemon.log_lines)
    started = client.run_tool(sid, "Bash", {"command": command, "run_in_background": True})
    task_id = started.text.split("with ID: ")[1].split(".")[0]
    daemon.wait_for_log("held x/.claude/settings.json (added)", after=mark, timeout=60)
    assert not planted.exists()
    assert {t.id: t.status for t in client.list_tasks(sid)}[task_id] == "running"
    # The model hears of it with its next result.
    stopped = client.run_tool(sid, "TaskStop", {"task_id": task_id})
    told = " ".join(b.text for b in stopped.content if hasattr(b, "text"))
    assert "x/.claude/settings.json" in told, told


def test_without_events_a_scan_holds_the_same(tmp_path: Path, workspace: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('changes_tracking = "scan"\n')
    proc = start_daemon(tmp_path / "d", ["--config", str(config)])
    try:
        with Client(proc.socket, timeout=60) as client:
            sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
            command = "mkdir -p web/.vscode && echo '{}' > web/.vscode/tasks.json && echo done"
            r = client.run_tool(sid, "Bash", {"command": command})
    finally:
        assert proc.stop() == 0, proc.log
    assert "done" in r.text, r.text
    assert str(workspace / "web" / ".vscode" / "tasks.json") in held_paths(r.text), r.text
    assert not (workspace / "web" / ".vscode").exists()


def test_a_task_taken_over_by_the_next_daemon_is_still_checked(
    tmp_path: Path, workspace: Path
) -> None:
    os.mkfifo(workspace / "go")
    as_sandbox_user(workspace)
    first = start_daemon(tmp_path / "d", keep_tasks=True)
    second: DaemonProcess | None = None
    try:
        with Client(first.socket, timeout=60) as client:
            sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
            command = (
                "read line < go && mkdir -p y/.vscode && echo '{}' > y/.vscode/tasks.json && "
                "exec sleep 300"
            )
            started = client.run_tool(sid, "Bash", {"command": command, "run_in_background": True})
            task_id = started.text.split("with ID: ")[1].split(".")[0]
        first.stop()  # the task lives on under its shim
        second = start_daemon(tmp_path / "d", keep_tasks=True, timeout=90)
        second.wait_for_log("took over 1 running task")
        mark = len(second.log_lines)
        with open(workspace / "go", "w") as fifo:  # only now does the task plant
            fifo.write("go\n")
        second.wait_for_log("held y/.vscode/tasks.json (added)", after=mark, timeout=60)
        assert not (workspace / "y" / ".vscode" / "tasks.json").exists()
        with Client(second.socket, timeout=60) as client:
            client.run_tool(sid, "TaskStop", {"task_id": task_id})
    finally:
        for proc in (first, second):
            if proc is not None:
                proc.stop()
