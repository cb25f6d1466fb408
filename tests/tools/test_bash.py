"""Bash through the real daemon and the real sandbox: reference cases and behaviour."""

from __future__ import annotations

import re
import threading
import time
import uuid
from pathlib import Path

from agentd_client import Client, ToolResult
from tests.support.processes import wait_gone, wait_present
from tests.support.waiting import task_finished, wait_for_event, wait_until


def bash(client: Client, sid: str, command: str, **kw: object):
    return client.run_tool(sid, "Bash", {"command": command, **kw})


def test_exit_code_and_interleaved_streams(client: Client, session_id: str) -> None:
    r = bash(client, session_id, "echo hi; echo err >&2; exit 3")
    assert r.is_error
    assert r.text == "Exit code 3\nhi\nerr"
    r = bash(client, session_id, "echo out1; echo err1 >&2; echo out2")
    assert not r.is_error
    assert r.text == "out1\nerr1\nout2"
    assert r.data["stdout"] == "out1\nerr1\nout2"


def test_no_output_is_said_plainly(client: Client, session_id: str) -> None:
    r = bash(client, session_id, "true")
    assert (r.text, r.is_error) == ("(Bash completed with no output)", False)


def test_grep_finding_nothing_is_not_an_error(client: Client, session_id: str) -> None:
    r = bash(client, session_id, "echo abc | grep zzz")
    assert not r.is_error
    # As the reference: the text says no output; the data says what exit 1 meant.
    assert r.text == "(Bash completed with no output)"
    assert r.data["returnCodeInterpretation"] == "No matches found"
    assert bash(client, session_id, "ls /nonexistent-agentd").is_error


