"""agentd/runs/shim/client.py with the real shim (supervisor.py, through its forkserver)
and the real sandbox, no daemon: a run's output and end, kill, the wall limit, a task
that records its end and takes a new controller, and what a shim sends checked as
untrusted input."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.runs.shim import client, protocol, spawn
from agentd_sandbox import Limits, SandboxPolicy
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the shim's sandbox needs root")


def _policy(wall: float = 60) -> SandboxPolicy:
    return SandboxPolicy(writable=[], cwd="/", limits=Limits(wall_seconds=wall))


@pytest.fixture
def output(tmp_path: Path) -> Iterator[tuple[str, int]]:
    path = str(tmp_path / "run.output")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    yield path, fd
    os.close(fd)


_FORKSERVER = spawn.Forkserver()


@pytest.fixture(scope="module", autouse=True)
def forkserver() -> Iterator[spawn.Forkserver]:
    """One warm forkserver for the module's runs, as the daemon keeps one."""
    _FORKSERVER.start()
    yield _FORKSERVER
    _FORKSERVER.close()


async def _spawn(
    output: tuple[str, int], script: str, wall: float = 60, stdin: bool = False
) -> client.ShimRun:
    path, fd = output
    argv = ["sh", "-c", script]
    run = await spawn.spawn(_FORKSERVER, _policy(wall), argv, path, fd, 1 << 20, stdin=stdin)
    if run is None:
        pytest.skip("this machine's sandbox chain cannot run under a shim (no setpriv)")
    return run


async def test_a_run_ends_with_its_code_and_its_output(output: tuple[str, int]) -> None:
    run = await _spawn(output, "echo hello; echo there >&2; exit 3")
    assert await asyncio.wait_for(run.done, 60) == 3
    assert run.exit_code == 3 and not run.killed
    assert run.output.done
    assert b"hello" in run.output.head and b"there" in run.output.head
    assert run.output.tail_bytes().endswith(b"there\n")
    assert run.ended_ms > 0


async def test_kill_ends_the_run(output: tuple[str, int]) -> None:
    run = await _spawn(output, "echo started; exec sleep 600")
    await asyncio.wait_for(_until_output(run, b"started"), 60)
    run.kill()
    code = await asyncio.wait_for(run.done, 60)
    assert run.killed and code == 137


async def test_the_wall_limit_kills_it(output: tuple[str, int]) -> None:
    run = await _spawn(output, "exec sleep 600", wall=1)
    assert await asyncio.wait_for(run.done, 60) == 137
    assert run.killed


async def test_a_task_records_its_end_and_takes_a_new_controller(
    output: tuple[str, int], tmp_path: Path
) -> None:
    task_dir = tmp_path / "task"
    task_dir.mkdir(mode=0o700)
    # It waits on its stdin (a pipe the shim holds) until the new controller closes it.
    run = await _spawn(output, "read line; echo got $line; exit 5", stdin=True)
    run.make_task(str(task_dir))
    await asyncio.to_thread(wait_until, lambda: (task_dir / protocol.SHIM_NAME).exists(), 60)
    run.detach()  # the daemon goes; the task lives on
    dir_fd = os.open(task_dir, os.O_PATH | os.O_DIRECTORY)
    try:
        sock = await client.reconnect(str(task_dir), dir_fd)
        assert sock is not None, "the task's shim did not answer on its socket"
        info = protocol.read_json(dir_fd, protocol.SHIM_NAME)
        assert info is not None and info["start"] == protocol.start_time(info["pid"])
        again = client.ShimRun(sock, client.ShimOutput(output[0], os.dup(output[1])))
        again.set_terminal(None, True)
        again.close_input()  # `read` gets end of file
        assert await asyncio.wait_for(again.done, 60) == 5
        status = protocol.read_json(dir_fd, protocol.STATUS_NAME)
        assert status is not None and status["code"] == 5 and status["task"] is True
    finally:
        os.close(dir_fd)


async def test_what_a_shim_sends_is_checked() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fd = os.memfd_create("out")
    os.write(fd, b"abc")
    run = client.ShimRun(ours, client.ShimOutput("/x/id.output", fd))
    for junk in (b"not json", b"[]", b'{"no": "ev"}', b'{"ev": "out", "size": "big"}'):
        theirs.send(junk)
    theirs.send(json.dumps({"ev": "out", "size": 3, "total": 3, "line": "abc"}).encode())
    theirs.send(json.dumps({"ev": "exit", "code": "zero", "killed": 1}).encode())
    code = await asyncio.wait_for(run.done, 10)
    assert code == 137  # an end without an int code reads as a shim that vanished
    assert run.killed
    assert run.output.last_line == "abc" and run.output.size == 3
    theirs.close()


async def test_a_shim_that_vanishes_is_137() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fd = os.memfd_create("out")
    os.write(fd, b"partial")
    run = client.ShimRun(ours, client.ShimOutput("/x/id.output", fd))
    theirs.close()
    assert await asyncio.wait_for(run.done, 10) == 137
    assert run.output.done and run.output.head == b"partial"


async def test_a_shim_that_ends_with_an_op_unread_still_tells_its_end(tmp_path: Path) -> None:
    """A command that ends as the daemon makes it a task: the shim sends its exit and
    exits with the "task" op unread. The kernel then reports a reset before the exit
    message; the end is still the shim's, and the task's end line is written."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fd = os.memfd_create("out")
    os.write(fd, b"quick\n")
    run = client.ShimRun(ours, client.ShimOutput("/x/id.output", fd))
    run.make_task(str(tmp_path))  # never read by the shim
    end = {"ev": "exit", "code": 2, "task": False, "size": 6, "total": 6, "written": 6}
    theirs.send(json.dumps(end).encode())
    theirs.close()
    assert await asyncio.wait_for(run.done, 10) == 2
    run.output.finish(2)
    assert os.pread(fd, 100, 0) == b"quick\n\n[exited with code 2]\n"


def test_kill_stray_never_kills_a_reused_pid(tmp_path: Path) -> None:
    dir_fd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        # This very process, with another start time: a pid reused since.
        mine = {"pid": os.getpid(), "start": protocol.start_time(os.getpid()) + 1}
        protocol.write_json(dir_fd, protocol.SHIM_NAME, mine)
        client.kill_stray(dir_fd)  # would kill the test if it trusted the pid alone
        assert protocol.read_json(dir_fd, "missing.json") is None
        (tmp_path / "bad.json").write_text("[1, 2]")
        assert protocol.read_json(dir_fd, "bad.json") is None
    finally:
        os.close(dir_fd)


async def _until_output(run: client.ShimRun, text: bytes) -> None:
    """Woken by each update the shim sends of how far the file is written."""
    while text not in run.output.head:
        await run.output.changed()
