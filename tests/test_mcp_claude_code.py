"""Real Claude Code running its tool calls through `agentctl mcp`, offline, against the fake API.

Needs the Claude Code CLI (`npm install --prefix .oracle @anthropic-ai/claude-code`,
or CLAUDE_BIN); skipped without it. What makes Claude Code (2.1.328) use agentd's
tools *instead of* its own, found by running it, written only into the user's own
configuration -- nothing into the workspace, whose files may be hostile:

- the server in `~/.claude.json` under `projects[WS].mcpServers` (Claude Code's
  "local" scope: it needs no approval, unlike a workspace's `.mcp.json`, which also
  needs `enabledMcpjsonServers` and, for its settings' allow rules, a trusted
  workspace -- both would widen what a hostile repository's files can do);
- in `~/.claude/settings.json`, `env`: `ENABLE_TOOL_SEARCH=false`, else MCP tools hide
  behind ToolSearch, and `MCP_CONNECTION_NONBLOCKING=false`, else the first request
  goes out while the server is still "pending"; and `permissions.allow:
  ["mcp__agentd"]`, so agentd (not Claude Code) decides what asks;
- the built-ins go with `claude --tools ""`: a deny rule `Bash` in settings also
  denies `mcp__agentd__Bash`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentd_client import Client
from tests.daemon import DaemonProcess

ROOT = Path(__file__).resolve().parent.parent
FAKE_API = Path(__file__).parent / "data" / "oracle" / "fake_api.py"


def _claude() -> str | None:
    for candidate in (
        os.environ.get("CLAUDE_BIN"),
        shutil.which("claude"),
        str(ROOT / ".oracle" / "node_modules" / ".bin" / "claude"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


CLAUDE = _claude()
pytestmark = pytest.mark.skipif(CLAUDE is None, reason="Claude Code CLI not installed")


def _configure(workspace: Path, home: Path, server: dict) -> None:
    local = {"projects": {str(workspace): {"mcpServers": {"agentd": server}}}}
    (home / ".claude.json").write_text(json.dumps(local))
    (home / ".claude").mkdir()
    settings = {
        "env": {"ENABLE_TOOL_SEARCH": "false", "MCP_CONNECTION_NONBLOCKING": "false"},
        "permissions": {"allow": ["mcp__agentd"]},
    }
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))


def test_claude_code_runs_a_sandboxed_bash_through_agentd(
    daemon: DaemonProcess, client: Client, workspace: Path, tmp_path: Path
) -> None:
    assert CLAUDE is not None
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    home = tmp_path / "home"
    home.mkdir()
    agentctl = str(Path(sys.executable).parent / "agentctl")
    _configure(
        workspace,
        home,
        {"command": agentctl, "args": ["--socket", daemon.socket, "mcp", "-s", sid]},
    )
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
    assert run.returncode == 0, run.stderr
    init = next(json.loads(x) for x in run.stdout.splitlines() if '"subtype":"init"' in x)
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
    assert first.call_started.name == "Bash" and command in first.call_started.input_json
