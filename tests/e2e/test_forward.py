"""`agentctl forward` and `agentctl ports`: a server a background task runs in a session's
sandbox, reached from the "laptop" side by real HTTP clients over TLS + token and over
an ssh-forwarded socket; 50 connections at once byte-exact both ways; a server on ::1;
refusals in one line; what a person sees on a terminal. How each end leaves nothing
behind: test_forward_ends.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest

from agentd_client import Client
from tests.e2e import test_killed_caller
from tests.e2e.test_killed_caller import Sshd
from tests.support import ctl, forwarding
from tests.support.forward_traffic import SERVER, exchange
from tests.support.forwarding import (
    Tls,
    background,
    forward,
    free_port,
    held,
    journal,
    listening,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

# The module's fixtures (tests/support/forwarding.py).
tls = forwarding.tls
web = forwarding.web

# A real sshd on loopback, as test_killed_caller.py starts it (a module fixture).
sshd = test_killed_caller.sshd
# Bytes each way per connection here; bench/port_forward.py moves the full 100 MB.
SIZE = 4 * 1024 * 1024


def test_a_tasks_http_server_is_fetched_over_tls_with_curl_and_urllib(
    tls: Tls, web: tuple[Client, str, int]
) -> None:
    c, sid, port = web
    ports = json.loads(ctl.run("ports", sid, "--json", *tls.args()).stdout)
    mine = [p for p in ports if p["port"] == port]
    assert mine and mine[0]["forwardable"], ports
    assert any("python3" in x for x in mine[0]["processes"]), ports
    shown = ctl.run("ports", sid, *tls.args())
    assert any(str(port) in ln and "python3" in ln for ln in shown.stdout.splitlines()), shown
    fw = forward(tls, sid, f"0:{port}")
    try:
        with urllib.request.urlopen(f"{fw.url}/hello.txt", timeout=30) as r:
            assert r.read() == b"hello from the sandbox\n"
        out = subprocess.run(
            ["curl", "-sS", "--noproxy", "*", "--max-time", "30", f"{fw.url}/hello.txt"],
            capture_output=True,
            text=True,
        )
        assert out.stdout == "hello from the sandbox\n", out.stderr
    finally:
        code, err = fw.stop()
    assert code == 130, err
    assert err.strip() == "agentctl: interrupted", err
    # Nothing listens on the laptop side any more, and the daemon holds no socket of it.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", fw.local_port), 5).close()
    wait_until(lambda: not held(tls.daemon, sid, port), timeout=30, what="no connection held")
    events = journal(c, sid)
    actions = [e["action"] for e in events]
    assert actions[0] == "started" and actions[-1] == "stopped", events
    assert actions.count("connected") == 2 and actions.count("closed") == 2, events
    assert all("@" in str(e["by"]) for e in events if e["action"] != "closed"), events
    closed = [e for e in events if e["action"] == "closed"]
    assert all(int(str(e["bytes_out"])) > len("hello from the sandbox\n") for e in closed)


def test_fifty_connections_at_once_move_bytes_exactly_both_ways(tls: Tls, workspace: Path) -> None:
    (workspace / "server.py").write_text(SERVER)
    port = free_port()
    with Client(tls.daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        background(c, sid, f"exec python3 server.py {port}")
        wait_until(lambda: listening(tls, sid, port), timeout=60, what="the task's server")
        fw = forward(tls, sid, f"0:{port}")
        results: list[object] = [None] * 50

        def one(i: int) -> None:
            sock = socket.create_connection(("127.0.0.1", fw.local_port), 30)
            sock.settimeout(120)
            results[i] = exchange(sock, SIZE, seed=1000 + i)

        try:
            threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            fw.stop()
        bad = [(i, r) for i, r in enumerate(results) if not (r and r.sent_ok and r.received_ok)]  # type: ignore[attr-defined]
        assert not bad, bad[:3]
        closed = wait_until(  # the journal takes connection events in batches
            lambda: (
                [e for e in journal(c, sid) if e["action"] == "closed"][49:]
                and [e for e in journal(c, sid) if e["action"] == "closed"]
            ),
            timeout=30,
            what="50 connections' ends in the journal",
        )
        assert len(closed) == 50
        assert all(int(str(e["bytes_in"])) == SIZE + 16 for e in closed), closed[:2]
        c.close_session(sid)


def test_nothing_listening_is_refused_in_one_line(tls: Tls, web: tuple[Client, str, int]) -> None:
    _, sid, port = web
    free = free_port()
    out = ctl.run("forward", sid, str(free), *tls.args())
    assert out.returncode != 0
    line = ctl.one_line(out.stderr)
    assert f"nothing listens on port {free}" in line and "agentctl ports" in line, line


@pytest.mark.parametrize("mode", ["on", "off"])
def test_a_session_without_a_kept_namespace_is_refused(
    tls: Tls, workspace: Path, mode: str
) -> None:
    with Client(tls.daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions", network=mode).id
        for args in (["forward", sid, "8000"], ["ports", sid]):
            out = ctl.run(*args, *tls.args())
            assert out.returncode != 0, out
            line = ctl.one_line(out.stderr)
            assert f'network "{mode}"' in line, line
        c.close_session(sid)


def test_a_server_on_ipv6_loopback_only_is_listed_and_reached(tls: Tls, workspace: Path) -> None:
    (workspace / "hello.txt").write_text("over ::1\n")
    port = free_port()
    with Client(tls.daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        background(c, sid, f"exec python3 -m http.server {port} --bind ::1")
        wait_until(lambda: listening(tls, sid, port), timeout=60, what="the task's server")
        ports = json.loads(ctl.run("ports", sid, "--json", *tls.args()).stdout)
        assert {"address": "::1", "port": port} in [
            {"address": p["address"], "port": p["port"]} for p in ports
        ], ports
        fw = forward(tls, sid, f"0:{port}")
        try:
            assert fw.info["address"] == "::1"
            with urllib.request.urlopen(f"{fw.url}/hello.txt", timeout=30) as r:
                assert r.read() == b"over ::1\n"
        finally:
            fw.stop()
        c.close_session(sid)


def test_over_an_ssh_forwarded_unix_socket(
    tls: Tls, web: tuple[Client, str, int], sshd: Sshd, tmp_path: Path
) -> None:
    """The laptop reaches the daemon as the README's remote set-up does: `ssh -L` of its
    unix socket; the forward rides on that one connection."""
    _, sid, port = web
    local = tmp_path / "agentd.sock"
    tunnel = subprocess.Popen(
        [*sshd.ssh(), "-N", "-L", f"{local}:{tls.daemon.socket}"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(local.exists, timeout=30, what="ssh's forwarded socket")
        proc = ctl.popen("forward", sid, f"0:{port}", "--json", "--socket", str(local))
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        url = f"http://127.0.0.1:{json.loads(line)['local_port']}/hello.txt"
        out = subprocess.run(
            ["curl", "-sS", "--noproxy", "*", "--max-time", "30", url],
            capture_output=True,
            text=True,
        )
        assert out.stdout == "hello from the sandbox\n", out.stderr
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
    finally:
        tunnel.terminate()
        tunnel.wait(10)


def test_on_a_terminal_it_says_where_and_ctrl_c_stops_it(
    tls: Tls, web: tuple[Client, str, int]
) -> None:
    """What a person sees: one line naming both ends; ^C on the terminal (a real SIGINT)
    stops it with one line and the stop is journaled."""
    c, sid, port = web
    term = ctl.on_pty("forward", sid, f"0:{port}", *tls.args())
    try:
        seen = term.read_until(b"(Ctrl-C to stop)").decode()
        line = next(x for x in seen.splitlines() if "forwarding" in x)
        assert f"-> 127.0.0.1:{port} in session {sid}" in line, line
        local = int(line.split()[1].rpartition(":")[2])
        with urllib.request.urlopen(f"http://127.0.0.1:{local}/hello.txt", timeout=30) as r:
            assert r.read() == b"hello from the sandbox\n"
        os.write(term.master, b"\x03")
        assert term.proc.wait(30) == 130
        assert "agentctl: interrupted" in term.drain().decode()
    finally:
        term.close()
    assert [e["action"] for e in journal(c, sid)][-1] == "stopped"
    # What `agentctl attach` shows of it (a closed session's replay ends).
    c.close_session(sid)
    shown = ctl.run("attach", sid, *tls.args()).stdout
    assert f"⇄ port {port} forwarded to 127.0.0.1:0 by " in shown, shown
    assert "⇄ connection to 127.0.0.1:" in shown and " ended: " in shown, shown
    assert "stopped by " in shown, shown
