"""A terminal's output relayed live (agentd/runs/shim/supervisor.py LIVE frames to
agentd/runs/shim/client.py ShimOutput, then to followers without a read of the file):
bytes kept in order across dropped frames and overlapping updates, a controller that
reads nothing not stalling the shim, and followers through the real daemon getting
replay then live bytes, nothing lost or duplicated, a stalled follower stalling nobody."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.runs.shim import client, protocol, spawn, terminal
from agentd_client import Client
from agentd_client.v1 import agentd_pb2 as pb
from agentd_sandbox import Limits, SandboxPolicy
from tests.support.waiting import wait_until

RAW_CAT = "stty raw -echo; echo ready; exec cat"


def test_live_bytes_are_kept_once_in_order_and_restart_after_a_gap() -> None:
    fd = os.memfd_create("out")
    os.write(fd, b"abcdefgh")
    out = client.ShimOutput("/x/id.output", fd)
    out.live(0, 3, b"abc")
    out.live(3, 5, b"de")
    out.live(0, 3, b"abc")  # again: already held
    assert (out.size, out.total) == (5, 5)
    assert out.recent(0, 5) == b"abcde" and out.recent(1, 4) == b"bcd"
    # An update covers "fg", whose frame the shim could not send: those come from the file.
    out.update({"size": 7, "total": 7})
    out.live(5, 7, b"fg")  # late: covered
    assert out.recent(5, 7) is None and out.recent(0, 5) == b"abcde"
    out.live(7, 8, b"h")  # after the gap, held from there
    assert out.size == 8 and out.recent(7, 8) == b"h" and out.recent(3, 8) is None
    out.live(10, 12, b"jk")  # a dropped frame before it: the bytes between are in the file
    assert out.size == 12 and out.recent(10, 12) == b"jk" and out.recent(7, 12) is None
    out.live(15, 16, b"")  # empty: nothing
    assert out.size == 12


def test_live_bytes_held_are_bounded() -> None:
    out = client.ShimOutput("/x/id.output", os.memfd_create("out"))
    block = b"x" * 4096
    for i in range(2 * client.RECENT_BYTES // len(block)):
        out.live(i * len(block), (i + 1) * len(block), block)
    end = out.size
    assert end == 2 * client.RECENT_BYTES
    assert out.recent(end - client.RECENT_BYTES, end) == b"x" * client.RECENT_BYTES
    assert out.recent(end - client.RECENT_BYTES - 1, end) is None
    out.ended({})
    assert out.recent(end - 1, end) is None  # nothing held once it ended


async def test_input_goes_binary_only_to_a_shim_that_said_it_reads_it() -> None:
    """A shim this daemon forked reads INPUT frames; an adopted one, only if its state
    says so (one left by an older daemon takes JSON input)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    run = client.ShimRun(ours, client.ShimOutput("/x/id.output", os.memfd_create("out")))
    run.stdin_open = True
    assert await run.write(b"k1")
    assert json.loads(theirs.recv(protocol.MAX_MESSAGE)) == {"op": "input", "data": "azE="}
    theirs.send(json.dumps({"ev": "state", "pid": 7, "binary_input": True}).encode())
    await asyncio.wait_for(run.stated.wait(), 10)
    run.stdin_open = True
    assert await run.write(b"k2")
    assert theirs.recv(protocol.MAX_MESSAGE) == bytes([protocol.INPUT]) + b"k2"
    theirs.close()
    assert await asyncio.wait_for(run.done, 10) == 137


async def test_every_message_of_a_flood_is_taken_in_order() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    out = client.ShimOutput("/x/id.output", os.memfd_create("out"))
    run = client.ShimRun(ours, out)
    frames = 5 * client.READS_PER_WAKEUP

    def flood() -> None:  # more than one wake-up takes, as fast as the socket holds them
        for i in range(frames):
            theirs.send(protocol.LIVE_HEADER.pack(protocol.LIVE, i, i + 1) + b"x")
            if i % 50 == 49:
                theirs.send(b"junk")  # ignored, in between
        end = {"ev": "exit", "code": 0, "size": frames, "total": frames}
        theirs.send(json.dumps(end).encode())

    await asyncio.wait_for(asyncio.to_thread(flood), 30)
    assert await asyncio.wait_for(run.done, 10) == 0
    assert out.size == frames and out.total == frames


# ---- the real shim ----

_FORKSERVER = spawn.Forkserver()


@pytest.fixture(scope="module")
def forkserver() -> Iterator[spawn.Forkserver]:
    _FORKSERVER.start()
    yield _FORKSERVER
    _FORKSERVER.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="the shim's sandbox needs root")
