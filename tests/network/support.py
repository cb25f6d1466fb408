"""A daemon whose sessions are proxied, loopback origins the tests start, and the probe
a sandboxed command speaks to its session's proxy with (raw HTTP and SOCKS5).

Test host names resolve through the daemon's `network_resolve` map, never /etc/hosts.
"""

from __future__ import annotations

import http.server
import shutil
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.sandbox.conftest import sandbox_dir
from tests.support.daemon import DaemonProcess, start_daemon

# Names the proxy resolves (to loopback or the metadata address) for the tests.
ALLOWED = "allowed.test"  # allowed and listed as a private host: reachable
LOOPBACK_LISTED = "evil-loop.test"  # allowed by name, resolves to 127.0.0.1: refused
METADATA_LISTED = "meta.test"  # allowed by name, resolves to 169.254.169.254: refused
UNLISTED = "unlisted.test"  # resolves to 127.0.0.1, allowed by nothing
ASKED = "asked.test"  # allowed by nothing, private-listed: reachable once a person says so
OTHER_ONLY = "other-only.test"  # allowed by one session's own rule only
# Real clients' servers (a package index, a registry, git over http and ssh): allowed.
PYPI, NPM, GIT = "pypi.test", "npm.test", "git.test"


class _Origin(http.server.BaseHTTPRequestHandler):
    seen: list[str]

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.seen.append(self.headers.get("Host", ""))
        body = f"ORIGIN-REACHED {self.headers.get('Host')}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@dataclass
class Origin:
    """An HTTP server on the host's loopback, recording the Host of every request."""

    port: int
    seen: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def origin() -> Iterator[Origin]:
    seen: list[str] = []
    handler = type("Handler", (_Origin,), {"seen": seen})
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield Origin(server.server_address[1], seen)
    server.shutdown()
    server.server_close()


def proxied_config(path: Path, extra: str = "") -> None:
    names = [ALLOWED, LOOPBACK_LISTED, UNLISTED, ASKED, OTHER_ONLY, PYPI, NPM, GIT]
    resolve = ", ".join(f'"{n}" = ["127.0.0.1"]' for n in names)
    allowed = ", ".join(
        f'"{n}"' for n in (ALLOWED, LOOPBACK_LISTED, METADATA_LISTED, PYPI, NPM, GIT)
    )
    private = ", ".join(f'"{n}"' for n in (ALLOWED, ASKED, OTHER_ONLY, PYPI, NPM, GIT))
    path.write_text(
        f"network_allowed_domains = [{allowed}]\n"
        f"network_allow_private_hosts = [{private}]\n"
        f'network_resolve = {{ {resolve}, "{METADATA_LISTED}" = ["169.254.169.254"] }}\n' + extra
    )


@pytest.fixture(scope="module")
def proxied_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    base = tmp_path_factory.mktemp("agentd-net")
    proxied_config(base / "config.toml")
    proc = start_daemon(base / "d", ["--config", str(base / "config.toml")])
    yield proc
    code = proc.stop()
    assert code == 0, proc.log
    assert "Traceback" not in proc.log, proc.log


@pytest.fixture
def net_workspace() -> Iterator[Path]:
    root = Path(sandbox_dir("agentd-net-ws-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


# Runs inside the sandbox (behind the guard): speaks to the session's proxy directly.
PROBE = r"""
import socket, struct, sys
HTTP, SOCKS = 3128, 1080
def read_all(s):
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except OSError as e:
            return data + f"[recv failed: {e}]".encode()
        if not chunk:
            return data
        data += chunk
def connect(host, port, via=HTTP):
    s = socket.create_connection(("127.0.0.1", via), timeout=30)
    s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = s.recv(65536)
    if b" 200 " in head.split(b"\r\n")[0]:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        head += read_all(s)
    else:
        head += read_all(s)
    return head.decode(errors="replace")
def forward(url, host_header):
    s = socket.create_connection(("127.0.0.1", HTTP), timeout=30)
    s.sendall(f"GET {url} HTTP/1.1\r\nHost: {host_header}\r\nConnection: close\r\n\r\n".encode())
    return read_all(s).decode(errors="replace")
def socks(kind, addr, port):
    s = socket.create_connection(("127.0.0.1", SOCKS), timeout=30)
    s.sendall(b"\x05\x01\x00")
    assert s.recv(2) == b"\x05\x00"
    if kind == "domain":
        a = b"\x03" + bytes([len(addr)]) + addr.encode()
    elif kind == "v4":
        a = b"\x01" + socket.inet_aton(addr)
    else:
        a = b"\x04" + socket.inet_pton(socket.AF_INET6, addr)
    s.sendall(b"\x05\x01\x00" + a + struct.pack("!H", int(port)))
    reply = s.recv(10)
    out = f"SOCKS-REPLY {reply[1]}\n"
    if reply[1] == 0:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        out += read_all(s).decode(errors="replace")
    return out
what, args = sys.argv[1], sys.argv[2:]
print({"connect": connect, "forward": forward, "socks": socks}[what](*args))
"""
