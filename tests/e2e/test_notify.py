"""systemd's notify protocol, against a NOTIFY_SOCKET this test listens on.

pid 1 is not systemd here, and need not be: the daemon only sees `$NOTIFY_SOCKET` and
`$WATCHDOG_USEC`, exactly as a service manager would set them.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from agentd_client import Client
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.ports import free_port

# Pings come every WATCHDOG/2 = 0.25 s.
WATCHDOG_USEC = 500_000


def fields(message: bytes) -> dict[str, str]:
    return dict(line.split("=", 1) for line in message.decode().splitlines())


def recv_until(sock: socket.socket, key: str, timeout: float = 30) -> list[dict[str, str]]:
    """Every message up to and including the first one that carries `key`."""
    sock.settimeout(timeout)
    seen = []
    while True:
        msg = fields(sock.recv(4096))
        seen.append(msg)
        if key in msg:
            return seen


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify")
    sock.bind(path)
    yield sock, path
    sock.close()


def start_in_background(
    base: Path, env: dict[str, str]
) -> tuple[threading.Thread, list[DaemonProcess]]:
    """Start the daemon in a thread, so the test can watch the socket while it starts."""
    started: list[DaemonProcess] = []
    thread = threading.Thread(target=lambda: started.append(start_daemon(base, env=env)))
    thread.start()
    return thread, started


def test_ready_only_once_the_socket_answers_then_status_and_stopping(
    tmp_path: Path, notify_socket: tuple[socket.socket, str], workspace: Path
) -> None:
    sock, path = notify_socket
    thread, started = start_in_background(tmp_path / "d", {"NOTIFY_SOCKET": path})
    before_ready = recv_until(sock, "READY")
    ready = before_ready[-1]
    # Freeze the daemon the moment READY arrives: whatever it has not done by then, it
    # had not done when it said READY. Its socket must already be listening.
    os.kill(int(ready["MAINPID"]), signal.SIGSTOP)
    socket_path = str(tmp_path / "d" / "run" / "agentd.sock")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.connect(socket_path)
    finally:
        os.kill(int(ready["MAINPID"]), signal.SIGCONT)
    with Client(socket_path, timeout=5) as c:
        status = c.status()
    assert ready["READY"] == "1"
    assert ready["MAINPID"] == str(status.pid)
    assert before_ready[0] == {"STATUS": "starting"}
    assert ready["STATUS"].startswith(f"serving on unix:{socket_path}")
    assert "calls served 0" in ready["STATUS"]

    thread.join(30)
    assert started, "the daemon did not say it was serving"
    daemon = started[0]
    try:
        with Client(socket_path, timeout=60) as c:
            assert c.status().pid == daemon.proc.pid
    finally:
        daemon.proc.send_signal(signal.SIGTERM)
        stopping = recv_until(sock, "STOPPING")[-1]
        assert stopping == {"STOPPING": "1", "STATUS": "stopping"}
        assert daemon.stop() == 0, daemon.log


def test_hooks_do_not_inherit_the_notify_socket(
    tmp_path: Path, notify_socket: tuple[socket.socket, str], workspace: Path
) -> None:
    """Hooks run (in the session's sandbox) with what the daemon passes on: they must
    not get the right to speak for the daemon (READY, STOPPING, WATCHDOG) or the test
    stall FIFO."""
    sock, path = notify_socket
    seen = workspace / "hook-env"  # the workspace is writable from the sandbox
    (workspace / ".claude").mkdir()
    hook = {"type": "command", "command": f"env > {seen}"}
    settings = {"hooks": {"PreToolUse": [{"matcher": "LS", "hooks": [hook]}]}}
    settings_file = workspace / ".claude" / "settings.json"
    settings_file.write_text(json.dumps(settings))
    sha = hashlib.sha256(settings_file.read_bytes()).hexdigest()
    config = tmp_path / "config.toml"
    config.write_text(f'trusted_settings = [{{path = "{settings_file}", sha256 = "{sha}"}}]\n')
    env = {
        "NOTIFY_SOCKET": path,
        "WATCHDOG_USEC": str(WATCHDOG_USEC),
        "AGENTD_TEST_STALL_FIFO": str(tmp_path / "fifo"),
    }
    daemon = start_daemon(tmp_path / "d", extra_args=["--config", str(config)], env=env)
    try:
        recv_until(sock, "READY")
        with Client(daemon.socket, timeout=60) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            assert not c.run_tool(sid, "LS", {"path": str(workspace)}).is_error
    finally:
        assert daemon.stop() == 0, daemon.log
    hook_env = seen.read_text()
    assert "CLAUDE_PROJECT_DIR=" in hook_env  # the hook did run
    for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "AGENTD_TEST_STALL_FIFO"):
        assert f"{name}=" not in hook_env


def test_status_follows_the_numbers_on_watchdog_pings(
    tmp_path: Path, notify_socket: tuple[socket.socket, str], workspace: Path
) -> None:
    sock, path = notify_socket
    daemon = start_daemon(
        tmp_path / "d", env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": str(WATCHDOG_USEC)}
    )
    try:
        recv_until(sock, "READY")
        with Client(daemon.socket, timeout=60) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            c.run_tool(sid, "LS", {"path": str(workspace)})
        msgs = recv_until(sock, "STATUS")
        while "calls served 1" not in msgs[-1]["STATUS"]:
            msgs = recv_until(sock, "STATUS")
        assert msgs[-1]["WATCHDOG"] == "1"
        assert "sessions 1" in msgs[-1]["STATUS"]
    finally:
        assert daemon.stop() == 0, daemon.log


def test_abstract_notify_socket(tmp_path: Path) -> None:
    name = f"agentd-test-{secrets.token_hex(8)}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"\0" + name.encode())
    daemon = start_daemon(tmp_path / "d", env={"NOTIFY_SOCKET": f"@{name}"})
    try:
        assert recv_until(sock, "READY")[-1]["READY"] == "1"
    finally:
        sock.close()
        assert daemon.stop() == 0, daemon.log


def test_a_watchdog_for_another_pid_is_not_ours(
    tmp_path: Path, notify_socket: tuple[socket.socket, str]
) -> None:
    sock, path = notify_socket
    env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": str(WATCHDOG_USEC), "WATCHDOG_PID": "1"}
    daemon = start_daemon(tmp_path / "d", env=env)
    try:
        recv_until(sock, "READY")
        sock.settimeout(4 * WATCHDOG_USEC / 1e6)
        with pytest.raises(TimeoutError):
            sock.recv(4096)
    finally:
        assert daemon.stop() == 0, daemon.log


def test_watchdog_pings_stop_while_the_event_loop_is_stuck(
    tmp_path: Path, notify_socket: tuple[socket.socket, str]
) -> None:
    """The pings must come from the event loop, not from a thread that would go on
    pinging while the loop is stuck. The daemon's test-only stall handler blocks the
    loop (and only the loop) in open() of a FIFO; the process itself keeps running,
    which its metrics thread proves by answering meanwhile."""
    sock, path = notify_socket
    fifo = str(tmp_path / "stall")
    os.mkfifo(fifo)
    port = free_port()
    daemon = start_daemon(
        tmp_path / "d",
        extra_args=["--metrics-listen", f"127.0.0.1:{port}"],
        env={
            "NOTIFY_SOCKET": path,
            "WATCHDOG_USEC": str(WATCHDOG_USEC),
            "AGENTD_TEST_STALL_FIFO": fifo,
        },
    )
    every = WATCHDOG_USEC / 2 / 1e6
    try:
        recv_until(sock, "READY")
        for _ in range(3):
            recv_until(sock, "WATCHDOG", timeout=10 * every)

        daemon.proc.send_signal(signal.SIGUSR2)
        # Opening the FIFO for writing returns once the daemon's loop has opened it for
        # reading: from here on the loop is stuck.
        with open(fifo, "w") as release:
            sock.setblocking(False)
            try:
                while True:
                    sock.recv(4096)  # pings sent before the stall
            except BlockingIOError:
                pass
            sock.settimeout(6 * every)
            with pytest.raises(TimeoutError):
                sock.recv(4096)
            # The process is not stopped: another of its threads answers.
            state = Path(f"/proc/{daemon.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            assert state[0] != "T"
            scrape = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
            assert scrape.status_code == 200
            assert "agentd_tool_calls" in scrape.text
            # And the RPCs, served on the loop, are stuck too.
            with Client(daemon.socket, timeout=4 * every) as c, pytest.raises(grpc.RpcError):
                c.status()
            release.write("go\n")
        assert recv_until(sock, "WATCHDOG", timeout=10 * every)[-1]["WATCHDOG"] == "1"
        with Client(daemon.socket, timeout=10) as c:
            assert c.status().pid == daemon.proc.pid
    finally:
        assert daemon.stop() == 0, daemon.log


def test_no_stall_handler_without_the_test_variable(tmp_path: Path) -> None:
    """In a real deployment SIGUSR2 keeps its default action: it ends the process
    rather than stalling it, so no client-reachable path can freeze the loop."""
    daemon = start_daemon(tmp_path / "d")
    daemon.proc.send_signal(signal.SIGUSR2)
    assert daemon.proc.wait(30) == -signal.SIGUSR2
