"""Attacks on a multiplexed forward through the real daemon, on both carriers (a ForwardMux
gRPC stream; the terminal socket with OpenForward's token): hand-built frames agentctl never
sends (unknown ids, reused ids, data over the frame limit or over the credit granted,
windows that overflow, frames only the daemon sends) and floods of connections on one
stream from a client that never reads. Each bad frame resets its own connection with
the reason; the stream, its other connections and the daemon go on, and the caps on
forwarded connections hold across streams.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agentd_client import Client
from agentd_client.core.forward_mux import MAX_DATA, WINDOW
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.forward_traffic import FLOODS
from tests.support.mux import Frame, Mux, data, open_mux
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)
CARRIERS = pytest.mark.parametrize("carrier", ["grpc", "socket"])

ECHO = r"""
import socket, sys, threading
server = socket.create_server(("127.0.0.1", int(sys.argv[1])), backlog=1024)
print("listening", flush=True)
def echo(conn):
    with conn:
        while d := conn.recv(1 << 16):
            conn.sendall(d)
while True:
    conn, _ = server.accept()
    threading.Thread(target=echo, args=(conn,), daemon=True).start()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(c: Client, sid: str, port: int) -> bool:
    try:
        reply = c.stub.ListPorts(pb.ListPortsRequest(session_id=sid), timeout=30)
    except grpc.RpcError:
        return False
    return any(p.port == port for p in reply.ports)


def _echo_session(c: Client, workspace: Path, script: str = ECHO) -> tuple[str, int]:
    (workspace / "server.py").write_text(script)
    port = _free_port()
    sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
    r = c.run_tool(
        sid, "Bash", {"command": f"exec python3 server.py {port}", "run_in_background": True}
    )
    assert not r.is_error, r.text
    wait_until(lambda: _listening(c, sid, port), timeout=60, what="the session's server")
    return sid, port


def _echoes(mux: Mux, cid: int, payload: bytes) -> None:
    """`payload` sent on `cid` comes back whole (the connection works)."""
    before = len(mux.received(cid))
    mux.send(data(cid, payload))
    mux.wait(
        f"the echo on {cid}",
        lambda: mux.received(cid)[before:] == payload,
    )


@pytest.fixture
def echo(client: Client, workspace: Path) -> Iterator[tuple[Client, str, int]]:
    sid, port = _echo_session(client, workspace)
    yield client, sid, port
    client.close_session(sid)


@CARRIERS
def test_the_echo_works_on_one_stream(echo: tuple[Client, str, int], carrier: str) -> None:
    """The positive control: two connections on one stream, each echoed on its own."""
    c, sid, port = echo
    mux = open_mux(carrier, c, pb.ForwardMuxStart(session_id=sid, port=port))
    try:
        assert mux.started.window == WINDOW and mux.started.max_data == MAX_DATA
        mux.send(Frame(id=1, open=True), Frame(id=2, open=True))
        assert mux.wait_opened(1) == f"127.0.0.1:{port}"
        _echoes(mux, 1, b"one")
        _echoes(mux, 2, b"two")
        mux.send(Frame(id=2, eof=True))
        assert mux.wait_closed(2) == ""  # the server ended after our eof: a clean close
        _echoes(mux, 1, b"still")
    finally:
        mux.close()


