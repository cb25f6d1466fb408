"""Task output is bounded: head and tail kept, the middle dropped with a marker."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import task_finished, wait_for_event

BOUND = 1 << 20


@pytest.fixture(scope="module")
def small_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    base = tmp_path_factory.mktemp("bounded")
    config = base / "agentd.toml"
    config.write_text(f"task_output_bytes = {BOUND}\n")
    proc = start_daemon(base, ["--config", str(config)])
    yield proc
    assert proc.stop() == 0, proc.log


def test_background_output_keeps_head_and_tail_within_the_bound(
    small_daemon: DaemonProcess, workspace: Path
) -> None:
    with Client(small_daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        r = c.run_tool(
            sid,
            "Bash",
            {
                "command": "echo FIRST; head -c 10000000 /dev/zero | tr '\\0' x; echo; echo LAST",
                "run_in_background": True,
            },
        )
        task_id = r.data["backgroundTaskId"]
        wait_for_event(c, sid, task_finished(task_id))
        [task] = [t for t in c.list_tasks(sid) if t.id == task_id]
    size = os.path.getsize(task.output_path)
    assert size <= BOUND + 4096
    with open(task.output_path, "rb") as f:
        data = f.read()
    assert data.startswith(b"FIRST\nxxx")
    assert b"bytes of output dropped" in data
    assert data.endswith(b"x\nLAST\n\n[exited with code 0]\n")


def test_foreground_flood_returns_a_preview_and_keeps_the_bounded_file(
    small_daemon: DaemonProcess, workspace: Path
) -> None:
    with Client(small_daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        r = c.run_tool(sid, "Bash", {"command": "seq 1 2000000"})
    assert not r.is_error
    assert r.text.startswith("<persisted-output>\nOutput too large (")
    assert "Preview (first 2KB):\n1\n2\n3\n" in r.text
    assert len(r.text) < 40_000
    assert r.data["truncated"] is True
    saved = r.data["persistedOutputPath"]
    with open(saved, "rb") as f:
        f.seek(max(0, os.path.getsize(saved) - 64))
        assert b"1999999\n2000000\n" in f.read()
