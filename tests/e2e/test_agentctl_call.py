"""`agentctl call` as a person meets it (issue 19.5): on a terminal the output shows once;
while a prompt is pending it says so, with the code the attached terminals show; it exits
with the command's own exit status, and `--json` keeps the documented codes."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from agentd_client import Client
from tests.support import ctl
from tests.support.daemon import DaemonProcess
from tests.support.screen import Terminal


def test_call_exits_with_the_commands_own_status(daemon: DaemonProcess, session_id: str) -> None:
    def call(command: str, *extra: str) -> tuple[int, str]:
        r = ctl.run(
            "--socket", daemon.socket, "call", "-s", session_id, *extra, "Bash",
            json.dumps({"command": command}),
        )  # fmt: skip
        return r.returncode, r.stdout

    assert call("exit 0")[0] == 0
    assert call("echo out; exit 7") == (7, "Exit code 7\nout\n")
    assert call("kill -TERM $$")[0] == 128 + 15  # as a shell says a signal
    assert call("grep -q nothing /dev/null")[0] == 1  # grep's own 1: no match
    # --json: the documented codes (1: an error result), the status in the data.
    code, out = call("exit 7", "--json")
    assert code == 1 and json.loads(out)["data"]["exitCode"] == 7
    # A call that is not a command: 1 for an error result, as documented.
    r = ctl.run(
        "--socket", daemon.socket, "call", "-s", session_id, "Read",
        json.dumps({"file_path": "/nonexistent/file"}),
    )  # fmt: skip
    assert r.returncode == 1, r.stderr


def test_call_on_a_terminal_prints_the_output_once(daemon: DaemonProcess, session_id: str) -> None:
    command = json.dumps({"command": "echo once-marker; echo second-line; exit 3"})
    with Terminal("--socket", daemon.socket, "call", "-s", session_id, "Bash", command) as term:
        assert term.wait_exit() == 3
        text = term.text()
    assert text.count("once-marker") == 1, text
    assert text.count("second-line") == 1, text


def test_call_says_it_waits_for_approval_with_the_prompts_code(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), permission_mode="default").id
    with Terminal("--socket", daemon.socket, "attach", sid) as attach:
        client.run_tool(sid, "Glob", {"pattern": "call-ready"})
        attach.wait_for("call-ready")
        write = json.dumps({"file_path": "w.txt", "content": "w"})
        with Terminal("--socket", daemon.socket, "call", "-s", sid, "Write", write) as call:
            call.wait_for("waiting for approval on 1 attached client, code ")
            line = next(ln for ln in call.lines() if "waiting for approval" in ln)
            code = line.split("code ")[1].split()[0]
            attach.wait_for(f"permission request, code {code}")
            attach.send("y\n")
            assert call.wait_exit() == 0, call.text()
    assert (workspace / "w.txt").read_text() == "w"


def test_call_json_reports_the_wait_on_stderr(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    """With --json stdout holds the one result object; the wait is a JSON line on stderr."""
    sid = client.create_session(str(workspace), permission_mode="default").id
    stream = client.attach(sid)
    assert stream.wait_attached()

    def deny() -> None:
        for event in stream:
            if event.HasField("permission_requested"):
                client.resolve_permission(sid, event.permission_requested.request_id, "deny")
                return

    answerer = threading.Thread(target=deny)
    answerer.start()
    try:
        write = json.dumps({"file_path": "j.txt", "content": "j"})
        r = ctl.run("--socket", daemon.socket, "call", "-s", sid, "--json", "Write", write)
    finally:
        answerer.join(30)
        stream.cancel()
    assert r.returncode == 1
    assert json.loads(r.stdout)["is_error"] is True
    waiting = json.loads(r.stderr.splitlines()[0])["waiting_for_approval"]
    assert waiting["attached_clients"] == 1 and len(waiting["code"]) == 4
