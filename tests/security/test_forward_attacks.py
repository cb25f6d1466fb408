"""Attacks on the Forward RPC through the real daemon: crafted requests that name another
host, another session or none, a session's forward into another's namespace or the
dev box's own loopback, and a client that never reads what it is sent.

The request carries a session id, a port and at most a loopback address: each attack
is a hand-built request on the daemon's own socket, not agentctl (which never sends
one), and each is checked against a positive control that the same request shape works.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agentd_client import Client
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.forward_traffic import FLOODS
from tests.support.waiting import task_finished, wait_for_event, wait_until

pytestmark = pytest.mark.timeout(240)

FAILED = grpc.StatusCode.FAILED_PRECONDITION


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Opened:
    """One Forward call: `messages` sent, then the stream held open until close()."""

    def __init__(self, c: Client, *messages: pb.ForwardRequest) -> None:
        self.done = threading.Event()

        def requests() -> Iterator[pb.ForwardRequest]:
            yield from messages
            self.done.wait(120)

        self.call = c.stub.Forward(requests(), timeout=60)

    def first(self) -> pb.ForwardResponse:
        return next(self.call)

    def close(self) -> None:
        self.done.set()
        self.call.cancel()


def opens(opening: pb.ForwardOpen) -> pb.ForwardRequest:
    return pb.ForwardRequest(open=opening)


def refused(c: Client, *messages: pb.ForwardRequest) -> tuple[grpc.StatusCode, str]:
    opened = Opened(c, *messages)
    try:
        reply = opened.first()
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""
    finally:
        opened.close()
    raise AssertionError(f"not refused: {messages} answered {reply}")


def reached(c: Client, sid: str, port: int, host: str = "") -> bytes:
    """What an HTTP GET / through a Forward stream answers first (a positive control)."""
    opening = pb.ForwardOpen(session_id=sid, port=port, host=host)
    opened = Opened(c, opens(opening), pb.ForwardRequest(data=b"GET / HTTP/1.0\r\n\r\n"))
    try:
        assert opened.first().WhichOneof("kind") == "opened"
        return next(opened.call).data
    finally:
        opened.close()


def background(c: Client, sid: str, command: str) -> str:
    r = c.run_tool(sid, "Bash", {"command": command, "run_in_background": True})
    assert not r.is_error, r.text
    return str(r.data["backgroundTaskId"])


def listening(c: Client, sid: str, port: int) -> bool:
    try:
        reply = c.stub.ListPorts(pb.ListPortsRequest(session_id=sid), timeout=30)
    except grpc.RpcError:
        return False
    return any(p.port == port for p in reply.ports)


@pytest.fixture
def two(client: Client, workspace: Path) -> Iterator[tuple[str, str, int]]:
    """Sessions `a` and `b` of the shared daemon; b's task serves HTTP on a port a has
    nothing on (both have run a command: each has its namespace)."""
    port = _free_port()
    a = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    b = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    assert not client.run_tool(a, "Bash", {"command": "true"}).is_error
    background(client, b, f"exec python3 -m http.server {port} --bind 127.0.0.1")
    wait_until(lambda: listening(client, b, port), timeout=60, what="b's server")
    yield a, b, port
    for sid in (a, b):
        client.close_session(sid)


def test_a_session_never_reaches_anothers_namespace(
    client: Client, two: tuple[str, str, int]
) -> None:
    a, b, port = two
    assert reached(client, b, port).startswith(b"HTTP/1.0 200")  # the control
    code, why = refused(client, opens(pb.ForwardOpen(session_id=a, port=port)))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "nothing listens" in why, why
    for host in ("127.0.0.1", "::1"):
        code, why = refused(client, opens(pb.ForwardOpen(session_id=a, port=port, host=host)))
        assert code == grpc.StatusCode.FAILED_PRECONDITION, (host, why)
    assert not listening(client, a, port)
    code, why = client_start(client, a, port)
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "nothing listens" in why


def client_start(c: Client, sid: str, port: int) -> tuple[grpc.StatusCode, str]:
    try:
        c.stub.StartForward(pb.StartForwardRequest(session_id=sid, port=port), timeout=30)
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""
    raise AssertionError("StartForward was not refused")


def test_the_dev_boxs_own_loopback_is_never_reached(
    client: Client, two: tuple[str, str, int]
) -> None:
    """A server on the host's 127.0.0.1 (where the daemon itself runs) is not the
    sandbox's: a forward to its port finds nothing."""
    a, _, _ = two
    host_server = socket.create_server(("127.0.0.1", 0))
    try:
        port = host_server.getsockname()[1]
        code, why = refused(client, opens(pb.ForwardOpen(session_id=a, port=port)))
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "nothing listens" in why, why
        host_server.settimeout(0)
        with pytest.raises(BlockingIOError):
            host_server.accept()  # and no connection ever arrived here
    finally:
        host_server.close()


