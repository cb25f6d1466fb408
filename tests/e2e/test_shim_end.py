"""A task's end reaches the daemon even when the shim's exit message does not."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path

from agentd.runs.shim import protocol
from agentd.runs.shim.client import ShimOutput, ShimRun


async def _ended_with(tmp_path: Path, recorded: dict | None) -> tuple[int, int]:
    out = tmp_path / "t.output"
    out.write_bytes(b"hello\n")
    task_dir = tmp_path / "shim"
    task_dir.mkdir(mode=0o700)
    if recorded is not None:
        (task_dir / protocol.STATUS_NAME).write_text(json.dumps(recorded))
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    run = ShimRun(ours, ShimOutput(str(out), os.open(out, os.O_RDWR)))
    run.make_task(str(task_dir))
    theirs.recv(protocol.MAX_MESSAGE)  # the "task" op
    theirs.send(json.dumps({"ev": "out", "size": 6, "total": 6, "line": "hello"}).encode())
    theirs.close()  # gone without its exit message (a daemon too busy to take it)
    code = await asyncio.wait_for(run.done, 10)
    return code, run.ended_ms


async def test_a_lost_exit_message_is_read_from_the_recorded_end(tmp_path: Path) -> None:
    end = {"ev": "exit", "code": 3, "killed": False, "ended_ms": 1234, "task": True}
    assert await _ended_with(tmp_path, end) == (3, 1234)


async def test_without_a_recorded_end_the_shim_vanished(tmp_path: Path) -> None:
    code, _ = await _ended_with(tmp_path, None)
    assert code == 137
