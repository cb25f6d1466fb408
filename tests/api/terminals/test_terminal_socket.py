"""A task's terminal over the daemon's terminal socket (agentd/api/terminals/), through
the real daemon, a task's real shim and a raw `cat` on its PTY in the sandbox: bytes
exact both ways, tokens good once for their uid and task only (nothing written before
one is checked), a client that never reads stalling nobody, replay then live bytes
contiguous."""

from __future__ import annotations

import os
import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.api.terminals.tokens import Refused, TerminalTokens
from agentd_client import Client
from agentd_client.core import terminal_wire as wire
from agentd_client.core.terminal_channel import (
    ChannelRefused,
    Output,
    TerminalChannel,
    open_channel,
)
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.daemon import DaemonProcess
from tests.support.waiting import wait_until

RAW_CAT = "stty raw -echo; echo ready; exec cat"


def _start(client: Client, session_id: str, command: str = RAW_CAT) -> str:
    started = client.stub.StartTask(
        pb.StartTaskRequest(
            session_id=session_id, command=command, pty=pb.TerminalSize(rows=24, cols=80)
        )
    )
    return str(started.task_id)


def _kill(client: Client, session_id: str, task_id: str) -> None:
    client.stub.SignalTask(
        pb.SignalTaskRequest(session_id=session_id, task_id=task_id, signal="KILL")
    )


def _token(client: Client, session_id: str, task_id: str, **kw: object) -> pb.TerminalChannel:
    request = pb.OpenTerminalRequest(
        session_id=session_id, task_id=task_id, uid=os.geteuid(), input=True
    )
    for key, value in kw.items():
        setattr(request, key, value)
    offered = client.stub.OpenTerminal(request)
    assert offered.path and offered.token
    return offered


class _Reader:
    """A channel's output read on a thread: the bytes, and (offset, length) of each frame."""

    def __init__(self, channel: TerminalChannel) -> None:
        self.channel = channel
        self.data = bytearray()
        self.frames: list[tuple[int, int]] = []
        self.ended = threading.Event()
        self._grew = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for out in self.channel.outputs():
                self._take(out)
        except OSError:
            pass
        finally:
            self.ended.set()
            with self._grew:
                self._grew.notify_all()

    def _take(self, out: Output) -> None:
        with self._grew:
            if out.data:
                self.frames.append((out.offset, len(out.data)))
                self.data += out.data
            self._grew.notify_all()

    def until(self, want: bytes, timeout: float = 60) -> bool:
        with self._grew:
            return self._grew.wait_for(
                lambda: want in self.data or self.ended.is_set(), timeout
            ) and (want in self.data)

    def length(self, n: int, timeout: float = 120) -> bool:
        with self._grew:
            return self._grew.wait_for(lambda: len(self.data) >= n or self.ended.is_set(), timeout)


def _contiguous(frames: list[tuple[int, int]], start: int = 0) -> bool:
    at = start
    for offset, size in frames:
        if offset != at:
            return False
        at += size
    return True


def _whole_output(client: Client, session_id: str, task_id: str) -> bytes:
    return b"".join(
        chunk.data
        for chunk in client.stub.ReadOutput(
            pb.ReadOutputRequest(session_id=session_id, id=task_id, follow=False)
        )
    )


@pytest.fixture
def cat_task(client: Client, session_id: str) -> Iterator[str]:
    task_id = _start(client, session_id)
    yield task_id
    _kill(client, session_id, task_id)


def test_keys_and_their_echo_are_exact_both_ways_with_a_1_mib_paste(
    daemon: DaemonProcess, client: Client, session_id: str, cat_task: str
) -> None:
    channel = open_channel(client, session_id, cat_task, input=True)
    assert channel is not None, "the daemon offers its terminal socket on its unix socket"
    daemon.wait_for_log(f"terminal socket: task {cat_task} linked")
    reader = _Reader(channel)
    try:
        assert reader.until(b"ready\n")
        start = len(reader.data)
        keys = bytes(range(256))
        for i in range(0, 256, 16):  # as typed: a few bytes at a time, each echoed
            channel.send(keys[i : i + 16])
            assert reader.length(start + i + 16)
        paste = random.Random(7).randbytes(1 << 20)
        channel.send(paste)
        assert reader.length(start + 256 + len(paste))
        assert bytes(reader.data[start:]) == keys + paste
        assert _contiguous(reader.frames)
    finally:
        channel.close()