async def test_a_controller_that_reads_nothing_does_not_stall_the_shim(
    forkserver: spawn.Forkserver, tmp_path: Path
) -> None:
    path = str(tmp_path / "run.output")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    policy = SandboxPolicy(writable=[], cwd="/", limits=Limits(wall_seconds=120))
    argv = [*terminal.CTTY_ARGV, "sh", "-c", RAW_CAT]
    run = await spawn.spawn(forkserver, policy, argv, path, fd, 64 << 20, pty=(24, 80))
    os.close(fd)
    if run is None:
        pytest.skip("this machine's sandbox chain cannot run under a shim (no setpriv)")
    task_dir = tmp_path / "task"
    task_dir.mkdir(mode=0o700)
    run.make_task(str(task_dir))
    await asyncio.to_thread(wait_until, lambda: (task_dir / "shim.json").exists(), 60)
    dir_fd = os.open(task_dir, os.O_PATH | os.O_DIRECTORY)
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        stuck.connect(f"/proc/self/fd/{dir_fd}/ctl.sock")  # a controller that never reads
        # Far more echo than the stuck controller's socket holds.
        data = bytes(ord("a") + i % 26 for i in range(2 << 20))
        assert await asyncio.wait_for(run.write(data), 120)

        async def echoed() -> None:
            while run.output.size < len(b"ready\n") + len(data):
                await run.output.changed()

        await asyncio.wait_for(echoed(), 120)
        with open(path, "rb") as f:
            assert f.read() == b"ready\n" + data
    finally:
        stuck.close()
        os.close(dir_fd)
        run.kill()
    assert await asyncio.wait_for(run.done, 60) == 137


# ---- through the daemon ----


class _Follower:
    """A followed ReadOutput stream read on a thread, its chunks kept as they came."""

    def __init__(self, client: Client, session_id: str, task_id: str) -> None:
        self.chunks: queue.Queue[pb.OutputChunk | None] = queue.Queue()
        self.data = b""
        self.offsets: list[tuple[int, int]] = []
        self._stream = client.stub.ReadOutput(
            pb.ReadOutputRequest(session_id=session_id, id=task_id, follow=True)
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for chunk in self._stream:
                self.chunks.put(chunk)
        except Exception:  # noqa: BLE001 - cancelled at the end
            pass
        self.chunks.put(None)

    def until(self, want: bytes, timeout: float = 60) -> bool:
        """Take chunks until `want` is in what came; False at the stream's end."""
        while want not in self.data:
            chunk = self.chunks.get(timeout=timeout)
            if chunk is None:
                return False
            self.offsets.append((chunk.offset, len(chunk.data)))
            self.data += chunk.data
            if chunk.done:
                return want in self.data
        return True

    def to_end(self, timeout: float = 60) -> None:
        """Take chunks to the stream's end (a stream ended so is never cut mid-write)."""
        while (chunk := self.chunks.get(timeout=timeout)) is not None:
            self.offsets.append((chunk.offset, len(chunk.data)))
            self.data += chunk.data
            if chunk.done:
                return

    def cancel(self) -> None:
        self._stream.cancel()


def _contiguous(offsets: list[tuple[int, int]]) -> bool:
    at = 0
    for offset, size in offsets:
        if offset != at:
            return False
        at += size
    return True


def _start(client: Client, session_id: str, command: str) -> str:
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


def test_a_follower_attaching_mid_run_gets_replay_then_live_bytes(
    client: Client, session_id: str
) -> None:
    task_id = _start(client, session_id, RAW_CAT)
    keys: queue.Queue[bytes | None] = queue.Queue()

    def requests() -> Iterator[pb.TaskInput]:
        yield pb.TaskInput(session_id=session_id, task_id=task_id)
        while (key := keys.get()) is not None:
            yield pb.TaskInput(data=key)

    writer = threading.Thread(target=lambda: client.stub.WriteInput(requests()), daemon=True)
    writer.start()
    first = _Follower(client, session_id, task_id)
    late: _Follower | None = None
    try:
        assert first.until(b"ready\n")
        for i in range(40):
            keys.put(f"<{i}>".encode())  # key by key, each echoed as it is read
            assert first.until(f"<{i}>".encode())
            if i == 20:
                late = _Follower(client, session_id, task_id)
        assert late is not None and late.until(b"<39>")
        expected = b"ready\n" + b"".join(f"<{i}>".encode() for i in range(40))
        assert first.data == expected and late.data == expected
        assert _contiguous(first.offsets) and _contiguous(late.offsets)
        _kill(client, session_id, task_id)
        first.to_end()
        late.to_end()
        assert first.data == late.data and _contiguous(late.offsets)
    finally:
        keys.put(None)
        first.cancel()
        if late is not None:
            late.cancel()


def test_a_stalled_follower_stalls_neither_the_task_nor_other_followers(
    client: Client, session_id: str
) -> None:
    size = 4 << 20
    command = f"stty raw -echo; head -c {size} /dev/zero | tr '\\0' x; echo; echo end-of-it"
    task_id = _start(client, session_id, "read go; " + command)
    stalled = client.stub.ReadOutput(
        pb.ReadOutputRequest(session_id=session_id, id=task_id, follow=True)
    )
    try:
        client.stub.WriteInput(
            iter([pb.TaskInput(session_id=session_id, task_id=task_id), pb.TaskInput(data=b"\n")])
        )
        first = next(stalled)  # it reads its first chunk, then nothing more
        reader = _Follower(client, session_id, task_id)
        assert reader.until(b"end-of-it", timeout=120)
        printed = reader.data.split(b"end-of-it")[0]
        assert printed.count(b"x") == size and _contiguous(reader.offsets)
        wait_until(
            lambda: (
                next(t.status for t in client.list_tasks(session_id) if t.id == task_id)
                == "completed"
            ),
            60,
        )
        reader.to_end()
        # Read on at last, it catches up from the file: everything, in order, to the end.
        chunks = [first, *stalled]
        assert chunks[-1].done
        assert _contiguous([(c.offset, len(c.data)) for c in chunks])
        assert b"".join(c.data for c in chunks).startswith(reader.data)
    finally:
        stalled.cancel()
