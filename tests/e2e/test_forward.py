"""`agentctl forward` and `agentctl ports`: a server a background task runs in a session's
sandbox, reached from the "laptop" side by real HTTP clients over TLS + token; 50
connections at once byte-exact both ways; and how each end leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentd.network import netns
from agentd_client import Client
from tests.e2e import test_killed_caller
from tests.e2e.test_killed_caller import Sshd
from tests.support import ctl
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.forward_traffic import SERVER, exchange
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

TOKEN = "forward-token-for-tests"
# A real sshd on loopback, as test_killed_caller.py starts it (a module fixture).
sshd = test_killed_caller.sshd
# Bytes each way per connection here; bench/port_forward.py moves the full 100 MB.
SIZE = 4 * 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Tls:
    daemon: DaemonProcess
    base: Path
    address: str
    ca: str
    token_file: str

    def args(self) -> list[str]:
        return ["--address", self.address, "--ca", self.ca, "--token-file", self.token_file]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tls]:
    """A daemon with its TLS listener (a token on every call), as a laptop reaches it."""
    base = tmp_path_factory.mktemp("fwd")
    key, cert = base / "key.pem", base / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    address = f"127.0.0.1:{_free_port()}"
    config = base / "agentd.toml"
    config.write_text(
        f'tcp_listen = "{address}"\ntls_cert = "{cert}"\ntls_key = "{key}"\ntoken = "{TOKEN}"\n'
    )
    token_file = base / "token"
    token_file.write_text(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    proc = start_daemon(base / "d", ["--config", str(config)])
    yield Tls(proc, base, address, str(cert), str(token_file))
    assert proc.stop() == 0, proc.log
    assert "Traceback" not in proc.log, proc.log


def background(c: Client, sid: str, command: str) -> str:
    r = c.run_tool(sid, "Bash", {"command": command, "run_in_background": True})
    assert not r.is_error, r.text
    return str(r.data["backgroundTaskId"])


def listening(tls: Tls, session: str, port: int) -> bool:
    out = ctl.run("ports", session, "--json", *tls.args())
    return out.returncode == 0 and any(p["port"] == port for p in json.loads(out.stdout))


@dataclass
class Forward:
    proc: subprocess.Popen[str]
    info: dict[str, object]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.info['local_port']}"

    @property
    def local_port(self) -> int:
        return int(str(self.info["local_port"]))

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, str]:
        self.proc.send_signal(sig)
        code = self.proc.wait(30)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()


def forward(tls: Tls, session: str, spec: str) -> Forward:
    proc = ctl.popen("forward", session, spec, "--json", *tls.args())
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()  # its first line once it listens; EOF if it failed
    assert line, proc.stderr.read()
    return Forward(proc, json.loads(line))


def _rows(daemon: DaemonProcess, sid: str) -> list[list[str]]:
    """The TCP table of the session's namespace (read by a thread that joins it)."""
    path = os.path.join(daemon.state_dir, "netns", sid)

    def read() -> list[list[str]]:
        netns.join(path)
        rows: list[list[str]] = []
        for name in ("tcp", "tcp6"):
            with open(f"/proc/thread-self/net/{name}") as f:
                rows += [line.split() for line in f.read().splitlines()[1:]]
        return rows

    return netns.in_thread(read)


def _port(address: str) -> int:
    return int(address.rpartition(":")[2], 16)


def daemons_sockets(daemon: DaemonProcess, sid: str, port: int) -> set[str]:
    """The daemon's connections to the server on `port` in the session's namespace, as
    the `socket:[inode]` its fds link to."""
    return {f"socket:[{r[9]}]" for r in _rows(daemon, sid) if _port(r[2]) == port and r[9] != "0"}


def still_open(daemon: DaemonProcess, sockets: set[str]) -> set[str]:
    """Those of `sockets` the daemon still has a descriptor of."""
    found = set()
    for fd in os.listdir(f"/proc/{daemon.proc.pid}/fd"):
        try:
            link = os.readlink(f"/proc/{daemon.proc.pid}/fd/{fd}")
        except OSError:
            continue
        if link in sockets:
            found.add(link)
    return found


# TCP states of a connection still open at some end: ESTABLISHED, SYN_SENT, SYN_RECV,
# FIN_WAIT1, CLOSE_WAIT (the peer closed, this end did not), LAST_ACK, CLOSING.
HELD = {"01", "02", "03", "04", "08", "09", "0B"}


