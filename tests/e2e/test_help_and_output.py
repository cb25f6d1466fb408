"""What agentctl says to a person: flags described with their choices, human text
without --json, a near miss of a tool's name named, obvious aliases taken, running tasks
not killed by a plain `session close`, a header before attach's first event."""

from __future__ import annotations

import json
from pathlib import Path

from agentd_client import Client
from tests.support import ctl
from tests.support.daemon import DaemonProcess


def test_perms_help_describes_its_flags_and_choices() -> None:
    r = ctl.run("perms", "--help")
    assert r.returncode == 0
    assert "{default,acceptEdits,plan,bypassPermissions,dontAsk}" in r.stdout, r.stdout
    for words in ("add an allow rule", "add a deny rule", "always asks"):
        assert words in r.stdout, (words, r.stdout)
    bad = ctl.run("perms", "--mode", "nope", "-s", "x")
    assert bad.returncode == 64 and "invalid choice" in ctl.one_line(bad.stderr)


def test_perms_prints_text_and_json_only_when_asked(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), name="perms-text").id
    r = ctl.run("--socket", daemon.socket, "perms", "-s", sid, "--allow", "Bash(ls:*)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("session perms-text: mode default"), r.stdout
    assert "allow: Bash(ls:*)" in r.stdout and "{" not in r.stdout
    j = ctl.run("--socket", daemon.socket, "perms", "-s", sid, "--json")
    assert json.loads(j.stdout)["allow"] == ["Bash(ls:*)"]


def test_a_tool_name_in_the_wrong_case_is_named(daemon: DaemonProcess, session_id: str) -> None:
    r = ctl.run("--socket", daemon.socket, "call", "-s", session_id, "bash", '{"command": "true"}')
    assert r.returncode == 1
    assert "did you mean Bash?" in r.stderr, r.stderr


def test_mcp_install_takes_the_obvious_names(tmp_path: Path, workspace: Path) -> None:
    env = {"HOME": str(tmp_path), "AGENTD_CLIENT_CONFIG": str(tmp_path / "client.toml")}
    for alias in ("claude", "cc", "Claude-Code"):
        r = ctl.run("mcp", "install", alias, "--workspace", str(workspace), "--json", env=env)
        assert r.returncode == 0, (alias, r.stderr)
        assert json.loads(r.stdout)["client"] == "claude-code", r.stdout
    wrong = ctl.run("mcp", "install", "cursorx", "--workspace", str(workspace), env=env)
    assert wrong.returncode == 64 and "claude-code" in ctl.one_line(wrong.stderr)


def test_session_close_keeps_running_tasks_without_force(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    client.run_tool(sid, "Bash", {"command": "sleep 600.731", "run_in_background": True})
    r = ctl.run("--socket", daemon.socket, "session", "close", sid)
    assert r.returncode == 3 and "running task" in r.stderr and "--force" in r.stderr, r.stderr
    assert not client.get_session(sid).closed
    forced = ctl.run("--socket", daemon.socket, "session", "close", "-f", sid)
    assert forced.returncode == 0, forced.stderr
    assert client.get_session(sid).closed


def test_attach_says_where_it_is_before_any_event(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), name="quiet-one").id
    client.close_session(sid)
    r = ctl.run("--socket", daemon.socket, "attach", sid)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("attached to session quiet-one (") and "closed" in first, first


def test_client_status_is_a_typed_object(daemon: DaemonProcess, client: Client) -> None:
    from agentd_client import Status

    st = client.status()
    assert isinstance(st, Status) and st.pid == daemon.proc.pid
    assert st.state is not None and st.state.used_bytes >= 0
    assert repr(st).startswith("Status(version=")  # readable, not a protobuf dump
    shown = json.loads(ctl.run("--socket", daemon.socket, "status", "--json").stdout)
    assert shown["pid"] == daemon.proc.pid and isinstance(shown["state"]["max_bytes"], int)
