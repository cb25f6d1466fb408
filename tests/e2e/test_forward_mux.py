"""`agentctl forward` carries every connection on one multiplexed stream: many connections
at once byte-exact both ways on one stream, one connection cut in the middle while the
others go on, and a laptop client that stops reading one connection while the others
move their bytes (per-connection credit, not the stream's window). Each over both
carriers: the terminal socket (agentctl on the daemon's unix socket) and a ForwardMux
gRPC stream (agentctl over TLS, where the socket is not offered)."""

from __future__ import annotations

import socket
import struct
import threading
from pathlib import Path

import pytest

from agentd_client import Client
from tests.support import forwarding
from tests.support.forward_traffic import SERVER, Exchange, exchange
from tests.support.forwarding import Tls, background, forward, free_port, journal, listening
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

tls = forwarding.tls
OVER = pytest.mark.parametrize("over", ["socket", "grpc"])

SIZE = 2 << 20


def _exchanges(local_port: int, seeds: list[int], size: int) -> list[Exchange | None]:
    results: list[Exchange | None] = [None] * len(seeds)

    def one(i: int) -> None:
        sock = socket.create_connection(("127.0.0.1", local_port), 30)
        sock.settimeout(120)
        results[i] = exchange(sock, size, seed=seeds[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(seeds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _exact(results: list[Exchange | None]) -> list[tuple[int, Exchange | None]]:
    return [(i, r) for i, r in enumerate(results) if not (r and r.sent_ok and r.received_ok)]


def _session(tls: Tls, c: Client, workspace: Path) -> tuple[str, int]:
    (workspace / "server.py").write_text(SERVER)
    port = free_port()
    sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
    background(c, sid, f"exec python3 server.py {port}")
    wait_until(lambda: listening(tls, sid, port), timeout=60, what="the task's server")
    return sid, port


def _ends(c: Client, sid: str, n: int) -> list[dict[str, object]]:
    """The journal's `closed` rows once there are `n` (it takes them in batches)."""

    def rows() -> list[dict[str, object]] | None:
        found = [e for e in journal(c, sid) if e["action"] == "closed"]
        return found if len(found) >= n else None

    found = wait_until(rows, timeout=30, what=f"{n} connections' ends in the journal")
    assert found is not None
    return found


def _on_socket(tls: Tls) -> int:
    """Forward streams the daemon has taken on its terminal socket (as its log says)."""
    return tls.daemon.log.count("forwarded for")


def _stream(connection_id: str) -> str:
    """The stream part of a multiplexed connection's id (conn_<stream>_<n>)."""
    return connection_id.rsplit("_", 1)[0]


@OVER
def test_many_connections_share_one_stream_and_arrive_exactly(
    tls: Tls, workspace: Path, over: str
) -> None:
    with Client(tls.daemon.socket, timeout=60) as c:
        sid, port = _session(tls, c, workspace)
        on_socket = _on_socket(tls)
        fw = forward(tls, sid, f"0:{port}", over)
        try:
            results = _exchanges(fw.local_port, list(range(30)), SIZE)
            again = _exchanges(fw.local_port, [100, 101], SIZE)  # later ones, same stream
        finally:
            fw.stop()
        assert not _exact(results + again), _exact(results + again)[:3]
        closed = _ends(c, sid, 32)
        assert len(closed) == 32, closed
        assert len({_stream(str(e["connection_id"])) for e in closed}) == 1, closed[:3]
        assert _on_socket(tls) - on_socket == (1 if over == "socket" else 0)
        assert all(int(str(e["bytes_in"])) == SIZE + 16 for e in closed), closed[:2]
        c.close_session(sid)


@OVER
def test_a_connection_cut_in_the_middle_leaves_the_others_going(
    tls: Tls, workspace: Path, over: str
) -> None:
    """One connection is reset by the laptop's client halfway through its exchange; the
    others on the same stream finish byte-exact, and the forward takes new ones."""
    with Client(tls.daemon.socket, timeout=60) as c:
        sid, port = _session(tls, c, workspace)
        fw = forward(tls, sid, f"0:{port}", over)
        try:
            cut = socket.create_connection(("127.0.0.1", fw.local_port), 30)
            cut.settimeout(60)
            cut.sendall(struct.pack(">QQ", 64 << 20, 9) + b"\1" * (1 << 20))
            got = 0
            while got < 1 << 20:  # the server is sending: the connection is mid-exchange
                got += len(cut.recv(1 << 16))
            others: list[list[Exchange | None]] = []
            running = threading.Thread(
                target=lambda: others.append(_exchanges(fw.local_port, list(range(8)), SIZE))
            )
            running.start()
            cut.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            cut.close()  # a reset, not a clean end
            running.join()
            after = _exchanges(fw.local_port, [50], SIZE)
            # Their ends journaled before agentctl stops (its stop would cut any still open).
            closed = _ends(c, sid, 10)
        finally:
            fw.stop()
        assert not _exact(others[0] + after), _exact(others[0] + after)[:3]
        hows = sorted(str(e["how"]) for e in closed)
        assert hows.count("closed") == 9, hows
        c.close_session(sid)


@OVER
def test_a_connection_nobody_reads_does_not_stall_the_others(
    tls: Tls, workspace: Path, over: str
) -> None:
    """The laptop's client asks for 256 MiB on one connection and reads none of it: that
    connection's credit runs out and it stops, while other connections on the same
    stream move their bytes exactly; the stuck one still reads its data once read."""
    with Client(tls.daemon.socket, timeout=60) as c:
        sid, port = _session(tls, c, workspace)
        fw = forward(tls, sid, f"0:{port}", over)
        try:
            stuck = socket.create_connection(("127.0.0.1", fw.local_port), 30)
            stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            stuck.sendall(struct.pack(">QQ", 256 << 20, 3))  # then reads nothing
            results = _exchanges(fw.local_port, list(range(10)), 8 << 20)
            # The stuck connection was held all along, and still carries its bytes.
            stuck.settimeout(60)
            assert len(stuck.recv(1 << 16)) > 0
            stuck.close()
        finally:
            fw.stop()
        assert not _exact(results), _exact(results)[:3]
        c.close_session(sid)
