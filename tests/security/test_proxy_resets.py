"""An upstream that resets connections mid-answer, through the proxy's three ways out
(a forward request, a CONNECT tunnel, SOCKS5): every sandboxed client's connection ends
at once (no hang), the session's count of open connections returns to zero, and the
daemon holds no descriptor more than before. Run inside the sandbox behind the guard,
through the real daemon, against a server on the host's loopback."""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from agentd_client import Client
from tests.network import support
from tests.network.support import ALLOWED
from tests.sandbox._sandbox_attack import bash, guarded_py
from tests.support.daemon import DaemonProcess
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

proxied_daemon = support.proxied_daemon
net_workspace = support.net_workspace


@pytest.fixture(scope="module")
def resetting() -> Iterator[int]:
    """Reads a request, answers a head promising 1 MiB and 64 KiB of it, then resets."""
    server = socket.create_server(("127.0.0.1", 0), backlog=256)

    def one(conn: socket.socket) -> None:
        with conn:
            got = b""
            while b"\r\n\r\n" not in got:
                data = conn.recv(65536)
                if not data:
                    return
                got += data
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n" + b"x" * 65536)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


# Inside the sandbox: N clients of each way at once; each reads until its connection
# ends, and says how (EOF, an error, or a timeout: a hang).
CLIENTS = r"""
import socket, struct, sys, threading, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
results = []
def read_until_end(s):
    try:
        while s.recv(65536):
            pass
        return "ended"
    except socket.timeout:
        return "HANG"
    except OSError:
        return "ended"
def forward():
    s = socket.create_connection(("127.0.0.1", 3128), timeout=40)
    s.sendall(f"GET http://{host}:{port}/ HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    return read_until_end(s)
def tunnel():
    s = socket.create_connection(("127.0.0.1", 3128), timeout=40)
    s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    return read_until_end(s)
def socks():
    s = socket.create_connection(("127.0.0.1", 1080), timeout=40)
    s.sendall(b"\x05\x01\x00"); s.recv(2)
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host.encode() + struct.pack("!H", port))
    s.recv(10)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    return read_until_end(s)
def run(fn):
    try:
        results.append((fn.__name__, fn()))
    except OSError as e:
        results.append((fn.__name__, f"error {e}"))
ways = (forward, tunnel, socks)
threads = [threading.Thread(target=run, args=(fn,)) for fn in ways for _ in range(n)]
for t in threads: t.start()
for t in threads: t.join()
for name in ("forward", "tunnel", "socks"):
    outcomes = [r for k, r in results if k == name]
    other = [r for r in outcomes if r not in ("ended", "HANG")]
    print(name, "ended", outcomes.count("ended"), "hung", outcomes.count("HANG"), "other", other)
"""


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_resetting_upstreams_end_every_client_and_leak_nothing(
    proxied_daemon: DaemonProcess, net_workspace, resetting: int
) -> None:
    with Client(proxied_daemon.socket, timeout=240) as client:
        sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
        warm = bash(client, sid, guarded_py(CLIENTS, ALLOWED, str(resetting), "1")).text
        assert "forward ended 1" in warm, warm
        pid = proxied_daemon.proc.pid
        wait_until(
            lambda: client.get_session(sid).network_summary["open_connections"] == 0,
            60,
            "the warm-up's connections to end",
        )
        before = descriptors(pid)
        out = bash(client, sid, guarded_py(CLIENTS, ALLOWED, str(resetting), "20")).text
        for way in ("forward", "tunnel", "socks"):
            assert f"{way} ended 20 hung 0 other []" in out, out
        wait_until(
            lambda: client.get_session(sid).network_summary["open_connections"] == 0,
            60,
            lambda: f"open connections back to zero: {client.get_session(sid).network_summary}",
        )
        wait_until(
            lambda: descriptors(pid) <= before,
            60,
            lambda: f"the daemon's descriptors back to {before}: {descriptors(pid)}",
        )
    errors = [
        line
        for line in proxied_daemon.log_lines
        if " ERROR " in line or "Task was destroyed" in line
    ]
    assert not errors, errors
