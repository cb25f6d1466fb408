"""`agentctl attach` shows a permission prompt and takes y / n / always from its terminal."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agentd_client import Client
from tests.support.daemon import DaemonProcess


def _read_until(fd: int, needle: bytes, timeout: float = 20) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{needle!r} not seen; got {seen[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise EOFError(seen)
            seen += chunk
    return seen


@pytest.mark.parametrize(
    ("answer", "allowed", "rule_added"),
    [("y", True, False), ("n", False, False), ("always", True, True)],
)
def test_attach_prompt_answers(
    daemon: DaemonProcess,
    client: Client,
    workspace: Path,
    answer: str,
    allowed: bool,
    rule_added: bool,
) -> None:
    sid = client.create_session(str(workspace), permission_mode="default").id
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentd_client.cli.main", "--socket", daemon.socket, "attach", sid],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    try:
        out = {}
        # agentctl is attached once it prints the session's first event; a Glob makes one.
        client.run_tool(sid, "Glob", {"pattern": "*"})
        _read_until(master, b"Glob")
        caller = threading.Thread(
            target=lambda: out.update(
                r=client.run_tool(sid, "Write", {"file_path": "w.txt", "content": "hi\n"})
            )
        )
        caller.start()
        _read_until(master, b"[y/N/a")
        os.write(master, answer.encode() + b"\n")
        caller.join(30)
        result = out["r"]
        assert result.is_error is not allowed, result.text
        assert (workspace / "w.txt").exists() is allowed
        rules = list(client.get_session(sid).allow_rules)
        assert bool(rules) is rule_added, rules
    finally:
        proc.terminate()
        proc.wait(10)
        os.close(master)
