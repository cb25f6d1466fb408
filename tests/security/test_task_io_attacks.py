"""Attacks on the processes a person drives (issue 22), through the real daemon.

- Another session's task: writing to it, closing its stdin, signalling it, resizing it,
  reading its terminal: each is refused as not found, and the task saw nothing.
- A PTY escape: a process on a task's terminal trying to reach the terminal of the daemon
  itself (a daemon started here with a controlling terminal of the test's own): TIOCSTI
  into its own terminal and /dev/tty, opening other terminals, stealing a controlling
  terminal. The attack runs only inside the sandbox (tests/sandbox/guard.py first), and
  nothing arrives on the daemon's terminal.
- A client that floods input to a task that reads slowly: every byte arrives, in order,
  and the daemon's peak memory stays bounded (its window, the shim's buffer).

On main none of this can be tried: the RPCs do not exist (UNIMPLEMENTED), and a
background task's stdin is /dev/null.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import termios
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agentd_client import Client
from agentd_client.v1 import agentd_pb2 as pb
from tests.sandbox._sandbox_attack import HOST_PIDNS
from tests.sandbox.conftest import GUARD, SYSTEM_PYTHON
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import wait_until


def _output(client: Client, sid: str, task_id: str, want: bytes) -> bytes:
    seen = b""
    for chunk in client.read_output(sid, task_id, follow=True, timeout=120):
        seen += chunk.data
        if want in seen:
            break
    return seen


def test_another_sessions_task_is_out_of_reach(client: Client, workspace: Path) -> None:
    mine = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    other = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    started = client.stub.StartTask(
        pb.StartTaskRequest(
            session_id=mine,
            command="echo ready; cat; echo cat-ended",
            pty=pb.TerminalSize(rows=24, cols=80),
        )
    )
    tid = started.task_id
    assert b"ready" in _output(client, mine, tid, b"ready")
    ref = pb.TaskRef(session_id=other, task_id=tid)
    attempts = {
        "write": lambda: client.stub.WriteInput(
            iter([pb.TaskInput(session_id=other, task_id=tid, data=b"injected\n")])
        ),
        "close": lambda: client.stub.CloseInput(ref),
        "signal": lambda: client.stub.SignalTask(
            pb.SignalTaskRequest(session_id=other, task_id=tid, signal="KILL")
        ),
        "resize": lambda: client.stub.ResizeTask(
            pb.ResizeTaskRequest(
                session_id=other, task_id=tid, size=pb.TerminalSize(rows=5, cols=5)
            )
        ),
        "terminal": lambda: client.stub.GetTaskTerminal(ref),
    }
    for what, attempt in attempts.items():
        with pytest.raises(grpc.RpcError) as caught:
            attempt()
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND, what
    term = client.stub.GetTaskTerminal(pb.TaskRef(session_id=mine, task_id=tid))
    assert term.status == "running" and (term.size.rows, term.size.cols) == (24, 80)
    assert b"injected" not in client.read_output(mine, tid).__next__().data
    # Its own session reaches it.
    client.stub.SignalTask(pb.SignalTaskRequest(session_id=mine, task_id=tid, signal="KILL"))
    wait_until(lambda: [t.status for t in client.list_tasks(mine) if t.id == tid] == ["killed"])


def test_bad_requests_are_refused(client: Client, session_id: str) -> None:
    bad = [
        (client.stub.StartTask, pb.StartTaskRequest(session_id=session_id, command="")),
        (
            client.stub.StartTask,
            pb.StartTaskRequest(
                session_id=session_id, command="true", pty=pb.TerminalSize(rows=0, cols=80)
            ),
        ),
        (
            client.stub.SignalTask,
            pb.SignalTaskRequest(session_id=session_id, task_id="b00000000", signal="STOP"),
        ),
        (client.stub.CloseInput, pb.TaskRef(session_id=session_id, task_id="")),
    ]
    for method, request in bad:
        with pytest.raises(grpc.RpcError) as caught:
            method(request)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, request
    with pytest.raises(grpc.RpcError) as caught:
        client.stub.WriteInput(iter([]))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# ---- a PTY escape towards the daemon's own terminal ----

_CTTY_WRAPPER = """\
import fcntl, os, sys, termios
os.setsid()
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.ioctl(fd, termios.TIOCSCTTY, 0)
os.execvp(sys.argv[2], sys.argv[2:])
"""

_ESCAPE = """\
import fcntl, glob, json, os, termios
found = {}
def attempt(name, f):
    try:
        f()
        found[name] = "done"
    except OSError as e:
        found[name] = e.strerror
for i, ch in enumerate(b"id>/tmp/x\\n"):
    attempt("TIOCSTI stdin", lambda: fcntl.ioctl(0, termios.TIOCSTI, bytes([ch])))
tty = os.open("/dev/tty", os.O_RDWR)
attempt("TIOCSTI /dev/tty", lambda: fcntl.ioctl(tty, termios.TIOCSTI, b"x"))
attempt("TIOCLINUX", lambda: fcntl.ioctl(0, 0x541C, b"\\x06"))
attempt("TIOCSCTTY steal", lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 1))
others = []
for path in glob.glob("/dev/pts/*") + glob.glob("/dev/tty[0-9]*") + ["/dev/console"]:
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        others.append(path)
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        found["TIOCSTI " + path] = "done"
    except OSError as e:
        found["open " + path] = e.strerror
ttys = set()
for fd in glob.glob("/proc/[0-9]*/fd/*"):
    try:
        target = os.readlink(fd)
    except OSError:
        continue
    if "pts" in target or "tty" in target:
        ttys.add(target)
