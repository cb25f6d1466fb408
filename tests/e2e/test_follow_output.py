"""ReadOutput: anyone follows any Bash output by offset, every byte, moving nobody's cursor."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import grpc
import pytest

from agentd_client import Client
from tests.support import ctl
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import task_finished, wait_for_event

LINES = 20000


def _numbered(n: int) -> bytes:
    return b"".join(b"%d\n" % i for i in range(1, n + 1))


def _follow_all(c: Client, sid: str, ident: str, offset: int = 0) -> tuple[bytes, list[int]]:
    data = bytearray()
    offsets: list[int] = []
    for chunk in c.read_output(sid, ident, offset, follow=True):
        assert chunk.offset == offset + len(data), "chunks arrive in order, without holes"
        offsets.append(chunk.offset)
        data += chunk.data
        if chunk.done:
            break
    return bytes(data), offsets


def test_followers_of_a_running_task_get_every_byte(client: Client, session_id: str) -> None:
    # The task waits for a file before printing, so the followers are surely early.
    r = client.run_tool(
        session_id,
        "Bash",
        {
            "command": f"while [ ! -e go ]; do sleep 0.05; done; seq 1 {LINES}; sleep 0.3; "
            f"seq {LINES + 1} {2 * LINES}",
            "run_in_background": True,
        },
    )
    task_id = r.data["backgroundTaskId"]
    got: list[bytes] = [b"", b"", b""]

    def follow(i: int) -> None:
        got[i], _ = _follow_all(client, session_id, task_id)

    threads = [threading.Thread(target=follow, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    client.run_tool(session_id, "Bash", {"command": "touch go"})
    for t in threads:
        t.join(60)
    expected = _numbered(2 * LINES) + b"\n[exited with code 0]\n"
    assert got == [expected] * 3


def test_many_followers_of_a_fast_command_get_every_byte(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    # 12 MB as fast as it can: past the live followers' shared rate and burst, so they
    # are paced, fall behind, and catch up once it ends; each on a channel of its own.
    r = client.run_tool(
        session_id,
        "Bash",
        {
            "command": "while [ ! -e go3 ]; do sleep 0.05; done; seq 1 1500000",
            "run_in_background": True,
        },
    )
    task_id = r.data["backgroundTaskId"]
    got: list[bytes] = [b""] * 6

    def follow(i: int) -> None:
        with Client(daemon.socket, timeout=60) as own:
            got[i], _ = _follow_all(own, session_id, task_id)

    threads = [threading.Thread(target=follow, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    client.run_tool(session_id, "Bash", {"command": "touch go3"})
    for t in threads:
        t.join(60)
    expected = _numbered(1500000) + b"\n[exited with code 0]\n"
    assert [len(g) for g in got] == [len(expected)] * 6
    assert all(g == expected for g in got)


def test_foreground_call_output_is_kept_and_found_by_tool_use_id(
    client: Client, session_id: str
) -> None:
    r = client.run_tool(session_id, "Bash", {"command": "seq 1 500"}, tool_use_id="toolu_seq500")
    assert not r.is_error
    data, _ = _follow_all(client, session_id, "toolu_seq500")
    assert data == _numbered(500)
    # From an offset, and without follow: what is there now, then done.
    chunks = list(client.read_output(session_id, "toolu_seq500", 4))
    assert b"".join(c.data for c in chunks) == _numbered(500)[4:]
    assert chunks[-1].done


def test_read_output_does_not_move_the_models_cursor(client: Client, session_id: str) -> None:
    r = client.run_tool(session_id, "Bash", {"command": "seq 1 100", "run_in_background": True})
    task_id = r.data["backgroundTaskId"]
    wait_for_event(client, session_id, task_finished(task_id))
    for _ in range(3):
        data, _ = _follow_all(client, session_id, task_id)
        assert data.startswith(_numbered(100))
    out = client.run_tool(session_id, "BashOutput", {"bash_id": task_id})
    assert out.data["output"].startswith("1\n2\n3\n"), out.text
    # The model's own read did move its cursor; a person's read after it still sees all.
    again = client.run_tool(session_id, "BashOutput", {"bash_id": task_id})
    assert again.data["output"] == ""
    data, _ = _follow_all(client, session_id, task_id)
    assert data.startswith(_numbered(100))


def test_unknown_or_foreign_output_is_not_found(
    client: Client, session_id: str, workspace: Path
) -> None:
    other = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    r = client.run_tool(other, "Bash", {"command": "echo secret"}, tool_use_id="toolu_other")
    assert not r.is_error
    for ident in ("toolu_other", "bdeadbeef", "../../../etc/passwd", "b1234567/../x"):
        with pytest.raises(grpc.RpcError) as err:
            list(client.read_output(session_id, ident))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND, ident


def test_stable_path_inside_the_sandbox(client: Client, session_id: str) -> None:
    r = client.run_tool(
        session_id,
        "Bash",
        {"command": "for i in 1 2 3; do echo line$i; sleep 0.1; done", "run_in_background": True},
    )
    task_id = r.data["backgroundTaskId"]
    path = f"/run/agentd-tasks/{task_id}.output"
    assert path in r.text
    # tail -f in the sandbox ends with the task (--pid cannot see it: wait on the text).
    seen = client.run_tool(
        session_id,
        "Bash",
        {"command": f"timeout 20 tail -n +1 -f {path} | sed '/exited with code/q'"},
    )
    assert "line1\nline2\nline3\n" in seen.text, seen.text
    # Read-only, and the sandbox identity's only.
    probe = client.run_tool(
        session_id,
        "Bash",
        {
            "command": f"echo x >> {path}; rm -f {path}; touch /run/agentd-tasks/new; "
            f"stat -c '%a %u %g' {path}"
        },
    )
    # Not the sandbox's to write (root's, which shows as the overflow uid inside),
    # not to remove, and nothing can be added beside it.
    assert f"{path}: Permission denied" in probe.text, probe.text
    assert probe.text.count("Read-only file system") == 2, probe.text
    assert probe.text.rstrip().endswith("640 65534 65534"), probe.text


def test_agentctl_logs_follows_every_byte(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    r = client.run_tool(
        session_id,
        "Bash",
        {
            "command": "while [ ! -e go2 ]; do sleep 0.05; done; "
            "for i in $(seq 1 3000); do echo $i; done",
            "run_in_background": True,
        },
    )
    task_id = r.data["backgroundTaskId"]
    proc = ctl.popen(
        "--socket", daemon.socket, "logs", "-s", session_id, "-f", "--from-start", task_id
    )
    client.run_tool(session_id, "Bash", {"command": "touch go2"})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == (_numbered(3000) + b"\n[exited with code 0]\n").decode()
    # Without --from-start: the last ten lines, like tail.
    tail = ctl.run("--socket", daemon.socket, "logs", "-s", session_id, task_id)
    assert tail.stdout.splitlines()[-1] == "[exited with code 0]"
    assert len(tail.stdout.splitlines()) == 10


def test_a_follower_going_away_does_not_stop_the_others(client: Client, session_id: str) -> None:
    r = client.run_tool(
        session_id,
        "Bash",
        {
            "command": "echo one; while [ ! -e go3 ]; do sleep 0.05; done; echo two",
            "run_in_background": True,
        },
    )
    task_id = r.data["backgroundTaskId"]
    quitter = client.read_output(session_id, task_id, 0, follow=True)
    stayer = client.read_output(session_id, task_id, 0, follow=True)
    assert next(quitter).data == b"one\n"
    assert next(stayer).data == b"one\n"
    quitter.cancel()  # both were waiting on the same write
    client.run_tool(session_id, "Bash", {"command": "touch go3"})
    rest = b"".join(c.data for c in stayer)
    assert rest == b"two\n\n[exited with code 0]\n"


def test_attach_json_lines_carry_every_byte_of_a_calls_output(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    after = client.get_session(session_id).last_seq
    proc = ctl.popen(
        "--socket", daemon.socket, "attach", session_id, "--json", "--from", str(after)
    )
    # It follows live once it shows a call made now.
    client.run_tool(session_id, "Glob", {"pattern": "json-ready"})
    assert proc.stdout is not None
    lines = []
    while "json-ready" not in (line := proc.stdout.readline()):
        assert line, "attach ended early"
        lines.append(line)
    r = client.run_tool(session_id, "Bash", {"command": "seq 1 5000"})
    assert not r.is_error
    client.close_session(session_id)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    data = bytearray()
    kinds = set()
    for line in [*lines, *out.splitlines()]:
        obj = json.loads(line)
        if "output" in obj:
            assert obj["output"]["offset"] == len(data)
            data += obj["output"]["data"].encode()
        else:
            kinds.update(k for k in obj if k not in ("seq", "session_id", "time_ms"))
    assert bytes(data) == _numbered(5000)
    assert {"call_started", "progress", "call_finished", "session_closed"} <= kinds


def test_a_calls_output_is_found_by_tool_use_id_after_a_restart(
    tmp_path: Path, workspace: Path
) -> None:
    base = tmp_path / "d"
    first = start_daemon(base)
    try:
        with Client(first.socket, timeout=60) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            r = c.run_tool(sid, "Bash", {"command": "seq 1 300"}, tool_use_id="toolu_kept_out")
            assert not r.is_error, r.text
    finally:
        assert first.stop() == 0, first.log
    second = start_daemon(base)
    try:
        logs = ctl.run(
            "--socket", second.socket, "logs", "-s", sid, "--from-start", "toolu_kept_out"
        )  # fmt: skip
        assert logs.returncode == 0, logs.stderr
        assert logs.stdout.encode().startswith(_numbered(300))
        # Another session's tool_use_id is not this one's.
        with Client(second.socket, timeout=60) as c:
            other = c.create_session(str(workspace)).id
            with pytest.raises(grpc.RpcError) as err:
                list(c.read_output(other, "toolu_kept_out", 0))
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        assert second.stop() == 0, second.log
