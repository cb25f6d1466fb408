"""What the forward tests share: a daemon with its TLS listener (a token on every call),
agentctl forward run as a laptop runs it, and what the session's namespace holds
(its TCP table, the daemon's sockets to a server there) to tell a leak from a close."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict

from agentd.network import netns
from agentd_client import Client
from tests.support import ctl
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import wait_until

TOKEN = "forward-token-for-tests"


def free_port() -> int:
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
    address = f"127.0.0.1:{free_port()}"
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


def forward(tls: Tls, session: str, spec: str, over: str = "grpc") -> Forward:
    """agentctl forward over the daemon's TLS listener (its frames on a ForwardMux gRPC
    stream), or over its unix socket (`over="socket"`: on the terminal socket)."""
    where = ["--socket", tls.daemon.socket] if over == "socket" else tls.args()
    proc = ctl.popen("forward", session, spec, "--json", *where)
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
    return [
        MessageToDict(e.port_forward, preserving_proto_field_name=True)
        for e in c.attach(sid, 0, follow=False)
        if e.HasField("port_forward")
    ]


@pytest.fixture
def web(tls: Tls, workspace: Path) -> Iterator[tuple[Client, str, int]]:
    """A session named for the test whose background task serves `workspace` over HTTP."""
    (workspace / "hello.txt").write_text("hello from the sandbox\n")
    port = free_port()
    with Client(tls.daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        background(c, sid, f"exec python3 -m http.server {port} --bind 127.0.0.1")
        wait_until(lambda: listening(tls, sid, port), timeout=60, what="the task's server")
        yield c, sid, port
        c.close_session(sid)
