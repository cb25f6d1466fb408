"""`git` over ssh inside a proxied sandbox that holds no key: the session's ssh-agent
(the daemon's, at $SSH_AUTH_SOCK) signs with the owner's agent's key or the daemon's
key file, after a person allowed that key for that host; real ssh, real git, a real
openssh-server on loopback (tests/credentials/ssh_world.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentd.credentials.ssh_agent_rules import ssh_rule_spec
from agentd_client import Client
from tests.credentials.ssh_world import SshWorld, Terminal, ssh_command
from tests.network.support import GIT
from tests.support.waiting import wait_for_event

pytestmark = pytest.mark.timeout(300)
SANDBOX_UID = 65534


def fingerprint(pub: str) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-f", "-"], input=pub, capture_output=True, text=True, check=True
    )
    return out.stdout.split()[1]


def agent_log(world: SshWorld) -> list[str]:
    return [line for line in world.daemon.log_lines if "ssh-agent" in line]


def bash(client: Client, sid: str, command: str) -> str:
    return client.run_tool(sid, "Bash", {"command": command, "timeout": 240_000}).text


def prepare(world: SshWorld, workspace: Path) -> None:
    """What a client in the sandbox may know: the host's public key and the public
    halves of the keys (to pick one); nothing private."""
    (workspace / "known_hosts").write_text(world.known_hosts_line + "\n")
    (workspace / "owner.pub").write_text(world.owner_pub + "\n")
    (workspace / "daemon_key.pub").write_text(world.file_pub + "\n")
    (workspace / "daemon_rsa.pub").write_text(world.rsa_pub + "\n")


def test_git_clone_and_push_over_ssh_with_no_key_in_the_sandbox(
    ssh_world: SshWorld, net_workspace: Path
):
    """git's own ssh command as the sandbox has it: the proxy, and the configured hosts'
    keys as its global known_hosts; the agent's first key (the owner's agent comes
    after the daemon's key files, so the owner's key is picked by its public half)."""
    prepare(ssh_world, net_workspace)
    url = f"ssh://root@{GIT}:{ssh_world.git_port}{ssh_world.repo}"
    ssh = (
        '"$GIT_SSH_COMMAND -o BatchMode=yes -o StrictHostKeyChecking=yes '
        f'-o IdentitiesOnly=yes -i {net_workspace}/owner.pub"'
    )
    with Client(ssh_world.daemon.socket, timeout=240) as client:
        sid = client.create_session(str(net_workspace)).id
        term = Terminal(client, sid, ("allow", "always"))
        try:
            out = bash(
                client,
                sid,
                'echo "agent=$SSH_AUTH_SOCK"; ls -A ~/.ssh 2>&1 | head -1; '
                f"GIT_SSH_COMMAND={ssh} git clone -q {url} work && cat work/MARKER && cd work && "
                "echo pushed > PUSHED && git add PUSHED && "
                "git -c user.name=agent -c user.email=agent@example.com commit -qm pushed && "
                f"GIT_SSH_COMMAND={ssh} git push -q origin HEAD && echo PUSH-DONE",
            )
        finally:
            term.close()
        assert "agent=/run/agentd-ssh/agent.sock" in out, out
        assert "MARKER-SSH-AGENT" in out and "PUSH-DONE" in out, "\n".join(
            [*agent_log(ssh_world), out]
        )
        # The push reached the repository on the host.
        log = subprocess.run(
            ["git", "-C", str(ssh_world.repo), "log", "--format=%s", "-1"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert log.stdout.strip() == "pushed"
        # Asked once (clone), "always" remembered for the push: host and key shown.
        (asked,) = term.asked
        owner_fp = fingerprint(ssh_world.owner_pub)
        assert asked.input["host"] == f"{GIT}:{ssh_world.git_port}"
        assert asked.input["key"] == owner_fp and asked.input["user"] == "root"
        # Each signature is an event: host, key, who allowed.
        signed = wait_for_event(
            client,
            sid,
            lambda e: (
                e.HasField("permission_decided")
                and e.permission_decided.tool_name == "SshAgent"
                and e.permission_decided.behavior == "allow"
            ),
        ).permission_decided
        assert f"root@{GIT}:{ssh_world.git_port}" in signed.reason and owner_fp in signed.reason
        assert "(always)" in signed.decided_by, signed
        # "always" is a rule of the session's, kept with it.
        rule = f"SshAgent({GIT}:{ssh_world.git_port} {owner_fp})"
        assert rule in client.get_session(sid).allow_rules
    # `agentctl credentials` shows the agent: hosts, the daemon's key files by fingerprint
    # and path, the owner's agent, and this session's use; never a private key.
    shown = subprocess.run(
        [sys.executable, "-m", "agentd_client.cli.main", "--socket", ssh_world.daemon.socket]
        + ["credentials", "--json"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    agent = json.loads(shown)["ssh_agent"]
    assert agent["enabled"] and f"{GIT}:{ssh_world.git_port}" in " ".join(agent["hosts"])
    assert ssh_world.key_file in [k["source"] for k in agent["keys"]]
    assert agent["upstream"] == ssh_world.owner_agent
    [use] = [u for u in agent["uses"] if u["session_id"] == sid]
    assert use["key"] == owner_fp and int(use["signatures"]) >= 2, use  # clone and push
    assert "PRIVATE KEY" not in shown
    text = subprocess.run(
        [sys.executable, "-m", "agentd_client.cli.main", "--socket", ssh_world.daemon.socket]
        + ["credentials"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert f"session {sid}: {GIT}:{ssh_world.git_port} with {owner_fp}" in text, text


def test_the_daemons_key_file_signs_once_per_answer_and_nobody_attached_refuses(
    ssh_world: SshWorld, net_workspace: Path
):
    prepare(ssh_world, net_workspace)
    url = f"ssh://root@{GIT}:{ssh_world.git_port}{ssh_world.repo}"
    clone = f"GIT_SSH_COMMAND={ssh_command(net_workspace, 'daemon_key.pub')} git clone -q {url}"
    with Client(ssh_world.daemon.socket, timeout=240) as client:
        sid = client.create_session(str(net_workspace)).id
        client.update_permissions(sid, allow=["Bash"])
        term = Terminal(client, sid, ("allow", "once"))
        try:
            out = bash(client, sid, f"{clone} one && cat one/MARKER")
        finally:
            term.close()
        assert "MARKER-SSH-AGENT" in out, out
        (asked,) = term.asked
        assert asked.input["key"] == fingerprint(ssh_world.file_pub)
        # "once": the next login asks again, and with nobody attached it is refused.
        out = bash(client, sid, f"{clone} two; ls two 2>&1")
        assert "Permission denied (publickey)" in out and "No such file" in out, out


def test_a_person_who_refuses_keeps_the_key_unused(ssh_world: SshWorld, net_workspace: Path):
    prepare(ssh_world, net_workspace)
    url = f"ssh://root@{GIT}:{ssh_world.git_port}{ssh_world.repo}"
    with Client(ssh_world.daemon.socket, timeout=240) as client:
        sid = client.create_session(str(net_workspace)).id
        client.update_permissions(sid, allow=["Bash"])
        term = Terminal(client, sid, ("deny", "once"))
        try:
            out = bash(
                client, sid, f"GIT_SSH_COMMAND={ssh_command(net_workspace)} git clone -q {url} nope"
            )
        finally:
            term.close()
        assert "Permission denied (publickey)" in out, out
        assert term.asked, "the first use of a key asks"
        refused = wait_for_event(
            client,
            sid,
            lambda e: (
                e.HasField("permission_decided")
                and e.permission_decided.tool_name == "SshAgent"
                and e.permission_decided.behavior == "deny"
            ),
        ).permission_decided
        assert "refused by" in refused.reason, refused


def test_an_rsa_key_file_signs_with_sha2(ssh_world: SshWorld, net_workspace: Path):
    """ssh asks RSA signatures with rsa-sha2-512/256 (the sign request's flags); sshd
    accepts no other by default."""
    prepare(ssh_world, net_workspace)
    url = f"ssh://root@{GIT}:{ssh_world.git_port}{ssh_world.repo}"
    ssh = ssh_command(net_workspace, "daemon_rsa.pub")
    with Client(ssh_world.daemon.socket, timeout=240) as client:
        sid = client.create_session(str(net_workspace)).id
        client.update_permissions(sid, allow=["Bash"])
        term = Terminal(client, sid, ("allow", "once"))
        try:
            out = bash(
                client, sid, f"GIT_SSH_COMMAND={ssh} git clone -q {url} rsa && cat rsa/MARKER"
            )
        finally:
            term.close()
        assert "MARKER-SSH-AGENT" in out, "\n".join([*agent_log(ssh_world), out])
        (asked,) = term.asked
        assert asked.input["key"] == fingerprint(ssh_world.rsa_pub)


def test_rules_of_the_session_allow_without_asking_and_deny_before_asking(
    ssh_world: SshWorld, net_workspace: Path
):
    """A session's client (or the daemon's config) may allow a host for the agent up
    front, so automation in bypassPermissions logs in; a deny rule wins over a yes."""
    prepare(ssh_world, net_workspace)
    host = f"{GIT}:{ssh_world.git_port}"
    url = f"ssh://root@{host}{ssh_world.repo}"
    clone = f"GIT_SSH_COMMAND={ssh_command(None)} git clone -q {url}"
    with Client(ssh_world.daemon.socket, timeout=240) as client:
        sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
        client.update_permissions(sid, allow=[f"SshAgent({host})"])
        out = bash(client, sid, f"{clone} allowed && cat allowed/MARKER")
        assert "MARKER-SSH-AGENT" in out, "\n".join([*agent_log(ssh_world), out])
        denied = client.create_session(str(net_workspace)).id
        client.update_permissions(denied, allow=["Bash"], deny=[f"SshAgent({host.upper()})"])
        term = Terminal(client, denied, ("allow", "always"))
        try:
            out = bash(client, denied, f"{clone} denied")
        finally:
            term.close()
        assert "Permission denied (publickey)" in out and not term.asked, out


@pytest.mark.parametrize(
    ("rule", "spec"),
    [
        ("SshAgent(Git.Example.com)", "git.example.com"),
        ("SshAgent(git.example.com:22)", "git.example.com"),
        ("SshAgent(git.example.com:2222  SHA256:AbC)", "git.example.com:2222 SHA256:AbC"),
        ("WebFetch(domain:git.example.com)", None),
        ("SshAgent", None),
    ],
)
def test_ssh_agent_rules_name_a_host_and_maybe_a_key(rule: str, spec: str | None):
    assert ssh_rule_spec(rule) == spec


def test_agent_forwarding_gives_the_remote_host_nothing(ssh_world: SshWorld, net_workspace: Path):
    """`ssh -A`: ssh binds the forwarded agent's connection with is_forwarding set; the
    agent refuses it, and the remote host lists no key (ssh-add -l there fails)."""
    prepare(ssh_world, net_workspace)
    host = f"{GIT}:{ssh_world.git_port}"
    with Client(ssh_world.daemon.socket, timeout=240) as client:
        sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
        client.update_permissions(sid, allow=[f"SshAgent({host})"])
        out = bash(
            client,
            sid,
            f'eval "$GIT_SSH_COMMAND -A -o BatchMode=yes -p {ssh_world.git_port} root@{GIT} '
            "'echo LOGGED-IN; ssh-add -l; echo remote-rc=\\$?'\"",
        )
    assert "LOGGED-IN" in out, "\n".join([*agent_log(ssh_world), out])
    assert "remote-rc=0" not in out and "SHA256:" not in out, out
    assert any("agent forwarding" in line for line in agent_log(ssh_world)), out