def _host_address() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet is sent: the route's source address
        return str(s.getsockname()[0])


@pytest.mark.parametrize(
    "host",
    [
        "10.0.0.1",
        "127.0.0.2",
        "0.0.0.0",
        "localhost",
        "::ffff:127.0.0.1",
        "[::1]",
        "127.0.0.1:80",
        "169.254.169.254",
        "example.com",
        "HOST-ADDRESS",
    ],
)
def test_a_crafted_request_naming_another_host_is_refused(
    client: Client, two: tuple[str, str, int], host: str
) -> None:
    _, b, port = two
    if host == "HOST-ADDRESS":
        host = _host_address()
    code, why = refused(client, opens(pb.ForwardOpen(session_id=b, port=port, host=host)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, (host, code, why)
    assert "only the sandbox's own loopback" in why, why
    assert reached(client, b, port, "127.0.0.1").startswith(b"HTTP/1.0 200")


def test_crafted_sessions_ports_and_messages_are_refused(
    client: Client, two: tuple[str, str, int], workspace: Path
) -> None:
    _, b, port = two
    closed = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    assert not client.run_tool(closed, "Bash", {"command": "true"}).is_error
    client.close_session(closed)
    data = pb.ForwardRequest(data=b"GET / HTTP/1.0\r\n\r\n")
    cases = [
        ([opens(pb.ForwardOpen(session_id="0" * 32, port=port))], grpc.StatusCode.NOT_FOUND),
        ([opens(pb.ForwardOpen(session_id="../" + b, port=port))], grpc.StatusCode.NOT_FOUND),
        ([opens(pb.ForwardOpen(port=port))], grpc.StatusCode.INVALID_ARGUMENT),
        ([opens(pb.ForwardOpen(session_id=closed, port=port))], FAILED),
        ([opens(pb.ForwardOpen(session_id=b, port=0))], grpc.StatusCode.INVALID_ARGUMENT),
        ([opens(pb.ForwardOpen(session_id=b, port=65536))], grpc.StatusCode.INVALID_ARGUMENT),
        # agentd's own proxy in the namespace: not the session's server
        ([opens(pb.ForwardOpen(session_id=b, port=3128))], FAILED),
        ([data], grpc.StatusCode.INVALID_ARGUMENT),  # data before open
    ]
    for messages, want in cases:
        code, why = refused(client, *messages)
        assert code == want, (messages, code, why)
        assert "Traceback" not in why and "\n" not in why, why
    # A second `open` on a stream already connected ends it.
    again = opens(pb.ForwardOpen(session_id=b, port=port))
    opened = Opened(client, again, again)
    try:
        assert opened.first().WhichOneof("kind") == "opened"
        with pytest.raises(grpc.RpcError) as err:
            next(opened.call)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        opened.close()
    assert client.status().pid  # the daemon is still there


@pytest.fixture
def flood_daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(tmp_path / "d")
    yield proc
    assert proc.stop() == 0, proc.log


FLOOD = r"""
import socket, sys
server = socket.create_server(("127.0.0.1", int(sys.argv[1])))
print("listening", flush=True)
conn, _ = server.accept()
conn.settimeout(5)  # stuck this long: nobody takes more
chunk, sent = b"x" * (1 << 20), 0
try:
    while sent < (1 << 30):
        sent += conn.send(chunk)
except (TimeoutError, socket.timeout):
    pass
open("flooded.txt", "w").write(str(sent))
"""


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_client_that_never_reads_keeps_the_daemon_bounded(
    flood_daemon: DaemonProcess, workspace: Path
) -> None:
    """The sandbox's server offers 1 GiB to a Forward stream whose client reads nothing:
    the daemon stops reading once gRPC's window is full, so the server is stuck after a
    few MiB and the daemon's memory does not grow with what was offered."""
    (workspace / "flood.py").write_text(FLOOD)
    port = _free_port()
    with Client(flood_daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        task = background(c, sid, f"exec python3 flood.py {port}")
        wait_until(lambda: listening(c, sid, port), timeout=60, what="the flood server")
        before = rss_kb(flood_daemon.proc.pid)
        opened = Opened(c, opens(pb.ForwardOpen(session_id=sid, port=port)))
        try:
            wait_for_event(c, sid, task_finished(task), timeout=120)
            sent = int((workspace / "flooded.txt").read_text())
            grown_kb = rss_kb(flood_daemon.proc.pid) - before
        finally:
            opened.close()
        assert sent < 64 << 20, f"the server could write {sent} bytes nobody read"
        assert grown_kb < 64 * 1024, f"the daemon grew by {grown_kb} kB"
        assert os.path.exists(workspace / "flooded.txt")
        c.close_session(sid)


DEAF = r"""
import socket, sys
server = socket.create_server(("127.0.0.1", int(sys.argv[1])))
print("listening", flush=True)
conn, _ = server.accept()
sys.stdin.read()  # never reads the connection; ends when its stdin does
"""


def test_a_server_that_never_reads_stops_the_clients_stream_not_the_daemon(
    flood_daemon: DaemonProcess, workspace: Path
) -> None:
    """A client offers 1 GiB to a server in the sandbox that reads nothing: the daemon
    writes no faster than the socket takes, reads the stream no further, and gRPC's
    window stops the client; the daemon's memory does not grow with the offer."""
    (workspace / "deaf.py").write_text(DEAF)
    port = _free_port()
    with Client(flood_daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        background(c, sid, f"exec python3 deaf.py {port} < /dev/zero")
        wait_until(lambda: listening(c, sid, port), timeout=60, what="the deaf server")
        before = rss_kb(flood_daemon.proc.pid)
        taken = [0]
        chunk = b"y" * (1 << 20)

        def offer() -> Iterator[pb.ForwardRequest]:
            yield opens(pb.ForwardOpen(session_id=sid, port=port))
            while taken[0] < 1024:
                yield pb.ForwardRequest(data=chunk)
                taken[0] += 1

        call = c.stub.Forward(offer(), timeout=120)
        try:
            assert next(call).WhichOneof("kind") == "opened"
            last = [-1]

            def settled() -> bool:
                # Taken no further between two looks a second apart (or all of it was,
                # which fails below).
                now, same = taken[0], taken[0] == last[0]
                last[0] = now
                return now >= 1024 or (now > 0 and same)

            wait_until(settled, timeout=90, interval=1.0, what="the offer to stop being taken")
            grown_kb = rss_kb(flood_daemon.proc.pid) - before
        finally:
            call.cancel()
        assert taken[0] < 64, f"{taken[0]} MiB were taken by a server that reads nothing"
        assert grown_kb < 64 * 1024, f"the daemon grew by {grown_kb} kB"
        c.close_session(sid)


def test_a_thousand_streams_from_a_client_that_never_reads_stay_bounded(
    flood_daemon: DaemonProcess, workspace: Path
) -> None:
    """1,000 Forward streams from one client that reads nothing, each to a server that
    writes all it can: the session holds at most its cap (the rest are refused), the
    daemon's memory stays bounded while they are stuck and returns once they end, and
    another session still forwards meanwhile."""
    (workspace / "floods.py").write_text(FLOODS)
    port = _free_port()
    pid = flood_daemon.proc.pid
    with Client(flood_daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        other = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        background(c, sid, f"exec python3 floods.py {port}")
        background(c, other, f"exec python3 floods.py {port}")
        wait_until(lambda: listening(c, sid, port), timeout=60, what="the flood server")
        wait_until(lambda: listening(c, other, port), timeout=60, what="the other server")
        before = rss_kb(pid)
        streams = [Opened(c, opens(pb.ForwardOpen(session_id=sid, port=port))) for _ in range(1000)]
        try:
            opened = refused = 0
            for stream in streams:
                try:
                    assert stream.first().WhichOneof("kind") == "opened"
                    opened += 1
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc
                    refused += 1
            assert opened <= 64 and opened + refused == 1000, (opened, refused)
            stuck = workspace / "stuck.txt"
            wait_until(
                lambda: stuck.exists() and len(stuck.read_text().split()) >= opened,
                timeout=120,
                what="every opened stream's server to be stuck",
            )
            grown_kb = rss_kb(pid) - before
            # Another session's forward is not taken by this client's flood.
            elsewhere = Opened(c, opens(pb.ForwardOpen(session_id=other, port=port)))
            try:
                assert elsewhere.first().WhichOneof("kind") == "opened"
            finally:
                elsewhere.close()
        finally:
            for stream in streams:
                stream.close()
        assert grown_kb < 256 * 1024, f"the daemon grew by {grown_kb} kB"
        wait_until(
            lambda: rss_kb(pid) - before < 64 * 1024,
            timeout=60,
            what=lambda: f"the daemon's memory to return ({rss_kb(pid) - before} kB above)",
        )
        c.close_session(sid)
        c.close_session(other)
