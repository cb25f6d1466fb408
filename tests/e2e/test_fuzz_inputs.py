"""Odd inputs to every tool: each gets an answer, none crashes a tool or the daemon."""

from __future__ import annotations

import random
from pathlib import Path

from agentd_client import Client
from tests.support.daemon import DaemonProcess

# Values a confused model or a hostile client might send for any parameter.
ODD_VALUES = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2**63,
    1.5,
    -0.0,
    "",
    "x",
    "f.txt",
    "/etc/passwd",
    "../../..",
    "~",
    "~/x",
    "*",
    "**/*",
    "(",
    "\\",
    "a" * 5000,
    [],
    [1],
    ["x"],
    {},
    {"a": 1},
    "\u202e",
    "-rf",
    "--help",
    "$(id)",
    "f.txt\n",
    " ",
    ".",
    "..",
    "/",
    "/proc/self/mem",
    "/dev/zero",
    [{"old_string": "x", "new_string": "y"}],
]
# Tools that reach outside this machine or run commands are left to their own tests.
SKIPPED = {"Bash", "WebFetch"}


def test_odd_inputs_get_answers_not_crashes(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    (workspace / "f.txt").write_text("hello\nworld\n")
    sid = client.create_session(str(workspace), permission_mode="acceptEdits").id
    rnd = random.Random(20261122)
    tools = [t for t in client.list_tools() if t["name"] not in SKIPPED]
    for _ in range(400):
        tool = rnd.choice(tools)
        args = {
            name: rnd.choice(ODD_VALUES)
            for name in tool["input_schema"].get("properties", {})
            if rnd.random() < 0.7
        }
        r = client.run_tool(sid, tool["name"], args)
        assert "unexpectedly" not in r.text, (tool["name"], args, r.text)
    assert client.status().pid == daemon.proc.pid
    assert "Traceback" not in daemon.log