def test_cwd_carries_over_inside_the_workspace(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    ws = str(workspace.resolve())
    assert bash(client, sid, "mkdir -p sub && cd sub && pwd").text == f"{ws}/sub"
    assert bash(client, sid, "pwd").text == f"{ws}/sub"
    assert client.get_session(sid).cwd == f"{ws}/sub"
    # the file tools follow the shell's cwd
    bash(client, sid, "echo inner > f.txt")
    assert client.run_tool(sid, "Read", {"file_path": "f.txt"}).text.startswith("1\tinner")
    r = bash(client, sid, "cd /tmp && pwd")
    assert r.text == f"/tmp\nShell cwd was reset to {ws}"
    assert bash(client, sid, "pwd").text == ws


def test_exports_do_not_carry_over_but_session_env_applies(client: Client, workspace: Path) -> None:
    sid = client.create_session(
        str(workspace), env={"SESSION_VAR": "from-session"}, permission_mode="bypassPermissions"
    ).id
    bash(client, sid, "export FOO=1")
    assert bash(client, sid, 'echo "${FOO:-unset} $SESSION_VAR"').text == "unset from-session"


def test_commands_run_unprivileged_and_files_belong_to_that_user(
    client: Client, session_id: str, workspace: Path
) -> None:
    r = bash(client, session_id, "id -u; grep CapEff /proc/self/status; touch made.txt")
    uid, caps = r.text.splitlines()[:2]
    assert uid != "0"
    assert caps.split()[1] == "0000000000000000"
    assert (workspace / "made.txt").stat().st_uid == int(uid)


def test_large_output_is_persisted_with_a_preview(client: Client, session_id: str) -> None:
    r = bash(client, session_id, "seq 1 50000")
    assert not r.is_error
    head, _, rest = r.text.partition("\n")
    assert head == "<persisted-output>"
    m = re.match(r"Output too large \(282\.1KB\)\. Full output saved to: (\S+)\n\n", rest)
    assert m, r.text[:300]
    assert rest.endswith("\n526\n527\n...\n</persisted-output>")  # 2 KB, cut at a line end
    assert "Preview (first 2KB):\n1\n2\n3\n" in rest
    assert r.data["persistedOutputSize"] == 288894
    full = client.run_tool(
        session_id, "Read", {"file_path": m.group(1), "offset": 49999, "limit": 2}
    )
    assert not full.is_error, full.text
    assert full.text.startswith("49999\t49999\n50000\t50000")


def test_a_failed_commands_large_output_is_cut_to_head_and_tail(
    client: Client, session_id: str
) -> None:
    r = bash(client, session_id, "seq 1 50000; exit 3")
    assert r.is_error
    assert r.text.startswith("Exit code 3\n1\n2\n3\n")
    assert "50000" in r.text and "bytes truncated" in r.text
    path = re.search(r"The full output is in (\S+) ", r.text).group(1)
    full = client.run_tool(session_id, "Read", {"file_path": path, "offset": 49999, "limit": 2})
    assert full.text.startswith("49999\t49999\n50000\t50000")


def test_lenient_inputs_run_as_the_reference_runs_them(client: Client, session_id: str) -> None:
    # A timeout above the most is the most; 0 or less is the default; an empty command
    # runs and prints nothing.
    assert bash(client, session_id, "echo over", timeout=900000).text == "over"
    assert bash(client, session_id, "echo neg", timeout=-5).text == "neg"
    for command in ("", "   "):
        r = bash(client, session_id, command)
        assert not r.is_error and r.text == "(Bash completed with no output)"


def test_progress_streams_while_running(client: Client, session_id: str) -> None:
    # Progress says where the output file stands, never the bytes: those are read from it.
    sizes = []
    result = None
    for update in client.stream_tool(
        session_id, "Bash", {"command": "for i in 1 2 3; do echo tick$i; sleep 0.3; done"}
    ):
        if update.HasField("progress"):
            assert update.progress.output == ""
            sizes.append((update.progress.output_id, update.progress.output_size))
        else:
            result = update.result
    assert result is not None and not result.is_error
    assert any(size >= len("tick1\n") for _, size in sizes[:-1])  # seen before the end
    [output_id] = {i for i, _ in sizes}
    data = b"".join(c.data for c in client.read_output(session_id, output_id))
    assert data == b"tick1\ntick2\ntick3\n"


def test_attached_client_sees_progress(client: Client, session_id: str) -> None:
    seen = threading.Event()

    def watch() -> None:
        wait_for_event(
            client,
            session_id,
            lambda e: e.HasField("progress") and e.progress.last_line == "watched-out",
        )
        seen.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    bash(client, session_id, "echo watched-out; sleep 0.5")
    watcher.join(30)
    assert seen.is_set()


def test_timeout_moves_the_command_to_the_background(client: Client, session_id: str) -> None:
    r = bash(client, session_id, "echo start; sleep 30; echo end", timeout=1500)
    assert not r.is_error
    assert r.text.startswith("start\n")
    task_id = r.data["backgroundTaskId"]
    assert f"(ID: {task_id})" in r.text and "TaskStop" in r.text
    assert r.data["timedOutAfterMs"] == 1500
    stop = client.run_tool(session_id, "TaskStop", {"task_id": task_id})
    assert not stop.is_error and stop.data["task_id"] == task_id


def test_a_bare_sleep_is_killed_at_its_timeout(client: Client, session_id: str) -> None:
    started = time.monotonic()
    r = bash(client, session_id, "sleep 30", timeout=1000)
    assert r.is_error
    assert "timed out" in r.text
    assert time.monotonic() - started < 10


def test_background_task_lifecycle(client: Client, session_id: str) -> None:
    marker = f"agentd-bg-{uuid.uuid4().hex[:8]}"
    r = bash(
        client,
        session_id,
        f"for i in 1 2 3; do echo line$i; done; echo errline >&2; sleep 60 # {marker}",
        run_in_background=True,
        description="Print lines then wait",
    )
    task_id = r.data["backgroundTaskId"]
    assert f"ID: {task_id}" in r.text
    path = re.search(r"written to: (\S+?)\.? ", r.text).group(1)
    assert path.endswith(f"{task_id}.output")

    def errline_read() -> ToolResult | None:
        out = client.run_tool(session_id, "BashOutput", {"bash_id": task_id})
        return out if "errline" in out.text else None

    out = wait_until(errline_read, what="errline in the task's output")
    assert "<status>running</status>" in out.text
    read = client.run_tool(session_id, "Read", {"file_path": path})
    assert read.text.startswith("1\tline1\n2\tline2\n3\tline3\n4\terrline"), read.text
    [task] = [t for t in client.list_tasks(session_id) if t.id == task_id]
    assert task.status == "running"
    stop = client.run_tool(session_id, "TaskStop", {"task_id": task_id})
    assert not stop.is_error
    assert stop.data["message"].startswith(f"Successfully stopped task: {task_id}")
    again = client.run_tool(session_id, "TaskStop", {"task_id": task_id})
    assert again.is_error
    assert again.text == f"<tool_use_error>No task found with ID: {task_id}</tool_use_error>"
    wait_gone(marker)


def test_finished_task_file_ends_with_exit_code_and_model_is_told(
    client: Client, session_id: str
) -> None:
    r = bash(
        client, session_id, "echo quick; exit 2", run_in_background=True, description="Quick job"
    )
    task_id = r.data["backgroundTaskId"]
    wait_for_event(client, session_id, task_finished(task_id))
    [task] = [t for t in client.list_tasks(session_id) if t.id == task_id]
    assert (task.status, task.exit_code, task.has_exit_code) == ("failed", 2, True)
    with open(task.output_path) as f:
        assert f.read() == "quick\n\n[exited with code 2]\n"
    after = bash(client, session_id, "echo after")
    assert after.content[0].text == "after"
    notice = after.content[1].text
    assert f"<task-id>{task_id}</task-id>" in notice
    assert "failed with exit code 2" in notice


def test_unknown_task_stop_and_kill_shell_alias(client: Client, session_id: str) -> None:
    r = client.run_tool(session_id, "KillShell", {"shell_id": "abc123"})
    assert r.is_error
    assert r.text == "<tool_use_error>No task found with ID: abc123</tool_use_error>"


def test_cancel_ends_the_process_tree_and_returns_output(client: Client, session_id: str) -> None:
    marker = f"agentd-cancel-{uuid.uuid4().hex[:8]}"
    tool_use_id = f"toolu_{uuid.uuid4().hex[:12]}"
    result = {}

    def run() -> None:
        result["r"] = client.run_tool(
            session_id,
            "Bash",
            {"command": f"echo before-cancel; (sleep 100 # {marker}\n) & sleep 100 # {marker}"},
            tool_use_id=tool_use_id,
        )

    caller = threading.Thread(target=run)
    caller.start()
    wait_for_event(
        client,
        session_id,
        lambda e: (
            e.HasField("progress")
            and e.progress.tool_use_id == tool_use_id
            and e.progress.last_line == "before-cancel"
        ),
    )
    started = time.monotonic()
    assert client.cancel(session_id, tool_use_id)
    caller.join(30)
    assert time.monotonic() - started < 3
    r = result["r"]
    assert r.is_error and "before-cancel" in r.text and "interrupted" in r.text
    wait_gone(marker)


def test_orphans_do_not_outlive_their_call(client: Client, session_id: str) -> None:
    # A sleep length no other process uses marks every process this test starts.
    marker = f"{int(uuid.uuid4().int % 10**6) + 10**6}.5"
    r = bash(
        client,
        session_id,
        f"(setsid sleep {marker} &) ; nohup sleep {marker} >/dev/null 2>&1 & "
        f"(bash -c 'sleep {marker} &' &) ; echo spawned",
    )
    assert "spawned" in r.text
    wait_gone(f"sleep\0{marker}")


def test_closing_the_session_stops_its_tasks(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    # The command text is not on any command line; the sleep's own argv is.
    marker = f"sleep\0{int(uuid.uuid4().int % 10**6) + 10**6}.3"
    r = bash(client, sid, f"sleep {marker[6:]}", run_in_background=True)
    wait_present(marker)
    client.close_session(sid)
    [task] = [t for t in client.list_tasks(sid) if t.id == r.data["backgroundTaskId"]]
    assert task.status == "killed"
    wait_gone(marker)


def test_changed_read_files_are_named(client: Client, session_id: str, workspace: Path) -> None:
    bash(client, session_id, "echo one > watched.txt")
    client.run_tool(session_id, "Read", {"file_path": "watched.txt"})
    r = bash(client, session_id, "echo two >> watched.txt")
    assert "watched.txt" in r.text and "changed files you have read" in r.text


def test_unsandboxed_commands_are_refused_by_default(client: Client, session_id: str) -> None:
    r = bash(client, session_id, "id", dangerouslyDisableSandbox=True)
    assert r.is_error and "sandbox" in r.text


def test_files_the_daemon_writes_stay_changeable_by_commands(
    client: Client, session_id: str, workspace: Path
) -> None:
    w = client.run_tool(session_id, "Write", {"file_path": "new/dir/f.txt", "content": "a\n"})
    assert not w.is_error, w.text
    r = bash(client, session_id, "echo b >> new/dir/f.txt && touch new/dir/g && cat new/dir/f.txt")
    assert not r.is_error
    assert r.text.startswith("a\nb\n")
    assert "changed files you have read: new/dir/f.txt" in r.text
    owner = workspace.stat().st_uid
    assert (workspace / "new" / "dir" / "f.txt").stat().st_uid == owner
    assert (workspace / "new").stat().st_uid == owner


def test_tasks_outlive_the_client_that_started_them(
    daemon, client: Client, session_id: str
) -> None:
    marker = f"{int(uuid.uuid4().int % 10**6) + 2 * 10**6}.5"
    with Client(daemon.socket) as starter:
        r = starter.run_tool(
            session_id, "Bash", {"command": f"sleep {marker}", "run_in_background": True}
        )
    task_id = r.data["backgroundTaskId"]
    [task] = [t for t in client.list_tasks(session_id) if t.id == task_id]
    assert task.status == "running"
    wait_present(f"sleep\0{marker}")
    assert not client.run_tool(session_id, "TaskStop", {"task_id": task_id}).is_error
    wait_gone(f"sleep\0{marker}")


def test_a_vanished_cwd_falls_back_to_the_workspace(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    ws = str(workspace.resolve())
    assert bash(client, sid, "mkdir gone && cd gone && pwd").text == f"{ws}/gone"
    bash(client, sid, "rmdir ../gone")
    r = bash(client, sid, "pwd")
    assert not r.is_error, r.text
    assert r.text.startswith(ws + "\n")
    assert "no longer exists" in r.text
    assert client.get_session(sid).cwd == ws


def test_bash_output_returns_new_output_and_filters(client: Client, session_id: str) -> None:
    r = bash(client, session_id, "printf 'a1\\nb1\\na2\\n'; exit 0", run_in_background=True)
    task_id = r.data["backgroundTaskId"]
    wait_for_event(client, session_id, task_finished(task_id))
    first = client.run_tool(session_id, "BashOutput", {"bash_id": task_id, "filter": "^a"})
    assert not first.is_error, first.text
    assert "<status>completed</status>" in first.text
    assert "<exit_code>0</exit_code>" in first.text
    out = first.content[0].text  # a task notification may follow in a block of its own
    assert "a1\na2" in out and "b1" not in out
    again = client.run_tool(session_id, "BashOutput", {"bash_id": task_id})
    assert "a1" not in again.content[0].text  # only output new since the last look
    bad = client.run_tool(session_id, "BashOutput", {"bash_id": task_id, "filter": "("})
    assert bad.is_error and "regular expression" in bad.text


def test_closing_the_session_ends_its_running_calls(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    marker = f"{int(uuid.uuid4().int % 10**6) + 3 * 10**6}.5"
    result = {}
    caller = threading.Thread(
        target=lambda: result.update(r=bash(client, sid, f"echo started; sleep {marker}"))
    )
    caller.start()
    wait_for_event(
        client, sid, lambda e: e.HasField("progress") and e.progress.last_line == "started"
    )
    client.close_session(sid)
    caller.join(30)
    assert result["r"].is_error and "interrupted" in result["r"].text
    wait_gone(f"sleep\0{marker}")


# --- dangerouslyDisableSandbox -----------------------------------------------------------------


def _unsandboxed_session(client: Client, workspace: Path) -> str:
    from agentd_client.v1 import agentd_pb2 as pb

    request = pb.CreateSessionRequest(
        workspace_roots=[str(workspace)], permission_mode="bypassPermissions",
        allow_unsandboxed=True,
    )  # fmt: skip
    return client.stub.CreateSession(request, timeout=30).id


def test_disabling_the_sandbox_needs_a_session_that_allows_it(
    client: Client, session_id: str
) -> None:
    r = bash(client, session_id, "id -u", dangerouslyDisableSandbox=True)
    assert r.is_error and "does not allow commands outside the sandbox" in r.text


def test_disabling_the_sandbox_asks_even_in_bypass_mode(client: Client, workspace: Path) -> None:
    sid = _unsandboxed_session(client, workspace)
    r = bash(client, sid, "touch made", dangerouslyDisableSandbox=True)
    assert r.is_error and "outside the sandbox" in r.text and "attached" in r.text
    assert not (workspace / "made").exists()


def test_an_approved_unsandboxed_command_runs_on_the_host_not_as_root(
    client: Client, workspace: Path
) -> None:
    sid = _unsandboxed_session(client, workspace)
    stream = client.attach(sid)
    answered = threading.Event()

    def answer() -> None:
        for event in stream:
            if event.WhichOneof("kind") == "permission_requested":
                req = event.permission_requested
                client.resolve_permission(sid, req.request_id, "allow")
                answered.set()
                return

    assert stream.wait_attached()  # the daemon counts it: the call has someone to ask
    answerer = threading.Thread(target=answer, daemon=True)
    answerer.start()
    try:
        r = bash(client, sid, "id -u; hostname; touch made", dangerouslyDisableSandbox=True)
    finally:
        stream.cancel()
    assert answered.is_set()
    assert not r.is_error, r.text
    uid, host = r.text.split()[:2]
    assert uid != "0"
    assert host != "agentd-sandbox"  # the sandbox's hostname: this ran outside it
    assert (workspace / "made").exists()