found["opened"] = others
found["ttys seen"] = sorted(ttys)
print("ESCAPE-RESULT " + json.dumps(found), flush=True)
"""


@pytest.fixture
def daemon_on_a_terminal(tmp_path: Path) -> Iterator[tuple[DaemonProcess, int, int]]:
    """A daemon whose controlling terminal is a pty of the test's: (daemon, master, slave)."""
    master, slave = os.openpty()
    wrapper = tmp_path / "ctty.py"
    wrapper.write_text(_CTTY_WRAPPER)
    daemon = start_daemon(tmp_path / "d", wrapper=[sys.executable, str(wrapper), os.ttyname(slave)])
    try:
        yield daemon, master, slave
    finally:
        daemon.stop()
        os.close(master)
        os.close(slave)


def _tty_nr(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rindex(b")") + 2 :].split()[4])


def test_a_pty_escape_does_not_reach_the_daemons_terminal(
    daemon_on_a_terminal: tuple[DaemonProcess, int, int], workspace: Path
) -> None:
    daemon, master, slave = daemon_on_a_terminal
    assert _tty_nr(daemon.proc.pid) == os.stat(os.ttyname(slave)).st_rdev  # it has one
    guard = workspace / ".guard.py"
    shutil.copy(GUARD, guard)
    (workspace / ".escape.py").write_text(_ESCAPE)
    with Client(daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        started = c.stub.StartTask(
            pb.StartTaskRequest(
                session_id=sid,
                command=f"{SYSTEM_PYTHON} .guard.py {HOST_PIDNS} -- {SYSTEM_PYTHON} .escape.py",
                pty=pb.TerminalSize(rows=24, cols=200),
            )
        )
        seen = _output(c, sid, started.task_id, b"\n[exited with code")
        assert b"NOT SANDBOXED" not in seen, seen
    line = next(x for x in seen.decode().splitlines() if x.startswith("ESCAPE-RESULT "))
    found = json.loads(line.removeprefix("ESCAPE-RESULT "))
    assert found["TIOCSTI stdin"] == "Operation not permitted", found
    assert found["TIOCSTI /dev/tty"] == "Operation not permitted", found
    assert found["TIOCLINUX"] == "Operation not permitted", found
    assert not [k for k, v in found.items() if k.startswith("TIOCSTI /dev/") and v == "done"]
    assert os.ttyname(slave) not in found["ttys seen"], found
    # Nothing reached the daemon's terminal: no input queued for it, no output on it.
    queued = fcntl.ioctl(slave, termios.FIONREAD, b"\0\0\0\0")
    assert int.from_bytes(queued, sys.byteorder) == 0
    os.set_blocking(master, False)
    with pytest.raises(BlockingIOError):
        os.read(master, 4096)
    assert _tty_nr(daemon.proc.pid) == os.stat(os.ttyname(slave)).st_rdev


# ---- a client that floods input ----


def _vm_hwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def test_a_flood_of_input_arrives_whole_in_bounded_memory(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    total = 64 << 20
    block = os.urandom(1 << 20)
    digest = hashlib.sha256(block * (total // len(block))).hexdigest()
    reader = (
        "import hashlib, sys, time\n"
        "h = hashlib.sha256(); n = 0\n"
        "while chunk := sys.stdin.buffer.read1(65536):\n"
        "    h.update(chunk); n += len(chunk); time.sleep(0.004)\n"
        'print("GOT", n, h.hexdigest(), flush=True)\n'
    )
    started = client.stub.StartTask(
        pb.StartTaskRequest(session_id=session_id, command=f"python3 -c '{reader}'", stdin=True)
    )
    # The daemon's peak resident memory, counted from here (clear_refs 5 resets it).
    with open(f"/proc/{daemon.proc.pid}/clear_refs", "w") as f:
        f.write("5")
    before = _vm_hwm_kib(daemon.proc.pid)
    # The task's shim, which holds what the task has not read yet.
    shim_info = Path(daemon.state_dir) / "shims" / started.task_id / "shim.json"
    wait_until(shim_info.exists, what="the task's shim recorded")
    shim_pid = json.loads(shim_info.read_text())["pid"]
    with open(f"/proc/{shim_pid}/clear_refs", "w") as f:
        f.write("5")
    shim_before = _vm_hwm_kib(shim_pid)
    shim_peak = [shim_before]

    def watch_shim() -> None:
        while writer.is_alive():
            with contextlib.suppress(OSError, StopIteration):
                shim_peak[0] = max(shim_peak[0], _vm_hwm_kib(shim_pid))
            writer.join(0.05)

    def flood() -> Iterator[pb.TaskInput]:
        yield pb.TaskInput(session_id=session_id, task_id=started.task_id)
        for _ in range(total // len(block)):
            yield pb.TaskInput(data=block)

    result: list[pb.WriteInputResponse] = []
    writer = threading.Thread(target=lambda: result.append(client.stub.WriteInput(flood())))
    writer.start()
    watch_shim()
    writer.join(300)
    assert result and result[0].bytes == total
    client.stub.CloseInput(pb.TaskRef(session_id=session_id, task_id=started.task_id))
    out = _output(client, session_id, started.task_id, b"\n[exited with code")
    assert f"GOT {total} {digest}".encode() in out
    grown_mib = (_vm_hwm_kib(daemon.proc.pid) - before) / 1024
    # Unbounded, either would grow by most of the 64 MiB the task had not read yet; bounded,
    # the daemon holds gRPC's windows and a message or two, the shim its 512 KiB.
    assert grown_mib < 32, f"the daemon's peak memory grew {grown_mib:.0f} MiB for 64 MiB of input"
    shim_mib = (shim_peak[0] - shim_before) / 1024
    assert shim_mib < 8, f"the shim's peak memory grew {shim_mib:.0f} MiB for 64 MiB of input"
