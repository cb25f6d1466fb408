"""A multiplexed forward on the daemon's terminal socket (OpenForward's token), through
the real daemon and a real server in a session's sandbox: tokens good once, for their
uid and their session's port, nothing taken before one is checked; what is not a
forward's frames ends that stream alone; the streams' cap holds on the socket too; a
daemon that offers no socket leaves agentctl on ForwardMux, its bytes exact. Frames
within a stream (resets, caps, floods) are tested on both carriers in
tests/security/test_forward_mux_attacks.py."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agentd.api.terminals.tokens import ForwardGrant, Refused, TerminalTokens
from agentd_client import Client
from agentd_client.core import terminal_wire as wire
from agentd_client.core.forward_socket import FRAMES, ChannelRefused
from agentd_client.v1 import agentd_pb2 as pb
from tests.support import ctl
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.forward_traffic import SERVER, exchange
from tests.support.mux import Frame, SocketMux, data
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

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


def _serving(c: Client, workspace: Path, script: str = ECHO) -> tuple[str, int]:
    (workspace / "server.py").write_text(script)
    port = _free_port()
    sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
    r = c.run_tool(
        sid, "Bash", {"command": f"exec python3 server.py {port}", "run_in_background": True}
    )
    assert not r.is_error, r.text
    wait_until(lambda: _listening(c, sid, port), timeout=60, what="the session's server")
    return sid, port


@pytest.fixture
def echo(client: Client, workspace: Path) -> Iterator[tuple[Client, str, int]]:
    sid, port = _serving(client, workspace)
    yield client, sid, port
    client.close_session(sid)


def _offer(c: Client, sid: str, port: int, uid: int | None = None) -> pb.ForwardChannel:
    offered = c.stub.OpenForward(
        pb.OpenForwardRequest(session_id=sid, port=port, uid=os.geteuid() if uid is None else uid),
        timeout=60,
    )
    assert offered.path and offered.token
    return offered


def _answers(path: str, sent: bytes) -> list[tuple[int, bytes]]:
    """Every frame the daemon answers `sent` (then our end) with, until it closes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(60)
        sock.connect(path)
        sock.sendall(sent)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    return wire.FrameReader(1 << 20).feed(answer)


def _echoes(mux: SocketMux, cid: int, payload: bytes) -> None:
    before = len(mux.received(cid))
    mux.send(data(cid, payload))
    mux.wait(f"the echo on {cid}", lambda: mux.received(cid)[before:] == payload)


def test_a_forward_token_is_good_once_for_its_uid_and_nothing_passes_before_it(
    echo: tuple[Client, str, int],
) -> None:
    c, sid, port = echo
    used = _offer(c, sid, port)
    assert used.window > 0 and used.max_data > 0
    first = _answers(used.path, wire.frame(wire.HELLO, used.token))
    assert [k for k, _ in first] == [wire.READY]  # then closed with our end
    # An open with its bytes right behind each refused HELLO: none may connect.
    behind = wire.frame(
        FRAMES, pb.ForwardMuxRequest(frames=[Frame(id=1, open=True)]).SerializeToString()
    )
    attempts = [
        (wire.frame(wire.HELLO, used.token), "already used"),
        (wire.frame(wire.HELLO, _offer(c, sid, port, uid=4242).token), "for uid 4242"),
        (b"", "first frame must be HELLO"),
        (wire.frame(wire.HELLO, os.urandom(32)), "unknown"),
    ]
    for hello, why in attempts:
        frames = _answers(used.path, hello + behind)
        assert [k for k, _ in frames] == [wire.REFUSED], why
        assert why in frames[0][1].decode()
    # A token names its session's port: a good one carries bytes there.
    mux = SocketMux(c, pb.ForwardMuxStart(session_id=sid, port=port))
    try:
        mux.send(Frame(id=1, open=True))
        assert mux.wait_opened(1) == f"127.0.0.1:{port}"
        _echoes(mux, 1, b"through the socket")
    finally:
        mux.close()


