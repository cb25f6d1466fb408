"""How each end of a forwarded connection leaves nothing behind: the server ending, the
laptop's client closing, agentctl interrupted or killed (as a dropped link is), and a
daemon restart. "Nothing" is checked in the session's namespace: the daemon's own
socket to the server is closed (a leaked one fails these) and no connection to the
port is held open at either end."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from agentd_client import Client
from tests.support import ctl, forwarding
from tests.support.daemon import start_daemon
from tests.support.forward_traffic import SERVER, exchange
from tests.support.forwarding import (
    Tls,
    background,
    daemons_sockets,
    forward,
    free_port,
    held,
    journal,
    listening,
    still_open,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

# The module's fixtures (tests/support/forwarding.py).
tls = forwarding.tls
# agentctl on the daemon's unix socket (the terminal socket) or over TLS (ForwardMux).
OVER = pytest.mark.parametrize("over", ["socket", "grpc"])


@OVER
def test_the_server_ending_closes_the_laptops_connection_and_leaves_nothing(
    tls: Tls, workspace: Path, over: str
) -> None:
    """A connection open while its server's task is stopped: the laptop's side reads EOF,
    the daemon's socket goes, and the forward goes on serving (refusing in one line)."""
    (workspace / "server.py").write_text(SERVER)
    port = free_port()
    with Client(tls.daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        task = background(c, sid, f"exec python3 server.py {port}")
        wait_until(lambda: listening(tls, sid, port), timeout=60, what="the task's server")
        fw = forward(tls, sid, f"0:{port}", over)
        try:
            sock = socket.create_connection(("127.0.0.1", fw.local_port), 30)
            sock.sendall(b"\0" * 8)  # half a header: the server waits for the rest
            wait_until(
                lambda: any(e["action"] == "connected" for e in journal(c, sid)),
                timeout=30,
                what="the connection in the daemon",
            )
            mine = daemons_sockets(tls.daemon, sid, port)
            assert len(still_open(tls.daemon, mine)) == 1
            r = c.run_tool(sid, "TaskStop", {"task_id": task})
            assert not r.is_error, r.text
            sock.settimeout(30)
            assert sock.recv(1) == b""  # EOF: the server's end reached the laptop
            sock.close()
            again = socket.create_connection(("127.0.0.1", fw.local_port), 30)
            again.settimeout(30)
            assert again.recv(1) == b""  # refused inside: closed here, said on stderr
            again.close()
        finally:
            code, err = fw.stop()
        assert "nothing listens on port" in err, err
        wait_until(
            lambda: not (still_open(tls.daemon, mine) or held(tls.daemon, sid, port)),
            timeout=30,
            what="the connection closed at both ends",
        )
        closed = wait_until(  # the journal takes connection events in batches
            lambda: [e for e in journal(c, sid) if e["action"] == "closed"],
            timeout=30,
            what="the connection's end in the journal",
        )
        assert len(closed) == 1, closed
        c.close_session(sid)


def test_a_daemon_restart_cuts_open_connections_and_the_forward_goes_on(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / "hello.txt").write_text("still here\n")
    port = free_port()
    base = tmp_path / "d"
    daemon = start_daemon(base, keep_tasks=True)
    sock_args = ["--socket", daemon.socket]
    try:
        with Client(daemon.socket, timeout=60) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            background(c, sid, f"exec python3 -m http.server {port} --bind 127.0.0.1")

            def served() -> bool:
                out = ctl.run("ports", sid, "--json", *sock_args)
                return out.returncode == 0 and any(
                    p["port"] == port for p in json.loads(out.stdout)
                )

            wait_until(served, timeout=60, what="the task's server")
        proc = ctl.popen("forward", sid, f"0:{port}", "--json", *sock_args)
        assert proc.stdout is not None and proc.stderr is not None
        info = json.loads(proc.stdout.readline())
        url = f"http://127.0.0.1:{info['local_port']}/hello.txt"
        held = socket.create_connection(("127.0.0.1", info["local_port"]), 30)
        held.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n")  # not finished
        with Client(daemon.socket, timeout=60) as c:
            wait_until(
                lambda: any(e["action"] == "connected" for e in journal(c, sid)),
                timeout=30,
                what="the connection in the daemon",
            )
        daemon.stop(signal.SIGTERM)  # the task runs on (keep_tasks)
        held.settimeout(30)
        assert held.recv(1) == b""  # the open connection was cut, not left half-open
        held.close()
        daemon = start_daemon(base, keep_tasks=True)
        with urllib.request.urlopen(url, timeout=30) as r:
            assert r.read() == b"still here\n"
        with Client(daemon.socket, timeout=60) as c:
            ends = [e["how"] for e in journal(c, sid) if e["action"] == "closed"]
            assert ends[0] == "the daemon stopped", ends
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 128 + signal.SIGTERM, proc.stderr.read()
    finally:
        subprocess.run(
            [sys.executable, "-m", "agentd", "stop", "--tasks", "--socket", daemon.socket]
            + ["--state-dir", daemon.state_dir],
            capture_output=True,
            timeout=60,
        )
        daemon.stop(signal.SIGKILL)


@OVER
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_agentctl_ending_with_a_connection_open_leaves_nothing_in_the_daemon(
    tls: Tls, workspace: Path, sig: int, over: str
) -> None:
    """Ctrl-C cancels the open streams; a kill -9 (or a dropped link) closes agentctl's
    HTTP/2 connection, and the daemon ends each stream on it: either way the sandbox's
    server sees its connection close and the daemon keeps no socket of it."""
    (workspace / "server.py").write_text(SERVER)
    port = free_port()
    with Client(tls.daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        background(c, sid, f"exec python3 server.py {port}")
        wait_until(lambda: listening(tls, sid, port), timeout=60, what="the task's server")
        fw = forward(tls, sid, f"0:{port}", over)
        sock = socket.create_connection(("127.0.0.1", fw.local_port), 30)
        sock.sendall(b"\0" * 8)
        wait_until(
            lambda: any(e["action"] == "connected" for e in journal(c, sid)),
            timeout=30,
            what="the connection in the daemon",
        )
        mine = daemons_sockets(tls.daemon, sid, port)
        assert len(still_open(tls.daemon, mine)) == 1  # the check sees the open connection
        fw.proc.send_signal(sig)
        fw.proc.wait(30)
        sock.settimeout(30)
        assert sock.recv(1) == b""  # the laptop's side is closed, not left hanging
        sock.close()
        closed = wait_until(
            lambda: [e for e in journal(c, sid) if e["action"] == "closed"],
            timeout=30,
            what="the connection's end in the journal",
        )
        assert closed[0]["how"] == "cancelled by the client", closed
        wait_until(
            lambda: not (still_open(tls.daemon, mine) or held(tls.daemon, sid, port)),
            timeout=30,
            what="the connection closed at both ends",
        )
        c.close_session(sid)


@OVER
def test_the_laptops_client_closing_ends_the_connection_in_the_sandbox(
    tls: Tls, workspace: Path, over: str
) -> None:
    """The laptop's side closes mid-exchange: the server reads EOF, and the daemon's
    socket closes once both ends are done; the forward goes on serving."""
    (workspace / "server.py").write_text(SERVER)
    port = free_port()
    with Client(tls.daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        background(c, sid, f"exec python3 server.py {port}")
        wait_until(lambda: listening(tls, sid, port), timeout=60, what="the task's server")
        fw = forward(tls, sid, f"0:{port}", over)
        try:
            sock = socket.create_connection(("127.0.0.1", fw.local_port), 30)
            sock.sendall(b"\0" * 8)
            wait_until(
                lambda: any(e["action"] == "connected" for e in journal(c, sid)),
                timeout=30,
                what="the connection in the daemon",
            )
            mine = daemons_sockets(tls.daemon, sid, port)
            assert len(still_open(tls.daemon, mine)) == 1
            sock.close()
            wait_until(
                lambda: not (still_open(tls.daemon, mine) or held(tls.daemon, sid, port)),
                timeout=30,
                what="the connection closed at both ends",
            )
            closed = wait_until(  # the journal takes connection events in batches
                lambda: [e for e in journal(c, sid) if e["action"] == "closed"],
                timeout=30,
                what="the connection's end in the journal",
            )
            assert [(e["how"], e["bytes_in"]) for e in closed] == [("closed", "8")], closed
            again = socket.create_connection(("127.0.0.1", fw.local_port), 30)
            assert exchange(again, 1 << 20, seed=5).received_ok
        finally:
            fw.stop()
        c.close_session(sid)