def test_a_token_is_good_once_for_its_uid_and_task_and_nothing_passes_before_it(
    client: Client, session_id: str, cat_task: str
) -> None:
    other = _start(client, session_id)
    try:
        used = _token(client, session_id, cat_task)
        TerminalChannel.connect(used.path, used.token).close()
        attempts = [
            # spent already
            (used.path, wire.frame(wire.HELLO, used.token), "already used"),
            # made for another uid than the connection's
            (
                used.path,
                wire.frame(wire.HELLO, _token(client, session_id, cat_task, uid=4242).token),
                "for uid 4242",
            ),
            # no token at all: input first
            (used.path, b"", "first frame must be HELLO"),
            # a made-up token
            (used.path, wire.frame(wire.HELLO, os.urandom(32)), "unknown"),
        ]
        for path, hello, why in attempts:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(60)
                sock.connect(path)
                # The token and keys behind it in one write: none may reach the task.
                sock.sendall(hello + wire.frame(wire.INPUT, b"INTRUDER"))
                answer = b""
                while chunk := sock.recv(4096):
                    answer += chunk
                frames = wire.FrameReader(wire.MAX_DAEMON_PAYLOAD).feed(answer)
                assert [k for k, _ in frames] == [wire.REFUSED], why
                assert why in frames[0][1].decode()
        # A token names one task: its keys go there, never to another.
        to_other = _token(client, session_id, other)
        other_channel = TerminalChannel.connect(to_other.path, to_other.token)
        other_reader = _Reader(other_channel)
        assert other_reader.until(b"ready\n")
        other_channel.send(b"for-the-other")
        assert other_reader.until(b"for-the-other")
        other_channel.close()
        # What reached the first task's terminal: only what its own channel sent.
        channel = open_channel(client, session_id, cat_task, input=True)
        assert channel is not None
        reader = _Reader(channel)
        assert reader.until(b"ready\n")
        channel.send(b"<mark>")
        assert reader.until(b"<mark>")
        channel.close()
        # (The shim sends a linked client its echo before the file and the daemon have it.)
        whole = wait_until(
            lambda: (
                (out := _whole_output(client, session_id, cat_task)).endswith(b"<mark>") and out
            ),
            timeout=60,
            what="the mark in the output file",
        )
        assert whole == b"ready\n<mark>"
    finally:
        _kill(client, session_id, other)


def test_a_spent_or_expired_token_is_refused() -> None:
    tokens = TerminalTokens()
    token = tokens.issue("s", "b0", 0, offset=0, input=True, hangup_on_drop=False, by="me")
    with pytest.raises(Refused, match="for uid 0"):
        tokens.redeem(token, 1)  # the wrong uid spends it too
    with pytest.raises(Refused, match="already used"):
        tokens.redeem(token, 0)
    token = tokens.issue("s", "b0", 0, offset=0, input=True, hangup_on_drop=False, by="me")
    assert tokens.redeem(token, 0).task_id == "b0"
    stale = TerminalTokens(seconds=-1)
    token = stale.issue("s", "b0", 0, offset=0, input=True, hangup_on_drop=False, by="me")
    with pytest.raises(Refused, match="expired"):
        stale.redeem(token, 0)


