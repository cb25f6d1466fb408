"""One host key, several names: a decision about any name the known_hosts file gives
the key holds for all of them. Real ssh and git in a proxied sandbox, a real sshd on
loopback (tests/credentials/ssh_world.py) known as git.test and as npm.test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentd_client import Client
from tests.credentials.ssh_world import SshWorld, ssh_command
from tests.network.support import GIT, NPM
from tests.support.daemon import start_daemon
from tests.support.waiting import wait_for_event

pytestmark = pytest.mark.timeout(300)


def bash(client: Client, sid: str, command: str) -> str:
    return client.run_tool(sid, "Bash", {"command": command, "timeout": 240_000}).text


def test_a_deny_of_another_name_of_the_host_key_wins(
    ssh_world: SshWorld, net_workspace: Path, tmp_path: Path
) -> None:
    """git.test is allowed and npm.test, the same server's other name, is denied: a
    login by way of git.test gets no signature (before: the first name decided)."""
    port = ssh_world.git_port
    key = ssh_world.known_hosts_line.split(maxsplit=1)[1]
    text = ssh_world.config.read_text()
    known = Path(re.search(r'ssh_agent_known_hosts = "([^"]+)"', text)[1])  # type: ignore[index]
    both = tmp_path / "known_hosts"
    both.write_text(known.read_text() + f"[{NPM}]:{port} {key}\n")
    config = tmp_path / "config.toml"
    config.write_text(
        text.replace(
            f'ssh_agent_hosts = ["{GIT}:{port}"',
            f'ssh_agent_hosts = ["{GIT}:{port}", "{NPM}:{port}"',
        ).replace(str(known), str(both))
    )
    daemon = start_daemon(tmp_path / "d", ["--config", str(config)])
    url = f"ssh://root@{GIT}:{port}{ssh_world.repo}"
    clone = f"GIT_SSH_COMMAND={ssh_command(None)} git clone -q {url}"
    try:
        with Client(daemon.socket, timeout=240) as client:
            allowed = client.create_session(str(net_workspace), permission_mode="bypassPermissions")
            client.update_permissions(allowed.id, allow=[f"SshAgent({GIT}:{port})"])
            out = bash(client, allowed.id, f"{clone} one && cat one/MARKER")
            assert "MARKER-SSH-AGENT" in out, out  # the control: git.test alone signs
            denied = client.create_session(str(net_workspace), permission_mode="bypassPermissions")
            client.update_permissions(
                denied.id, allow=[f"SshAgent({GIT}:{port})"], deny=[f"SshAgent({NPM}:{port})"]
            )
            out = bash(client, denied.id, f"{clone} two; ls two 2>&1")
            assert "Permission denied (publickey)" in out and "No such file" in out, out
            refused = wait_for_event(
                client,
                denied.id,
                lambda e: (
                    e.HasField("permission_decided")
                    and e.permission_decided.tool_name == "SshAgent"
                    and e.permission_decided.behavior == "deny"
                ),
            ).permission_decided
            assert f"{NPM}:{port}" in refused.reason and "also" in refused.reason, refused
    finally:
        assert daemon.stop() == 0, daemon.log
