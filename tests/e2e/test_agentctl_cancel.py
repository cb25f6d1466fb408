"""Ctrl-C on `agentctl call` cancels the call in the daemon; `cancel` and `tasks stop`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading

from agentd_client import Client
from tests.support import ctl
from tests.support.daemon import DaemonProcess
from tests.support.processes import wait_gone, wait_present
from tests.support.waiting import wait_for_event


def test_ctrl_c_on_a_pty_cancels_the_call_and_its_sandbox(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    # The sleep's own argv says 739211; agentctl's and bash -c's say 73921$((0+1)), so
    # the first marker finds the sandboxed process only.
    command = "echo started; sleep 73921$((0+1))"
    term = ctl.on_pty(
        "--socket", daemon.socket, "call", "-s", session_id, "--id", "toolu_ctrlc_pty",
        "Bash", json.dumps({"command": command}),
    )  # fmt: skip
    try:
        term.read_until(b"started")
        wait_present("739211")
        os.write(term.master, b"\x03")  # the terminal's ^C: SIGINT to agentctl
        assert term.proc.wait(30) == 130
        out = term.drain().decode(errors="replace")
    finally:
        term.close()
    assert "Traceback" not in out, out
    assert "agentctl: interrupted; cancelled Bash call toolu_ctrlc_pty" in out, out
    # Really stopped in the daemon: the sleep, its bash and its bwrap are gone...
    wait_gone("739211", timeout=10)
    wait_gone("73921$((0+1))", timeout=10)
    # ...and the call finished as cancelled, in the journal every terminal sees.
    finished = wait_for_event(
        client,
        session_id,
        lambda e: (
            e.HasField("call_finished") and e.call_finished.result.tool_use_id == "toolu_ctrlc_pty"
        ),
    )
    assert finished.call_finished.result.is_error


def test_sigint_with_json_says_so_on_stdout(
    daemon: DaemonProcess, session_id: str, client: Client
) -> None:
    proc = subprocess.Popen(
        [
            ctl.AGENTCTL, "--socket", daemon.socket, "call", "--json", "-s", session_id,
            "--id", "toolu_ctrlc_json", "Bash", json.dumps({"command": "sleep 73922$((0+1))"}),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        wait_present("739221")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert json.loads(out) == {
        "interrupted": True,
        "cancelled": True,
        "tool_use_id": "toolu_ctrlc_json",
    }
    assert ctl.one_line(err).startswith("agentctl: interrupted; cancelled")
    wait_gone("739221", timeout=10)


def test_cancel_command(daemon: DaemonProcess, client: Client, session_id: str) -> None:
    result: dict[str, object] = {}
    caller = threading.Thread(
        target=lambda: result.update(
            r=client.run_tool(
                session_id, "Bash", {"command": "sleep 73923$((0+1))"}, "toolu_cancel_cmd"
            )
        )
    )
    caller.start()
    wait_present("739231")
    r = ctl.run("--socket", daemon.socket, "cancel", "-s", session_id, "toolu_cancel_cmd")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "cancelled toolu_cancel_cmd"
    caller.join(30)
    assert result["r"].is_error  # type: ignore[attr-defined]
    wait_gone("739231", timeout=10)
    # Nothing running under that id any more: refused, exit 3, one line.
    again = ctl.run("--socket", daemon.socket, "cancel", "-s", session_id, "toolu_cancel_cmd")
    assert again.returncode == 3
    assert "no running call toolu_cancel_cmd" in ctl.one_line(again.stderr)


def test_tasks_stop(daemon: DaemonProcess, client: Client, session_id: str) -> None:
    started = client.run_tool(
        session_id, "Bash", {"command": "sleep 73924$((0+1))", "run_in_background": True}
    )
    task_id = started.data["backgroundTaskId"] if started.data else ""
    if not task_id:
        task_id = started.text.split("with ID: ")[1].split(".")[0]
    wait_present("739241")
    r = ctl.run("--socket", daemon.socket, "tasks", "stop", "-s", session_id, task_id, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["task_id"] == task_id
    wait_gone("739241", timeout=10)
    status = {t.id: t.status for t in client.list_tasks(session_id)}
    assert status[task_id] == "killed"
    again = ctl.run("--socket", daemon.socket, "tasks", "stop", "-s", session_id, task_id)
    assert again.returncode == 3
    assert f"cannot stop task {task_id}" in ctl.one_line(again.stderr)


def test_ctrl_c_on_attach_is_exit_130_without_a_traceback(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    term = ctl.on_pty("--socket", daemon.socket, "attach", session_id, "--from", "now")
    try:
        # Attached once it shows a call made after it started.
        for i in range(20):
            client.run_tool(session_id, "LS", {"path": "/tmp"}, f"toolu_attach_ctrlc{i}")
            try:
                term.read_until(b"toolu_attach_ctrlc", timeout=2)
                break
            except TimeoutError:
                continue
        os.write(term.master, b"\x03")
        assert term.proc.wait(30) == 130
        out = term.drain().decode(errors="replace")
    finally:
        term.close()
    assert "Traceback" not in out, out