def held(daemon: DaemonProcess, sid: str, port: int) -> list[list[str]]:
    """Connections to or from `port` in the session's namespace not yet closed."""
    return [r for r in _rows(daemon, sid) if port in (_port(r[1]), _port(r[2])) and r[3] in HELD]


def journal(c: Client, sid: str) -> list[dict[str, object]]:
    from google.protobuf.json_format import MessageToDict

    return [
        MessageToDict(e.port_forward, preserving_proto_field_name=True)
        for e in c.attach(sid, 0, follow=False)
        if e.HasField("port_forward")
    ]


@pytest.fixture
def web(tls: Tls, workspace: Path) -> Iterator[tuple[Client, str, int]]:
    """A session named for the test whose background task serves `workspace` over HTTP."""
    (workspace / "hello.txt").write_text("hello from the sandbox\n")
    port = _free_port()
    with Client(tls.daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        background(c, sid, f"exec python3 -m http.server {port} --bind 127.0.0.1")
        wait_until(lambda: listening(tls, sid, port), timeout=60, what="the task's server")
        yield c, sid, port
        c.close_session(sid)


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
    port = _free_port()
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
        closed = [e for e in journal(c, sid) if e["action"] == "closed"]
        assert len(closed) == 50
        assert all(int(str(e["bytes_in"])) == SIZE + 16 for e in closed), closed[:2]
        c.close_session(sid)


def test_nothing_listening_is_refused_in_one_line(tls: Tls, web: tuple[Client, str, int]) -> None:
    _, sid, port = web
    free = _free_port()
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


def test_the_server_ending_closes_the_laptops_connection_and_leaves_nothing(
    tls: Tls, workspace: Path
) -> None:
    """A connection open while its server's task is stopped: the laptop's side reads EOF,
    the daemon's socket goes, and the forward goes on serving (refusing in one line)."""
    (workspace / "server.py").write_text(SERVER)
    port = _free_port()
    with Client(tls.daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        task = background(c, sid, f"exec python3 server.py {port}")
        wait_until(lambda: listening(tls, sid, port), timeout=60, what="the task's server")
        fw = forward(tls, sid, f"0:{port}")
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
        closed = [e for e in journal(c, sid) if e["action"] == "closed"]
        assert len(closed) == 1, closed
        c.close_session(sid)


def test_a_daemon_restart_cuts_open_connections_and_the_forward_goes_on(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / "hello.txt").write_text("still here\n")
    port = _free_port()
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


def test_a_server_on_ipv6_loopback_only_is_listed_and_reached(tls: Tls, workspace: Path) -> None:
    (workspace / "hello.txt").write_text("over ::1\n")
    port = _free_port()
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


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_agentctl_ending_with_a_connection_open_leaves_nothing_in_the_daemon(
    tls: Tls, workspace: Path, sig: int
) -> None:
    """Ctrl-C cancels the open streams; a kill -9 (or a dropped link) closes agentctl's
    HTTP/2 connection, and the daemon ends each stream on it: either way the sandbox's
    server sees its connection close and the daemon keeps no socket of it."""
    (workspace / "server.py").write_text(SERVER)
    port = _free_port()
    with Client(tls.daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        background(c, sid, f"exec python3 server.py {port}")
        wait_until(lambda: listening(tls, sid, port), timeout=60, what="the task's server")
        fw = forward(tls, sid, f"0:{port}")
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
    assert "⇄ connection to 127.0.0.1:" in shown and "ended: closed (" in shown, shown
    assert "stopped by " in shown, shown


def test_the_laptops_client_closing_ends_the_connection_in_the_sandbox(
    tls: Tls, workspace: Path
) -> None:
    """The laptop's side closes mid-exchange: the server reads EOF, and the daemon's
    socket closes once both ends are done; the forward goes on serving."""
    (workspace / "server.py").write_text(SERVER)
    port = _free_port()
    with Client(tls.daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        background(c, sid, f"exec python3 server.py {port}")
        wait_until(lambda: listening(tls, sid, port), timeout=60, what="the task's server")
        fw = forward(tls, sid, f"0:{port}")
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
            closed = [e for e in journal(c, sid) if e["action"] == "closed"]
            assert [(e["how"], e["bytes_in"]) for e in closed] == [("closed", "8")], closed
            again = socket.create_connection(("127.0.0.1", fw.local_port), 30)
            assert exchange(again, 1 << 20, seed=5).received_ok
        finally:
            fw.stop()
        c.close_session(sid)