def test_a_client_that_never_reads_stalls_neither_the_task_nor_another_terminal(
    client: Client, session_id: str
) -> None:
    # Far more output than the socket buffers and the daemon's bound hold.
    task_id = _start(
        client, session_id, "stty raw -echo; echo ready; head -c 1 >/dev/null; seq 1 600000"
    )
    stuck = TerminalChannel.connect(**_connect_args(client, session_id, task_id))  # type: ignore[arg-type]
    stuck.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    channel = open_channel(client, session_id, task_id, input=True)
    assert channel is not None
    reader = _Reader(channel)
    try:
        assert reader.until(b"ready\n")
        channel.send(b"g")
        assert reader.ended.wait(180), "the reading terminal got the output to its end"
        assert bytes(reader.data) == _whole_output(client, session_id, task_id)
        assert b"\n600000\n" in reader.data  # the PTY is raw: no carriage returns
        assert _contiguous(reader.frames)
        wait_until(
            lambda: (
                client.stub.GetTaskTerminal(
                    pb.TaskRef(session_id=session_id, task_id=task_id)
                ).status
                != "running"
            ),
            timeout=60,
            what="the task ended while a client read nothing",
        )
        # The stuck client, reading at last, gets it all, contiguous, to the end: what
        # its socket held, then the rest from the file.
        late = _Reader(stuck)
        assert late.ended.wait(180)
        assert bytes(late.data) == bytes(reader.data) and _contiguous(late.frames)
    finally:
        stuck.close()
        channel.close()


def _connect_args(client: Client, session_id: str, task_id: str, **kw: object) -> dict[str, object]:
    offered = _token(client, session_id, task_id, **kw)
    return {"path": offered.path, "token": offered.token}


def test_a_terminal_linked_mid_run_gets_replay_then_live_bytes_contiguous(
    client: Client, session_id: str, cat_task: str
) -> None:
    first_channel = open_channel(client, session_id, cat_task, input=True)
    assert first_channel is not None
    first = _Reader(first_channel)
    late: _Reader | None = None
    try:
        assert first.until(b"ready\n")
        for i in range(40):
            first_channel.send(f"<{i}>".encode())  # key by key, each echoed as it is read
            assert first.until(f"<{i}>".encode())
            if i == 20:
                late_channel = open_channel(client, session_id, cat_task)
                assert late_channel is not None
                late = _Reader(late_channel)
        assert late is not None and late.until(b"<39>")
        expected = b"ready\n" + b"".join(f"<{i}>".encode() for i in range(40))
        assert bytes(first.data) == expected and bytes(late.data) == expected
        assert _contiguous(first.frames) and _contiguous(late.frames)
    finally:
        first_channel.close()
        if late is not None:
            late.channel.close()


def test_a_refused_channel_says_why(client: Client, session_id: str, cat_task: str) -> None:
    offered = _token(client, session_id, cat_task)
    TerminalChannel.connect(offered.path, offered.token).close()
    with pytest.raises(ChannelRefused, match="already used"):
        TerminalChannel.connect(offered.path, offered.token)


def test_keys_resizes_and_a_detach_while_linked_are_all_counted_and_recorded(
    client: Client, session_id: str, cat_task: str
) -> None:
    """Keys go through the shim once the channel is caught up; a resize and the detach
    come back to the daemon, which records them, and the input event counts every key."""
    channel = open_channel(client, session_id, cat_task, input=True)
    assert channel is not None
    reader = _Reader(channel)
    assert reader.until(b"ready\n")
    sent = 0
    for i in range(30):
        key = f"[{i}]".encode()
        channel.send(key)
        sent += len(key)
        assert reader.until(key)
    channel.resize(33, 99)
    wait_until(
        lambda: (
            client.stub.GetTaskTerminal(
                pb.TaskRef(session_id=session_id, task_id=cat_task)
            ).size.cols
            == 99
        ),
        timeout=60,
        what="the resize reached the task",
    )
    channel.send(b"<last>")
    sent += len(b"<last>")
    assert reader.until(b"<last>")
    channel.detach()
    channel.close()
    events = wait_until(
        lambda: [
            e.task_controlled
            for e in client.attach(session_id, follow=False)
            if e.HasField("task_controlled")
            and e.task_controlled.task_id == cat_task
            and e.task_controlled.action == "input"
        ],
        timeout=60,
        what="the input event",
    )
    assert (events[-1].bytes, events[-1].reason) == (sent, "detached")
    resized = [
        e.task_controlled.size.cols
        for e in client.attach(session_id, follow=False)
        if e.HasField("task_controlled") and e.task_controlled.action == "resized"
    ]
    assert 99 in resized
    status = client.stub.GetTaskTerminal(pb.TaskRef(session_id=session_id, task_id=cat_task))
    assert status.status == "running"  # detached: it runs on


