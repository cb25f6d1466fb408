"""Real Claude Code running its tool calls through agentd, offline, against the fake API.

Needs the Claude Code CLI, which `make test` installs into ~/.cache/agentd/claude-code
(or CLAUDE_BIN); skipped without it. `agentctl mcp install claude-code` writes what
makes Claude Code use agentd's tools instead of its own (agentd_client/claude_code.py
says what and why); `claude --tools ""` then runs the scripted Bash call in the
session's sandbox, and its result reaches the fake API.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentd_client import Client
from agentd_client.core import structs
from tests.support import ctl, data
from tests.support.daemon import DaemonProcess
from tests.support.data import claude_code_bin

FAKE_API = data.FAKE_API


CLAUDE = claude_code_bin()
pytestmark = pytest.mark.skipif(CLAUDE is None, reason="Claude Code CLI not installed")


def test_claude_code_runs_a_sandboxed_bash_through_agentd(
    daemon: DaemonProcess, client: Client, workspace: Path, tmp_path: Path
) -> None:
    assert CLAUDE is not None
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    home = tmp_path / "home"
    started = time.monotonic()
    install = ctl.run(
        "--socket", daemon.socket, "mcp", "install", "claude-code",
        "--workspace", str(workspace), "--session", sid, env={"HOME": str(home)},
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    command = "echo via-agentd > proof.txt; cat proof.txt"
    script = tmp_path / "script.json"
    script.write_text(json.dumps([[{"name": "mcp__agentd__Bash", "input": {"command": command}}]]))
    record = tmp_path / "record.jsonl"
    api = subprocess.Popen(
        [sys.executable, str(FAKE_API), "--script", str(script), "--record", str(record)]
        + ["--main-tool", "mcp__agentd__Bash"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert api.stdout is not None
        port = int(api.stdout.readline().split()[1])
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "IS_SANDBOX": "1",
            # Claude Code gives an MCP server 30 s to start by default; agentctl's import
            # of grpc alone can take most of that on a loaded machine.
            "MCP_TIMEOUT": "120000",
        }
        run = subprocess.run(
            [CLAUDE, "-p", "go", "--output-format", "stream-json", "--verbose", "--tools", ""],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    finally:
        api.terminate()
        api.wait(10)
    took = time.monotonic() - started
    assert run.returncode == 0, run.stderr
    print(f"from agentctl mcp install to the Bash result at the fake API: {took:.1f}s")
    init = next(json.loads(x) for x in run.stdout.splitlines() if '"subtype":"init"' in x)
    assert init["tools"], "agentd's MCP server did not connect"
    assert all(t.startswith("mcp__agentd__") for t in init["tools"]), init["tools"]
    results = [json.loads(x) for x in record.read_text().splitlines()]
    assert results[0]["tool_use_id"] == "toolu_oracle_0001" and not results[0]["is_error"]
    assert "via-agentd" in json.dumps(results[0]["content"])
    assert (workspace / "proof.txt").read_text() == "via-agentd\n"
    assert sorted(p.name for p in workspace.iterdir()) == ["proof.txt"]  # nothing else written
    # It ran in the session: the daemon journaled it.
    stream = client.attach(sid, 0)
    first = next(e for e in stream if e.HasField("call_started"))
    stream.cancel()
    assert first.call_started.name == "Bash"
    assert structs.from_struct(first.call_started.input)["command"] == command
