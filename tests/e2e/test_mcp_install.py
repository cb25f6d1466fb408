"""`agentctl mcp install claude-code`: Claude Code's configuration, merged, and a server
entry that really serves the session's tools (checked with the official MCP client)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
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


async def test_a_context_is_pinned_with_the_config_that_defines_it(
    daemon: DaemonProcess, workspace: Path, tmp_path: Path
) -> None:
    """The current context (from a client config the MCP client's environment would not
    name) goes into the entry by name, with that config's path."""
    home = tmp_path / "home"
    config = tmp_path / "elsewhere" / "client.toml"
    env = {"HOME": str(home), "AGENTD_CLIENT_CONFIG": str(config)}
    added = ctl.run("context", "add", "box", "--socket", daemon.socket, "--use", env=env)
    assert added.returncode == 0, added.stderr
    r = ctl.run("mcp", "install", "claude-code", "--workspace", str(workspace), "--json", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["reachable"] is True and out["daemon"] == f"unix:{daemon.socket} (context box)"
    server = json.loads((home / ".claude.json").read_text())["projects"][str(workspace)][
        "mcpServers"
    ]["agentd"]
    assert server["args"] == ["--context", "box", "mcp", "--workspace", str(workspace)]
    assert server["env"] == {"AGENTD_CLIENT_CONFIG": str(config)}
    # Started as an MCP client starts it: its own environment, plus the entry's.
    params = StdioServerParameters(command=server["command"], args=server["args"],
                                   env=server["env"])  # fmt: skip
    async with mcp.Client(params) as m:
        assert not (await m.call_tool("LS", {"path": str(workspace)})).is_error


def test_an_address_is_pinned_with_absolute_files_and_a_dead_daemon_is_warned_of(
    workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    made = subprocess.run(
        [sys.executable, "-m", "agentd", "tls", "init", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    token = tmp_path / "token"
    env = {
        "HOME": str(home),
        "AGENTD_ADDRESS": "127.0.0.1:9",
        "AGENTD_CA": "ca.pem",
        "AGENTD_TOKEN_FILE": "token",
        "AGENTD_CLIENT_CONFIG": str(tmp_path / "none.toml"),
    }
    r = subprocess.run(
        [ctl.AGENTCTL, "mcp", "install", "codex", "--workspace", str(workspace)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, **env, "CODEX_HOME": str(tmp_path / "codex")},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    server = tomllib.loads((tmp_path / "codex" / "config.toml").read_text())["mcp_servers"]
    assert server["agentd"]["args"][:6] == [
        "--address", "127.0.0.1:9", "--token-file", str(token), "--ca", str(tmp_path / "ca.pem")
    ]  # fmt: skip
    warning = ctl.one_line(r.stderr)
    assert warning.startswith("agentctl: warning: ") and "127.0.0.1:9" in warning