def test_after_the_token_input_without_the_right_or_an_oversized_frame_writes_nothing(
    client: Client, session_id: str, cat_task: str
) -> None:
    """A watcher's token (no input) sends keys: ignored. A frame past the bound: the
    connection is closed. Unknown kinds and a size out of range: ignored."""
    watcher = TerminalChannel.connect(**_connect_args(client, session_id, cat_task, input=False))
    assert _Reader(watcher).until(b"ready\n")  # the terminal is raw, cat reads it
    watcher.send(b"WATCHER")
    watcher.sock.sendall(wire.frame(99, b"?") + wire.frame(wire.RESIZE, wire.SIZE.pack(0, 5000)))
    watcher.close()
    offered = _token(client, session_id, cat_task)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(60)
        sock.connect(offered.path)
        sock.sendall(wire.frame(wire.HELLO, offered.token))
        sock.sendall(wire.HEADER.pack(wire.INPUT, 10 << 20) + b"OVERSIZED" * 100)
        while sock.recv(1 << 16):  # READY and the output, then the daemon closes
            pass
    channel = open_channel(client, session_id, cat_task, input=True)
    assert channel is not None
    reader = _Reader(channel)
    assert reader.until(b"ready\n")
    channel.send(b"<mark>")
    assert reader.until(b"<mark>")
    channel.close()
    whole = wait_until(
        lambda: (out := _whole_output(client, session_id, cat_task)).endswith(b"<mark>") and out,
        timeout=60,
        what="the mark in the output file",
    )
    assert whole == b"ready\n<mark>"
    assert whole == b"ready\n<mark>"
    size = client.stub.GetTaskTerminal(pb.TaskRef(session_id=session_id, task_id=cat_task)).size
    assert (size.rows, size.cols) == (24, 80)


def _shim_pid(daemon: DaemonProcess, task_id: str) -> int:
    """The task's shim, by the peer credentials of its control socket."""
    import glob
    import sys

    (path,) = [
        p for p in glob.glob(f"{daemon.state_dir}/**/ctl.sock", recursive=True) if task_id in p
    ]
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as probe:
        probe.connect(path)
        creds = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(creds[0:4], sys.byteorder)


def _shim_holds(shim_pid: int, channel: TerminalChannel) -> bool:
    """Whether the shim holds the daemon's end of this client's connection (linked)."""
    import subprocess

    mine = str(os.fstat(channel.sock.fileno()).st_ino)
    listing = subprocess.run(["ss", "-xH"], capture_output=True, text=True, check=True).stdout
    peers = [t[-1] for line in listing.splitlines() if (t := line.split())[-3:-2] == [mine]]
    held = set()
    for fd in os.listdir(f"/proc/{shim_pid}/fd"):
        try:
            held.add(os.readlink(f"/proc/{shim_pid}/fd/{fd}"))
        except OSError:
            continue
    return any(f"socket:[{peer}]" in held for peer in peers)


