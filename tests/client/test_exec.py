"""`agentctl exec -it` and `agentctl attach-task` on real ptys at both ends: the person's
(tests/support/screen.py, rendered by pyte) and the task's (the shim's, in the sandbox),
through the real daemon."""

from __future__ import annotations

import fcntl
import re
import struct
import termios
from pathlib import Path

import pytest

from agentd_client import Client
from agentd_client.terminal.display import describe_event
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.daemon import DaemonProcess
from tests.support.screen import Terminal
from tests.support.waiting import wait_for_event, wait_until

PROMPT = "sbx$ "
# A shell with a prompt of our own, no rc files: what it prints is all ours.
BASH = ["bash", "--norc", "--noprofile", "-i"]


def _exec(
    daemon: DaemonProcess, session_id: str, *cmd: str, rows: int = 30, cols: int = 100
) -> Terminal:
    return Terminal(
        "exec", "-it", "--socket", daemon.socket, session_id, "--", *cmd, rows=rows, cols=cols
    )


def _started_task(client: Client, session_id: str) -> str:
    event = wait_for_event(
        client,
        session_id,
        lambda e: e.HasField("task_controlled") and e.task_controlled.action == "opened",
    )
    return event.task_controlled.task_id


def _resize(term: Terminal, rows: int, cols: int) -> None:
    """The person's terminal window changes size: the kernel tells agentctl (SIGWINCH)."""
    fcntl.ioctl(term.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    term.screen.resize(rows, cols)


def _shell_ready(term: Terminal) -> None:
    term.send("PS1='sbx$ '\r")
    term.wait_for(lambda t: t.last_line() == PROMPT.strip(), what="the shell's prompt")


def test_exec_it_bash_follows_the_terminal_size(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    with _exec(daemon, session_id, *BASH) as term:
        _shell_ready(term)
        term.send("echo cols=$(tput cols) tty=$([ -t 0 ] && echo yes)\r")
        term.wait_for("cols=100 tty=yes")
        task_id = _started_task(client, session_id)
        _resize(term, 40, 120)
        wait_for_event(
            client,
            session_id,
            lambda e: (
                e.HasField("task_controlled")
                and e.task_controlled.action == "resized"
                and e.task_controlled.size.cols == 120
            ),
        )
        term.send("echo now=$(tput cols)x$(tput lines)\r")
        term.wait_for("now=120x40")
        term.send("exit 7\r")
        assert term.wait_exit() == 7
        # The terminal is given back with nothing of the task's left to undo (bash set
        # bracketed paste while it read lines, and cleared it as it left).
        assert term.screen.cursor.x == 0
        done = client.list_tasks(session_id)
        assert [t.status for t in done if t.id == task_id] == ["failed"]


def test_ctrl_c_reaches_the_process_not_agentctl(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    with _exec(daemon, session_id, *BASH) as term:
        _shell_ready(term)
        term.send("sleep 1000.417\r")  # a duration no other test's sleep has
        _started_task(client, session_id)
        wait_until(_has_sleep, what="sleep running in the sandbox")
        term.send("\x03")  # Ctrl-C: a byte to the task's terminal, which makes it SIGINT
        term.wait_for(lambda t: t.last_line() == PROMPT.strip(), what="the prompt after ^C")
        term.send("echo after=$?\r")
        term.wait_for("after=130")
        assert term.proc.poll() is None  # agentctl is still there, linked
        term.send("exit\r")
        assert term.wait_exit() == 0


def _has_sleep() -> bool:
    import os

    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f.read() == b"sleep\x001000.417\x00":
                        return True
            except OSError:
                continue
    return False


def test_detach_then_attach_task_again(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    with _exec(daemon, session_id, *BASH) as term:
        _shell_ready(term)
        term.send("x=remembered\r")
        term.wait_for(lambda t: t.text().count(PROMPT) >= 3, what="the prompt after x=")
        term.send("\x10\x11")  # Ctrl-P Ctrl-Q
        assert term.wait_exit() == 0
        found = re.search(r"detached from task (b[0-9a-f]{8})", term.text())
        assert found, term.text()
        task_id = found.group(1)
    assert [t.status for t in client.list_tasks(session_id) if t.id == task_id] == ["running"]
    with Terminal("attach-task", "--socket", daemon.socket, task_id, rows=30, cols=100) as again:
        again.wait_for("x=remembered", what="the replayed output")
        again.send("echo got=$x\r")
        again.wait_for("got=remembered")
        again.send("exit\r")
        assert again.wait_exit() == 0


def test_a_repl_driven_through_attach_task(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    started = client.stub.StartTask(
        pb.StartTaskRequest(
            session_id=session_id, command="python3 -i -q", pty=pb.TerminalSize(rows=24, cols=80)
        )
    )
    assert started.pty and started.stdin_open
    with Terminal(
        "attach-task", "--socket", daemon.socket, started.task_id, rows=24, cols=80
    ) as term:
        term.wait_for(">>>", what="the REPL's prompt")
        term.send("6 * 7\r")
        term.wait_for("42")
        term.send("import os; os.get_terminal_size()\r")
        term.wait_for("columns=80, lines=24")
        term.send("\x10\x11")
        assert term.wait_exit() == 0
    # Two people at once: whoever types is typed.
    with (
        Terminal("attach-task", "--socket", daemon.socket, started.task_id) as one,
        Terminal("attach-task", "--socket", daemon.socket, started.task_id) as two,
    ):
        one.wait_for("columns=80")
        two.wait_for("columns=80")
        one.send("'from ' + 'one'\r")
        two.wait_for("'from one'")
        two.send("'from ' + 'two'\r")
        one.wait_for("'from two'")
        two.send("exit()\r")
        assert one.wait_exit() == 0
        assert two.wait_exit() == 0
    wait_until(lambda: _status(client, session_id, started.task_id) == "completed")


def _status(client: Client, session_id: str, task_id: str) -> str:
    return next(t.status for t in client.list_tasks(session_id) if t.id == task_id)


def test_input_to_a_task_without_a_terminal_and_close_stdin(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    from tests.support.ctl import run

    started = client.stub.StartTask(
        pb.StartTaskRequest(session_id=session_id, command="cat; echo cat-ended", stdin=True)
    )
    assert not started.pty and started.stdin_open
    sent = run("task-input", "--socket", daemon.socket, started.task_id, "--data", "hello\n")
    assert sent.returncode == 0, sent.stderr
    assert _output_shows(client, session_id, started.task_id, b"hello\n")
    assert _status(client, session_id, started.task_id) == "running"  # cat waits for more
    closed = run("task-input", "--socket", daemon.socket, started.task_id, "--close")
    assert closed.returncode == 0, closed.stderr
    wait_until(lambda: _status(client, session_id, started.task_id) == "completed")
    assert _output_shows(client, session_id, started.task_id, b"hello\ncat-ended\n")
    journal = [e for e in client.attach(session_id, follow=False) if e.HasField("task_controlled")]
    events = [e.task_controlled for e in journal]
    actions = [(e.action, e.bytes) for e in events if e.task_id == started.task_id]
    assert ("input", 6) in actions and ("input_closed", 0) in actions
    assert all("@" in e.by for e in events)  # who did it: user@host
    shown = "\n".join(describe_event(e) for e in journal)  # as `agentctl attach` shows it
    assert f"task {started.task_id} had its stdin closed by " in shown


def _output_shows(client: Client, session_id: str, task_id: str, want: bytes) -> bool:
    seen = b""
    for chunk in client.read_output(session_id, task_id, follow=True, timeout=30):
        seen += chunk.data
        if want in seen:
            return True
    return False


@pytest.mark.parametrize("signal_name", ["INT", "TERM", "HUP"])
def test_a_signal_reaches_every_process_of_the_task(
    daemon: DaemonProcess, client: Client, session_id: str, signal_name: str
) -> None:
    started = client.stub.StartTask(
        pb.StartTaskRequest(
            session_id=session_id,
            # The outer shell waits for the inner one: its end would end the sandbox.
            command=f"trap 'echo outer-got-{signal_name}; wait; exit 3' {signal_name}; "
            f"(trap 'echo inner-got-{signal_name}; exit 0' {signal_name}; echo ready; "
            "while :; do read -t 1 x; done) & wait",
        )
    )
    assert _output_shows(client, session_id, started.task_id, b"ready\n")
    client.stub.SignalTask(
        pb.SignalTaskRequest(session_id=session_id, task_id=started.task_id, signal=signal_name)
    )
    assert _output_shows(client, session_id, started.task_id, f"outer-got-{signal_name}".encode())
    assert _output_shows(client, session_id, started.task_id, f"inner-got-{signal_name}".encode())
    wait_until(lambda: _status(client, session_id, started.task_id) == "failed")


@pytest.mark.parametrize("how", ["kill -9", "hangup"])
def test_an_exec_whose_client_is_gone_leaves_nothing(
    daemon: DaemonProcess, client: Client, session_id: str, how: str
) -> None:
    """agentctl killed outright, or its terminal closed (SIGHUP): the daemon sees the
    stream drop and hangs the task up; nothing of it stays."""
    import signal

    with _exec(daemon, session_id, *BASH) as term:
        _shell_ready(term)
        task_id = _started_task(client, session_id)
        term.proc.send_signal(signal.SIGKILL if how == "kill -9" else signal.SIGHUP)
        term.proc.wait(30)
    wait_for_event(
        client,
        session_id,
        lambda e: e.HasField("task_finished") and e.task_finished.task.id == task_id,
    )
    reasons = [
        e.task_controlled.reason
        for e in client.attach(session_id, follow=False)
        if e.HasField("task_controlled") and e.task_controlled.action == "input"
    ]
    assert reasons and reasons[-1] in ("dropped", "closed")
    wait_until(lambda: not _running_bash_of(task_id), what="the task's shim and sandbox gone")


def _running_bash_of(task_id: str) -> bool:
    """A process still running with the task's output file open (its shim, its sandbox)."""
    import os

    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}").endswith(f"{task_id}.output"):
                    return True
        except OSError:
            continue
    return False


def test_exec_without_a_terminal_pipes_stdin_and_exits_with_the_code(
    daemon: DaemonProcess, session_id: str
) -> None:
    import os
    import subprocess

    from tests.support.ctl import AGENTCTL

    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    piped = subprocess.run(
        [AGENTCTL, "exec", "-i", "--socket", daemon.socket, session_id, "--", "tr a-z A-Z; exit 4"],
        input=b"typed \x1b[31m bytes\n",
        capture_output=True,
        timeout=120,
        env=env,
    )
    assert piped.returncode == 4, piped.stderr
    # To a pipe, the bytes as printed (a program reads them), without the daemon's end line.
    assert piped.stdout == b"TYPED \x1b[31M BYTES\n", piped.stdout
    quoted = subprocess.run(
        [
            AGENTCTL,
            "exec",
            "--socket",
            daemon.socket,
            session_id,
            "--",
            "printf",
            "%s|",
            "a b",
            "c",
        ],
        capture_output=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert quoted.returncode == 0, quoted.stderr
    assert quoted.stdout == b"a b|c|", quoted.stdout


def test_ctrl_c_without_a_raw_terminal_is_sent_on_as_sigint(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    """`exec` without -t on a person's terminal: Ctrl-C is agentctl's SIGINT, which it
    sends on to the task (once); the task's own exit code is agentctl's."""
    command = "trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 0.1; done"
    with Terminal("exec", "--socket", daemon.socket, session_id, "--", command) as term:
        term.wait_for("ready")
        term.send("\x03")
        term.wait_for("got-int")
        assert term.wait_exit() == 5
    signalled = [
        e.task_controlled.signal
        for e in client.attach(session_id, follow=False)
        if e.HasField("task_controlled") and e.task_controlled.action == "signalled"
    ]
    assert signalled == ["INT"]


@pytest.mark.parametrize("answer", ["y", "n"])
def test_exec_asks_its_person_when_the_session_asks(
    daemon: DaemonProcess, client: Client, workspace: Path, answer: str
) -> None:
    """A session in the default mode asks before `touch`: exec's person is asked on their
    terminal, and their answer decides (and is recorded as theirs)."""
    sid = client.create_session(str(workspace)).id
    with Terminal("exec", "--socket", daemon.socket, sid, "--", "touch made-by-exec") as term:
        term.wait_for("allow? [y]es")
        assert "touch made-by-exec" in term.text()
        term.send(f"{answer}\r")
        code = term.wait_exit()
    assert (workspace / "made-by-exec").exists() == (answer == "y")
    assert code == (0 if answer == "y" else 3), term.text()
    resolved = [
        e.permission_resolved
        for e in client.attach(sid, follow=False)
        if e.HasField("permission_resolved")
    ]
    assert [r.decision for r in resolved] == ["allow" if answer == "y" else "deny"]


def test_sigint_to_a_repl_on_a_pty_is_a_keyboard_interrupt_not_its_end(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    started = client.stub.StartTask(
        pb.StartTaskRequest(
            session_id=session_id, command="python3 -i -q", pty=pb.TerminalSize(rows=24, cols=80)
        )
    )
    with Terminal("attach-task", "--socket", daemon.socket, started.task_id) as term:
        term.wait_for(">>>")
        client.stub.SignalTask(
            pb.SignalTaskRequest(session_id=session_id, task_id=started.task_id, signal="INT")
        )
        term.wait_for("KeyboardInterrupt")
        term.send("6 * 7\r")
        term.wait_for("42")
        term.send("exit()\r")
        assert term.wait_exit() == 0


def test_exec_uses_the_terminal_socket_and_falls_back_to_grpc_without_it(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    """On the daemon's machine the keys and output go over its terminal socket; where it
    cannot be reached (here: moved away; a daemon over TCP offers none), over gRPC's
    WriteInput and ReadOutput, the same to the person."""
    import os

    term_socket = f"{daemon.socket}.term"
    for reachable in (True, False):
        if not reachable:
            os.rename(term_socket, f"{term_socket}.away")
        try:
            mark = len(daemon.log_lines)
            before = {t.id for t in client.list_tasks(session_id, include_finished=True)}
            with _exec(daemon, session_id, *BASH) as term:
                _shell_ready(term)
                (task_id,) = {t.id for t in client.list_tasks(session_id)} - before
                term.send("echo via-$((6*7))\r")
                term.wait_for("via-42")
                term.send("exit 3\r")
                assert term.wait_exit() == 3
            linked = [
                line
                for line in daemon.log_lines[mark:]
                if f"terminal socket: task {task_id} linked" in line
            ]
            assert bool(linked) == reachable
        finally:
            if not reachable:
                os.rename(f"{term_socket}.away", term_socket)
