"""A push over ssh travels encrypted past the daemon, unread: while protected refs
apply, the sandbox's ssh-agent signs only for a host the daemon's config allows (its
operator's decision), never by a session's rule or a person's answer. Real ssh and git
in a proxied sandbox against a real sshd on loopback (tests/credentials/ssh_world.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd_client import Client
from tests.credentials.ssh_world import SshWorld, ssh_command
from tests.network.support import GIT
from tests.support.daemon import start_daemon
from tests.support.waiting import wait_for_event

pytestmark = pytest.mark.timeout(300)


def bash(client: Client, sid: str, command: str) -> str:
    return client.run_tool(sid, "Bash", {"command": command, "timeout": 240_000}).text


def _config(world: SshWorld, path: Path, extra: str) -> Path:
    """The ssh world's daemon config with the default protected refs back."""
    text = world.config.read_text().replace("credential_protected_refs = []\n", "")
    path.write_text(text + extra)
    return path


def test_a_sessions_rule_does_not_sign_while_protected_refs_apply(
    ssh_world: SshWorld, net_workspace: Path, tmp_path: Path
) -> None:
    host = f"{GIT}:{ssh_world.git_port}"
    clone = f"GIT_SSH_COMMAND={ssh_command(None)} git clone -q ssh://root@{host}{ssh_world.repo}"
    config = _config(ssh_world, tmp_path / "config.toml", "")
    daemon = start_daemon(tmp_path / "d", ["--config", str(config)])
    try:
        with Client(daemon.socket, timeout=240) as client:
            sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
            client.update_permissions(sid, allow=[f"SshAgent({host})"])
            out = bash(client, sid, f"{clone} one; ls one 2>&1")
            assert "Permission denied (publickey)" in out and "No such file" in out, out
            refused = wait_for_event(
                client,
                sid,
                lambda e: (
                    e.HasField("permission_decided")
                    and e.permission_decided.tool_name == "SshAgent"
                    and e.permission_decided.behavior == "deny"
                ),
            ).permission_decided
            assert "cannot read a push over ssh" in refused.reason, refused
            assert f'allow_rules = ["SshAgent({host})"]' in refused.reason, refused
    finally:
        assert daemon.stop() == 0, daemon.log


def test_the_daemons_config_allows_a_host_explicitly(
    ssh_world: SshWorld, net_workspace: Path, tmp_path: Path
) -> None:
    host = f"{GIT}:{ssh_world.git_port}"
    clone = f"GIT_SSH_COMMAND={ssh_command(None)} git clone -q ssh://root@{host}{ssh_world.repo}"
    config = _config(ssh_world, tmp_path / "config.toml", f'allow_rules = ["SshAgent({host})"]\n')
    daemon = start_daemon(tmp_path / "d", ["--config", str(config)])
    try:
        with Client(daemon.socket, timeout=240) as client:
            sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
            out = bash(client, sid, f"{clone} two && cat two/MARKER")
            assert "MARKER-SSH-AGENT" in out, out
    finally:
        assert daemon.stop() == 0, daemon.log