def test_a_caught_up_client_goes_to_the_shim_comes_back_for_a_resize_then_goes_again(
    daemon: DaemonProcess, client: Client, session_id: str, cat_task: str
) -> None:
    channel = open_channel(client, session_id, cat_task, input=True)
    assert channel is not None
    reader = _Reader(channel)
    try:
        assert reader.until(b"ready\n")
        shim = _shim_pid(daemon, cat_task)
        wait_until(lambda: _shim_holds(shim, channel), timeout=60, what="the client linked")
        channel.resize(30, 90)  # not a key: back to the daemon, which resizes
        wait_until(lambda: not _shim_holds(shim, channel), timeout=60, what="handed back")
        channel.send(b"<between>")  # through the daemon meanwhile
        assert reader.until(b"<between>")
        wait_until(lambda: _shim_holds(shim, channel), timeout=60, what="linked again")
        channel.send(b"<after>")
        assert reader.until(b"<after>")
        assert bytes(reader.data) == b"ready\n<between><after>" and _contiguous(reader.frames)
        size = client.stub.GetTaskTerminal(pb.TaskRef(session_id=session_id, task_id=cat_task))
        assert (size.size.rows, size.size.cols) == (30, 90)
        # A detach while the shim has it: back to the daemon, which lets the task run on.
        assert _shim_holds(shim, channel)
        channel.detach()
    finally:
        channel.close()
    events = wait_until(
        lambda: [
            e.task_controlled
            for e in client.attach(session_id, follow=False)
            if e.HasField("task_controlled")
            and e.task_controlled.task_id == cat_task
            and e.task_controlled.action == "input"
        ],
        timeout=60,
        what="the input event",
    )
    assert (events[-1].reason, events[-1].bytes) == ("detached", len(b"<between><after>"))
    term = client.stub.GetTaskTerminal(pb.TaskRef(session_id=session_id, task_id=cat_task))
    assert term.status == "running"


def test_a_daemon_that_cannot_make_its_terminal_socket_serves_terminals_over_grpc(
    tmp_path_factory: pytest.TempPathFactory, workspace: Path
) -> None:
    """A socket path with no room for ".term" (a unix socket's path is at most 107
    bytes): the daemon starts, says so once, and offers no terminal socket."""
    from tests.support.daemon import start_daemon

    base = tmp_path_factory.mktemp("term")
    run_dir = base / "r"
    run_dir.mkdir(mode=0o700)
    name = "s" * (104 - len(str(run_dir)) - 1)
    socket_path = f"{run_dir}/{name}"
    assert len(socket_path) == 104
    d = start_daemon(base, socket=socket_path)
    try:
        d.wait_for_log("no terminal socket")
        with Client(d.socket) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            task_id = _start(c, sid)
            offered = c.stub.OpenTerminal(
                pb.OpenTerminalRequest(
                    session_id=sid, task_id=task_id, uid=os.geteuid(), input=True
                )
            )
            assert offered.path == ""
            assert open_channel(c, sid, task_id, input=True) is None
            _kill(c, sid, task_id)
    finally:
        assert d.stop() == 0, d.log


@pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another uid needs root")
def test_another_uid_cannot_even_connect_nor_use_a_token_made_for_it_from_here(
    daemon: DaemonProcess, client: Client, session_id: str, cat_task: str
) -> None:
    """The socket keeps other uids out (0600 in the daemon's directory); a token made
    for uid 65534 is refused to a connection of ours, and spent by the try."""
    import subprocess

    offered = _token(client, session_id, cat_task, uid=65534)
    tried = subprocess.run(
        [
            "/usr/bin/python3",
            "-c",
            f"import socket; socket.socket(socket.AF_UNIX).connect({offered.path!r})",
        ],
        user=65534,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tried.returncode != 0 and "PermissionError" in tried.stderr
    with pytest.raises(ChannelRefused, match="for uid 65534"):
        TerminalChannel.connect(offered.path, offered.token)
    with pytest.raises(ChannelRefused, match="already used"):
        TerminalChannel.connect(offered.path, offered.token)


def test_a_task_that_ends_while_the_shim_holds_its_client_ends_there_too(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    """The shim hands the client back at the run's end: the rest (the end line) and END
    come from the daemon, contiguous with what the shim sent."""
    task_id = _start(client, session_id, "stty raw -echo; echo ready; head -c 5; echo; echo done")
    channel = open_channel(client, session_id, task_id, input=True)
    assert channel is not None
    reader = _Reader(channel)
    try:
        assert reader.until(b"ready\n")
        shim = _shim_pid(daemon, task_id)
        wait_until(lambda: _shim_holds(shim, channel), timeout=60, what="the client linked")
        channel.send(b"12345")
        assert reader.ended.wait(120), "END reached the client"
        assert bytes(reader.data) == b"ready\n12345\ndone\n\n[exited with code 0]\n"
        assert _contiguous(reader.frames)
    finally:
        channel.close()
