"""`agentctl mcp install claude-code`: Claude Code's configuration, merged, and a server
entry that really serves the session's tools (checked with the official MCP client)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import mcp
from mcp.client.stdio import StdioServerParameters

from agentd_client import Client
from tests.support import ctl
from tests.support.daemon import DaemonProcess


def _install(daemon: DaemonProcess, home: Path, *argv: str):
    return ctl.run(
        "--socket", daemon.socket, "mcp", "install", "claude-code", *argv, "--json",
        env={"HOME": str(home)},
    )  # fmt: skip


def test_install_merges_and_keeps_what_was_there(
    daemon: DaemonProcess, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude.json").write_text(
        json.dumps({"numStartups": 7, "projects": {"/other": {"allowedTools": ["x"]}}})
    )
    (home / ".claude" / "settings.json").write_text(
        json.dumps({"env": {"KEEP": "1"}, "permissions": {"allow": ["Bash(ls:*)"]}})
    )
    for _ in range(2):  # twice: the same result, nothing doubled
        r = _install(daemon, home, "--workspace", str(workspace), "--session", "web")
        assert r.returncode == 0, r.stderr
    state = json.loads((home / ".claude.json").read_text())
    assert state["numStartups"] == 7 and state["projects"]["/other"] == {"allowedTools": ["x"]}
    server = state["projects"][str(workspace)]["mcpServers"]["agentd"]
    assert server["args"] == ["--socket", daemon.socket, "mcp", "--session", "web"]
    assert os.access(server["command"], os.X_OK)
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings["permissions"]["allow"] == ["Bash(ls:*)", "mcp__agentd"]
    assert settings["env"] == {
        "KEEP": "1",
        "ENABLE_TOOL_SEARCH": "false",
        "MCP_CONNECTION_NONBLOCKING": "false",
    }
    assert json.loads(r.stdout)["run"] == 'claude --tools ""'
    assert list(workspace.iterdir()) == []  # nothing written into the workspace


def test_a_config_it_cannot_read_is_refused_and_left_alone(
    daemon: DaemonProcess, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude.json").write_text("{not json")
    r = _install(daemon, home, "--workspace", str(workspace))
    assert r.returncode == 3
    assert ".claude.json" in json.loads(ctl.one_line(r.stderr))["error"]
    assert (home / ".claude.json").read_text() == "{not json"
    assert not (home / ".claude").exists()


async def test_the_installed_entry_serves_the_workspace(
    daemon: DaemonProcess, client: Client, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    r = _install(daemon, home, "--workspace", str(workspace))
    assert r.returncode == 0, r.stderr
    entry = json.loads((home / ".claude.json").read_text())["projects"][str(workspace)]
    server = entry["mcpServers"]["agentd"]
    (workspace / "seen.txt").write_text("seen\n")
    params = StdioServerParameters(command=server["command"], args=server["args"])
    async with mcp.Client(params) as m:
        ls = await m.call_tool("LS", {"path": str(workspace)})
        assert not ls.is_error and "seen.txt" in ls.content[0].text
        made = [s for s in client.list_sessions() if s.workspace_roots == [str(workspace)]]
        assert len(made) == 1
    assert client.get_session(made[0].id).closed