def test_a_forward_token_expires_and_names_its_forward() -> None:
    tokens = TerminalTokens()
    token = tokens.issue_forward(
        "s", 0, port=8080, host="", forward_id="fwd_1", namespace="/ns", by="me"
    )
    with pytest.raises(Refused, match="for uid 0"):
        tokens.redeem(token, 1)  # the wrong uid spends it too
    with pytest.raises(Refused, match="already used"):
        tokens.redeem(token, 0)
    token = tokens.issue_forward(
        "s", 0, port=8080, host="", forward_id="fwd_1", namespace="/ns", by="me"
    )
    grant = tokens.redeem(token, 0)
    assert isinstance(grant, ForwardGrant) and (grant.port, grant.namespace) == (8080, "/ns")
    stale = TerminalTokens(seconds=-1)
    token = stale.issue_forward("s", 0, port=8080, host="", forward_id="", namespace="/ns", by="me")
    with pytest.raises(Refused, match="expired"):
        stale.redeem(token, 0)


def test_what_is_not_a_forwards_frames_ends_only_that_stream(
    echo: tuple[Client, str, int], daemon: DaemonProcess
) -> None:
    """A socket frame of another kind, a batch that is no frames, a frame over the limit:
    each ends its own stream (its connections closed with it); another stream of the
    same session goes on, and the daemon logs no traceback."""
    c, sid, port = echo
    start = pb.ForwardMuxStart(session_id=sid, port=port)
    other = SocketMux(c, start)
    try:
        other.send(Frame(id=1, open=True))
        other.wait_opened(1)
        bad = [
            (wire.INPUT, b"keys for no terminal"),
            (FRAMES, b"\xff\xff\xff\xff not protobuf"),
            (FRAMES, struct.pack("<I", 1 << 30)),  # a header promising a huge frame
        ]
        for kind, payload in bad:
            mux = SocketMux(c, start)
            try:
                mux.send(Frame(id=1, open=True))
                mux.wait_opened(1)
                if payload.startswith(struct.pack("<I", 1 << 30)):
                    mux.sock.sendall(wire.HEADER.pack(FRAMES, 1 << 30))
                else:
                    mux.send_bytes(kind, payload)
                assert mux.ended.wait(60), (kind, payload)
            finally:
                mux.close()
        _echoes(other, 1, b"untouched")
    finally:
        other.close()
    assert "Traceback" not in daemon.log


def test_streams_on_the_socket_are_capped_per_session(echo: tuple[Client, str, int]) -> None:
    c, sid, port = echo
    start = pb.ForwardMuxStart(session_id=sid, port=port)
    streams = [SocketMux(c, start) for _ in range(16)]
    try:
        with pytest.raises(ChannelRefused, match="16 forward streams"):
            SocketMux(c, start)
        streams.pop().close()

        def another() -> SocketMux | None:
            try:
                return SocketMux(c, start)
            except ChannelRefused:
                return None

        streams.append(wait_until(another, timeout=60, what="a stream's place freed"))
        streams[-1].send(Frame(id=1, open=True))
        streams[-1].wait_opened(1)
    finally:
        for mux in streams:
            mux.close()


def test_a_daemon_without_its_terminal_socket_forwards_over_forwardmux(
    tmp_path_factory: pytest.TempPathFactory, workspace: Path
) -> None:
    """A socket path with no room for ".term": OpenForward offers nothing, and agentctl
    on the unix socket carries its connections on ForwardMux, byte-exact."""
    base = tmp_path_factory.mktemp("fwd")
    run_dir = base / "r"
    run_dir.mkdir(mode=0o700)
    socket_path = f"{run_dir}/{'s' * (104 - len(str(run_dir)) - 1)}"
    d = start_daemon(base, socket=socket_path)
    try:
        d.wait_for_log("no terminal socket")
        with Client(d.socket, timeout=60) as c:
            sid, port = _serving(c, workspace, SERVER)
            offered = c.stub.OpenForward(
                pb.OpenForwardRequest(session_id=sid, port=port, uid=os.geteuid())
            )
            assert offered.path == ""
            proc = ctl.popen("forward", sid, f"0:{port}", "--json", "--socket", d.socket)
            try:
                assert proc.stdout is not None
                line = proc.stdout.readline()
                assert line, proc.stderr.read() if proc.stderr else ""
                local = int(line.split('"local_port": ')[1].split(",")[0])
                sock = socket.create_connection(("127.0.0.1", local), 30)
                sock.settimeout(60)
                got = exchange(sock, 1 << 20, seed=5)
                assert got.sent_ok and got.received_ok
            finally:
                proc.terminate()
                proc.wait(30)
            c.close_session(sid)
        assert "forwarded for" not in d.log
    finally:
        assert d.stop() == 0, d.log
