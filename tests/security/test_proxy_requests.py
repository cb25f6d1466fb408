"""Every forward request decided: a kept-alive connection to the HTTP proxy carries
requests the proxy parses and decides one by one, each by its own host, never bytes
relayed unread behind the first request's decision. Each attack runs inside the
sandbox (behind the guard), through the real daemon, against an origin on the host's
loopback that keeps connections alive and records every byte it is sent."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import h11
import pytest

from agentd_client import Client
from tests.network import support
from tests.network.support import ALLOWED, UNLISTED
from tests.sandbox._sandbox_attack import bash, guarded, guarded_py
from tests.support.daemon import DaemonProcess

pytestmark = pytest.mark.timeout(180)

proxied_daemon = support.proxied_daemon
net_workspace = support.net_workspace


@dataclass
class KeepAliveOrigin:
    """Answers every request on a connection (HTTP/1.1 keep-alive, 100-continue),
    recording the raw bytes and each request's Host, method and body length."""

    port: int
    raw: bytearray = field(default_factory=bytearray)
    requests: list[tuple[str, str, int]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def serve(self, conn: socket.socket) -> None:
        parser = h11.Connection(h11.SERVER)
        with conn:
            while True:
                event = parser.next_event()
                if event is h11.NEED_DATA:
                    if parser.they_are_waiting_for_100_continue:
                        conn.sendall(
                            parser.send(h11.InformationalResponse(status_code=100, headers=[]))
                        )
                    data = conn.recv(65536)
                    self.raw.extend(data)
                    parser.receive_data(data)
                    continue
                if not isinstance(event, h11.Request):
                    return
                heads = {k.decode().lower(): v.decode() for k, v in event.headers}
                size = 0
                while True:
                    part = parser.next_event()
                    if part is h11.NEED_DATA:
                        if parser.they_are_waiting_for_100_continue:
                            conn.sendall(
                                parser.send(h11.InformationalResponse(status_code=100, headers=[]))
                            )
                        data = conn.recv(65536)
                        self.raw.extend(data)
                        parser.receive_data(data)
                    elif isinstance(part, h11.Data):
                        size += len(part.data)
                    else:
                        break
                host = heads.get("host", "")
                self.requests.append((host, event.method.decode(), size))
                self.headers.append(heads)
                body = f"ORIGIN-REACHED {host} {event.method.decode()} {size}\n".encode()
                length = [(b"Content-Length", str(len(body)).encode())]
                conn.sendall(parser.send(h11.Response(status_code=200, headers=length)))
                conn.sendall(parser.send(h11.Data(data=body)) + parser.send(h11.EndOfMessage()))
                if parser.our_state is not h11.DONE or parser.their_state is not h11.DONE:
                    return
                parser.start_next_cycle()


@pytest.fixture(scope="module")
def origin() -> Iterator[KeepAliveOrigin]:
    server = socket.create_server(("127.0.0.1", 0))
    box = KeepAliveOrigin(server.getsockname()[1])

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=box.serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield box
    server.close()


@pytest.fixture
def net_client(proxied_daemon: DaemonProcess) -> Iterator[Client]:
    with Client(proxied_daemon.socket, timeout=120) as c:
        yield c


@pytest.fixture
def net_session(net_client: Client, net_workspace) -> str:
    return net_client.create_session(str(net_workspace), permission_mode="bypassPermissions").id


# Runs inside the sandbox: sends raw bytes to the proxy, in one write or one request
# per answer, and prints everything that came back.
RAW = r"""
import socket, sys
mode, parts = sys.argv[1], [p.encode().decode("unicode_escape").encode("latin-1")
                            for p in sys.argv[2:]]
s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
out = b""
def answer():
    global out
    got = b""
    while b"\r\n\r\n" not in got:
        d = s.recv(65536)
        if not d:
            break
        got += d
    head, _, rest = got.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    while len(rest) < length:
        d = s.recv(65536)
        if not d:
            break
        rest += d
    out += got[: len(head) + 4] + rest
if mode == "together":
    s.sendall(b"".join(parts))
    s.shutdown(socket.SHUT_WR)
    while (d := s.recv(65536)):
        out += d
else:
    for p in parts:
        try:
            s.sendall(p)
        except OSError as e:
            out += f"[send failed: {e}]".encode()
            break
        answer()
print(out.decode(errors="replace"))
"""


def raw(client: Client, sid: str, mode: str, *requests: str) -> str:
    return bash(client, sid, guarded_py(RAW, mode, *requests)).text


def get(host: str, port: int, extra: str = "") -> str:
    return f"GET http://{host}:{port}/ HTTP/1.1\\r\\nHost: {host}:{port}\\r\\n{extra}\\r\\n"


def seen_hosts(origin: KeepAliveOrigin) -> set[str]:
    return {host.split(":")[0] for host, _, _ in origin.requests}


def test_pipelined_requests_are_each_decided(net_client, net_session, origin):
    """Two requests for the allowed host and one for an unlisted host, in one write:
    the allowed ones are answered in order, the unlisted one is refused, and the
    origin never reads it (before: relayed unread on the allowed host's connection)."""
    start = len(origin.requests)
    p = origin.port
    out = raw(
        net_client, net_session, "together", get(ALLOWED, p), get(ALLOWED, p), get(UNLISTED, p)
    )
    assert out.count(f"ORIGIN-REACHED {ALLOWED}:{p} GET") == 2, out
    assert "403 Forbidden" in out and f"X-Agentd-Refused: {UNLISTED}:{p}" in out, out
    assert UNLISTED not in seen_hosts(origin) and UNLISTED.encode() not in origin.raw
    assert len(origin.requests) - start == 2


def test_a_later_request_for_another_host_is_decided_by_its_own(net_client, net_session, origin):
    """A kept-alive connection, one request per answer: the second names an unlisted
    host (fronting on a shared front end) with a Proxy-Authorization header."""
    p = origin.port
    out = raw(
        net_client,
        net_session,
        "one-by-one",
        get(ALLOWED, p, "Proxy-Authorization: Basic c2VjcmV0\\r\\n"),
        get(UNLISTED, p, "Proxy-Authorization: Basic c2VjcmV0\\r\\n"),
    )
    assert f"ORIGIN-REACHED {ALLOWED}:{p} GET" in out, out
    assert f"X-Agentd-Refused: {UNLISTED}:{p}" in out, out
    assert UNLISTED.encode() not in origin.raw
    assert b"c2VjcmV0" not in origin.raw  # meant for the proxy: never passed on


def test_curl_reusing_its_proxy_connection_is_decided_per_request(net_client, net_session, origin):
    """A real client: curl fetching two URLs reuses its connection to the proxy."""
    p = origin.port
    out = bash(
        net_client,
        net_session,
        guarded(
            "curl", "-sS", "--max-time", "60", f"http://{ALLOWED}:{p}/a", f"http://{UNLISTED}:{p}/b"
        ),
    ).text
    assert f"ORIGIN-REACHED {ALLOWED}:{p} GET" in out, out
    assert f"agentd refused the connection to {UNLISTED}:{p}" in out, out
    assert UNLISTED.encode() not in origin.raw


@pytest.mark.parametrize(
    "framing",
    [
        "Content-Length: 49\\r\\nTransfer-Encoding: chunked",
        "Transfer-Encoding: chunked\\r\\nContent-Length: 49",
        "Content-Length: 49\\r\\nTransfer-Encoding : chunked",
        "Content-Length: 49\\r\\nTransfer-Encoding: xchunked",
        "Content-Length: 49\\r\\nContent-Length: 0",
    ],
)
def test_a_request_smuggled_through_conflicting_framing_is_refused(
    net_client, net_session, origin, framing
):
    """A body framed one way by the proxy and another by the origin hides a request
    for an unlisted host: refused, and the origin never reads the hidden request."""
    p = origin.port
    hidden = f"GET http://{UNLISTED}:{p}/ HTTP/1.1\\r\\nHost: {UNLISTED}:{p}\\r\\n\\r\\n"
    smuggler = (
        f"POST http://{ALLOWED}:{p}/ HTTP/1.1\\r\\nHost: {ALLOWED}:{p}\\r\\n{framing}\\r\\n"
        f"\\r\\n0\\r\\n\\r\\n{hidden}"
    )
    out = raw(net_client, net_session, "together", smuggler)
    assert "400 Bad Request" in out or "501" in out, out
    assert UNLISTED.encode() not in origin.raw


def test_chunked_bodies_and_expect_100_continue_pass(net_client, net_session, origin):
    """A real client's chunked upload and its wait for 100 Continue both reach the
    origin whole."""
    p = origin.port
    script = (
        "head -c 300000 /dev/zero > /tmp/body && "
        f"curl -sS --max-time 60 -H 'Transfer-Encoding: chunked' --data-binary @/tmp/body "
        f"http://{ALLOWED}:{p}/chunked && "
        f"curl -sS --max-time 60 -H 'Expect: 100-continue' --data-binary @/tmp/body "
        f"http://{ALLOWED}:{p}/expect"
    )
    out = bash(net_client, net_session, guarded("sh", "-c", script)).text
    assert out.count(f"ORIGIN-REACHED {ALLOWED}:{p} POST 300000") == 2, out
    expects = [h for h in origin.headers if h.get("expect")]
    assert expects and expects[-1]["expect"] == "100-continue"
    assert any(h.get("transfer-encoding") == "chunked" for h in origin.headers)