@CARRIERS
def test_each_bad_frame_resets_only_its_connection(
    echo: tuple[Client, str, int], daemon: DaemonProcess, carrier: str
) -> None:
    c, sid, port = echo
    mux = open_mux(carrier, c, pb.ForwardMuxStart(session_id=sid, port=port))
    try:
        mux.send(Frame(id=1, open=True))
        mux.wait_opened(1)
        _echoes(mux, 1, b"before")

        # An id never opened: refused once, and the id is used up.
        mux.send(data(50, b"hello"))
        assert "unknown connection 50" in mux.wait_closed(50)

        # Data over the frame limit.
        mux.send(Frame(id=51, open=True), data(51, b"x" * (MAX_DATA + 1)))
        assert "over the limit" in mux.wait_closed(51)

        # Data over the credit granted, in one message (no window can come between).
        over = [data(52, b"y" * MAX_DATA) for _ in range(WINDOW // MAX_DATA)] + [data(52, b"z")]
        mux.send(Frame(id=52, open=True), *over)
        assert "window exceeded" in mux.wait_closed(52)

        # A window that would overflow the credit.
        mux.send(Frame(id=53, open=True), Frame(id=53, window=(1 << 32) - 1))
        assert "overflows" in mux.wait_closed(53)

        # An open for an id that is open.
        mux.send(Frame(id=54, open=True))
        mux.wait_opened(54)
        mux.send(Frame(id=54, open=True))
        assert "already open" in mux.wait_closed(54)

        # An id at or below one used already.
        mux.send(Frame(id=10, open=True))
        assert "was used" in mux.wait_closed(10)

        # A frame only the daemon sends, and one with no kind.
        mux.send(Frame(id=55, open=True), Frame(id=55, opened="127.0.0.1:1"))
        assert "does not send opened" in mux.wait_closed(55)
        mux.send(Frame(id=56, open=True), Frame(id=56))
        assert "an empty frame" in mux.wait_closed(56)

        # Data after the client's own eof.
        mux.send(Frame(id=57, open=True), Frame(id=57, eof=True), data(57, b"late"))
        assert "data after eof" in mux.wait_closed(57)

        # The stream and its first connection go on; a new connection works.
        _echoes(mux, 1, b"after")
        mux.send(Frame(id=60, open=True))
        mux.wait_opened(60)
        _echoes(mux, 60, b"new")
        assert not mux.ended.is_set(), mux.error
    finally:
        mux.close()
    assert "Traceback" not in daemon.log


def test_a_stream_must_start_with_start(echo: tuple[Client, str, int]) -> None:
    c, sid, port = echo
    bad = [
        (pb.ForwardMuxRequest(frames=[Frame(id=1, open=True)]), grpc.StatusCode.INVALID_ARGUMENT),
        (
            pb.ForwardMuxRequest(start=pb.ForwardMuxStart(session_id=sid, port=port, host="::2")),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            pb.ForwardMuxRequest(start=pb.ForwardMuxStart(session_id=sid, port=70000)),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            pb.ForwardMuxRequest(start=pb.ForwardMuxStart(session_id="sess_nope", port=port)),
            grpc.StatusCode.NOT_FOUND,
        ),
    ]
    for request, code in bad:
        call = c.stub.ForwardMux(iter([request]), timeout=60)
        with pytest.raises(grpc.RpcError) as caught:
            next(call)
        assert caught.value.code() == code, (request, caught.value)
    # A second `start` ends the stream (it is not a connection's frame).
    mux = Mux(c, pb.ForwardMuxStart(session_id=sid, port=port))
    try:
        mux.send_raw(pb.ForwardMuxRequest(start=pb.ForwardMuxStart(session_id=sid, port=port)))
        mux.ended.wait(60)
        assert mux.error is not None and mux.error.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        mux.close()


@CARRIERS
def test_nothing_listening_refuses_the_connection_in_one_line(
    echo: tuple[Client, str, int],
    carrier: str,
) -> None:
    c, sid, port = echo
    free = _free_port()
    mux = open_mux(carrier, c, pb.ForwardMuxStart(session_id=sid, port=free))
    try:
        mux.send(Frame(id=1, open=True), data(1, b"early bytes"))
        assert f"nothing listens on port {free}" in mux.wait_closed(1)
    finally:
        mux.close()


@pytest.fixture
def own_daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(tmp_path / "d")
    yield proc
    assert proc.stop() == 0, proc.log
    assert "Traceback" not in proc.log, proc.log


def test_the_caps_hold_across_streams(own_daemon: DaemonProcess, workspace: Path) -> None:
    """Three sessions' streams from one client, 70 connections each: a session gets 64,
    the client 128 in all; the rest wait for a place (64 at most, all streams) and are
    refused one by one with the cap that holds when none frees in time, and a
    connection closed frees its place."""
    with Client(own_daemon.socket, timeout=60) as c:
        sessions = [_echo_session(c, workspace) for _ in range(3)]
        streams = [Mux(c, pb.ForwardMuxStart(session_id=s, port=p)) for s, p in sessions]
        try:
            opened: list[int] = []
            for mux in streams:  # one after the other: which cap holds is known
                mux.send(*[Frame(id=i, open=True) for i in range(1, 71)])

                def settled(mux: Mux = mux) -> bool:
                    return all(
                        any(f.WhichOneof("kind") in ("opened", "close") for f in mux.of(i))
                        for i in range(1, 71)
                    )

                mux.wait("every open answered", settled, timeout=120)
                opened.append(sum(mux.closed(i) is None for i in range(1, 71)))
            assert opened == [64, 64, 0], opened
            assert "has 64 forwarded connections open" in str(streams[0].closed(70))
            assert "this client has 128" in str(streams[2].closed(1))
            assert "this client has 128" in str(streams[2].closed(70))
            # One closed on the first stream: the third may open one.
            streams[0].send(Frame(id=1, close=""))
            _echoes(streams[0], 2, b"still")  # the close has been taken
            streams[2].send(Frame(id=100, open=True))
            streams[2].wait_opened(100)
        finally:
            for mux in streams:
                mux.close()
        for sid, _ in sessions:
            c.close_session(sid)


@CARRIERS
def test_a_connection_over_the_cap_waits_for_a_place(
    echo: tuple[Client, str, int],
    carrier: str,
) -> None:
    """The session's 65th connection is not refused at once: it waits, its first bytes
    with it, and connects when one of the 64 closes."""
    c, sid, port = echo
    mux = open_mux(carrier, c, pb.ForwardMuxStart(session_id=sid, port=port))
    try:
        mux.send(*[Frame(id=i, open=True) for i in range(1, 65)])
        for i in range(1, 65):
            mux.wait_opened(i)
        mux.send(Frame(id=65, open=True), data(65, b"waited"))
        _echoes(mux, 1, b"meanwhile")  # the open of 65 was taken, and is waiting
        assert not mux.of(65), mux.of(65)
        mux.send(Frame(id=1, close=""))
        mux.wait_opened(65)
        mux.wait("the waiting bytes echoed", lambda: mux.received(65) == b"waited")
    finally:
        mux.close()


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@CARRIERS
def test_a_thousand_opens_on_a_stream_nobody_reads_stay_bounded(
    own_daemon: DaemonProcess, workspace: Path, carrier: str
) -> None:
    """1,000 connections opened on one stream whose client reads nothing, each to a
    server that writes all it can: at most the session's cap connect, each stops at its
    credit (the servers are stuck), the daemon's memory stays bounded and returns, and
    another session's stream still forwards."""
    pid = own_daemon.proc.pid
    with Client(own_daemon.socket, timeout=60) as c:
        sid, port = _echo_session(c, workspace, FLOODS)
        other, other_port = _echo_session(c, workspace)
        before = _rss_kb(pid)
        mux = open_mux(carrier, c, pb.ForwardMuxStart(session_id=sid, port=port), read=False)
        try:
            for first in range(1, 1001, 100):
                mux.send(*[Frame(id=i, open=True) for i in range(first, first + 100)])
            stuck = workspace / "stuck.txt"
            wait_until(
                lambda: stuck.exists() and len(stuck.read_text().split()) >= 64,
                timeout=120,
                what="the capped connections' servers to be stuck",
            )
            grown_kb = _rss_kb(pid) - before
            elsewhere = open_mux(carrier, c, pb.ForwardMuxStart(session_id=other, port=other_port))
            try:
                elsewhere.send(Frame(id=1, open=True))
                elsewhere.wait_opened(1)
                _echoes(elsewhere, 1, b"not taken by the flood")
            finally:
                elsewhere.close()
        finally:
            mux.close()
        assert len(stuck.read_text().split()) == 64
        assert grown_kb < 256 * 1024, f"the daemon grew by {grown_kb} kB"
        wait_until(
            lambda: _rss_kb(pid) - before < 64 * 1024,
            timeout=60,
            what=lambda: f"the daemon's memory to return ({_rss_kb(pid) - before} kB above)",
        )
        assert os.path.exists(stuck)
        c.close_session(sid)
        c.close_session(other)


@CARRIERS
def test_a_closed_session_takes_no_new_connection(
    client: Client, workspace: Path, carrier: str
) -> None:
    """The session closes while its stream is open: a connection opened after is
    refused with the reason, though the stream's thread still sits in its namespace."""
    sid, port = _echo_session(client, workspace)
    mux = open_mux(carrier, client, pb.ForwardMuxStart(session_id=sid, port=port))
    try:
        mux.send(Frame(id=1, open=True))
        mux.wait_opened(1)
        client.close_session(sid)
        mux.send(Frame(id=2, open=True))
        assert "closed" in mux.wait_closed(2)
    finally:
        mux.close()


def test_streams_are_capped_per_session(echo: tuple[Client, str, int]) -> None:
    """Each stream keeps a thread in its session's namespace: 16 per session at once;
    the 17th is refused in one line, and one ending frees its place."""
    c, sid, port = echo
    start = pb.ForwardMuxStart(session_id=sid, port=port)
    streams = [Mux(c, start) for _ in range(16)]
    try:
        with pytest.raises(grpc.RpcError) as caught:
            Mux(c, start)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "16 forward streams" in (caught.value.details() or "")
        streams.pop().close()

        def another() -> Mux | None:
            try:
                return Mux(c, start)
            except grpc.RpcError:
                return None

        streams.append(wait_until(another, timeout=60, what="a stream's place freed"))
        streams[-1].send(Frame(id=1, open=True))
        streams[-1].wait_opened(1)
    finally:
        for mux in streams:
            mux.close()
