"""Logs a person can keep (issue 18, item 4): whatever clients send, every log line is
bounded and holds no control characters, and a client that stops listening to a
stream is not an error.

1,000 hostile requests: long values full of newlines, terminal escapes and bidi marks
in every field the daemon might log (paths, names, ids, commands), and streams
cancelled while they wait.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from pathlib import Path

import grpc

from agentd_client import Client
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.daemon import start_daemon

REQUESTS = 1000
# A record starts with the daemon's time and level; the two lines it announces once it
# serves are for people, not records.
LINE_START = re.compile(
    r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (\w+) |agentd serving |agentd: next, )"
)
# Bytes a log line may hold, whatever a client sent.
MAX_LINE = 4096
HOSTILE = "\n2026-01-01 00:00:00 ERROR forged: line\x1b[31m\u202e\r" * 2000  # ~100 KB


def test_hostile_requests_leave_bounded_lines(tmp_path: Path, workspace: Path) -> None:
    daemon = start_daemon(tmp_path / "d")
    try:
        with Client(daemon.socket, timeout=60) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            calls = itertools.cycle(
                [
                    lambda: c.run_tool(sid, "Glob", {"pattern": "*", "path": "/x" + HOSTILE}),
                    lambda: c.run_tool(sid, "Read", {"file_path": HOSTILE}),
                    lambda: c.run_tool(sid, "LS", {"path": HOSTILE}),
                    lambda: c.run_tool(sid, HOSTILE, {}),
                    lambda: c.run_tool(sid, "Bash", {"command": "echo hi", "description": HOSTILE}),
                    lambda: c.create_session("/" + HOSTILE),
                    lambda: c.get_session(HOSTILE),
                    lambda: c.stub.Attach(pb.AttachRequest(session_id=HOSTILE), timeout=10).next(),
                    lambda: c.resolve_permission(sid, HOSTILE, "allow"),
                    lambda: c.cancel(sid, HOSTILE),
                ]
            )
            for call in itertools.islice(calls, REQUESTS - 20):
                with contextlib.suppress(grpc.RpcError):
                    call()
            # Streams whose callers go away while they wait: an expected end, not an error.
            for n in range(20):
                if n % 2:
                    stream = c.attach(sid)
                    assert stream.wait_attached()
                else:
                    stream = c.stream_tool(sid, "Bash", {"command": "sleep 30 & wait"})
                    next(iter(stream))  # the call runs: its first progress came
                stream.cancel()
            # And output followed while a command prints, its reader gone mid-stream.
            task = c.run_tool(
                sid,
                "Bash",
                {"command": "while :; do echo line; done", "run_in_background": True},
            ).data["backgroundTaskId"]
            for _ in range(5):
                stream = c.read_output(sid, task, follow=True)
                next(iter(stream))
                stream.cancel()
            c.status()  # the daemon still answers
    finally:
        assert daemon.stop() == 0, daemon.log
    lines = daemon.log_lines
    assert lines
    too_long = [len(line.encode()) for line in lines if len(line.encode()) > MAX_LINE]
    assert not too_long, f"{len(too_long)} lines over {MAX_LINE} bytes, longest {max(too_long)}"
    assert not any("\x1b" in line or "\u202e" in line for line in lines)
    # Each line is a record of its own: it starts with the daemon's time and level.
    records = [line for line in lines if LINE_START.match(line)]
    assert len(records) == len([line for line in lines if line.strip()]), lines[:5]
    errors = [line for line in records if LINE_START.match(line).group(1) == "ERROR"]  # type: ignore[union-attr]
    assert not errors, errors[:5]
    assert "Traceback" not in daemon.log
