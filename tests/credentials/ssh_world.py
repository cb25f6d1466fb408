"""The ssh world the agent tests run in, all on the host's loopback and started by the
test: the owner's own ssh-agent holding a key, a key file the daemon reads, openssh-server
serving a bare repository (git.test), a second sshd whose host key no known_hosts entry
of a configured host lists (the stranger), and a proxied daemon configured with them.

The key file and the owner's agent socket sit where the sandbox uid could read them on
the host (0644, 0777 under a 0755 directory): only the daemon's hiding protects them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentd_client import Client
from tests.network import servers
from tests.network.support import ALLOWED, GIT, PYPI, proxied_config
from tests.sandbox.conftest import sandbox_dir
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import wait_until


@dataclass
class SshWorld:
    daemon: DaemonProcess
    repo: Path  # the bare repository git.test serves
    git_port: int
    stranger_port: int
    owner_pub: str  # the public half of the key the owner's agent holds
    file_pub: str  # the public half of the daemon's key file (ECDSA)
    rsa_pub: str  # the public half of the daemon's second key file (RSA)
    key_file: str  # the daemon's private key file (hidden from the sandbox)
    owner_agent: str  # the owner's agent socket (hidden from the sandbox)
    known_hosts_line: str  # what a client in the sandbox may trust for git.test
    config: Path  # the daemon's config (a test may start a daemon of its own with it)


def _keygen(path: Path, kind: str = "ed25519") -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)
    return Path(f"{path}.pub").read_text().strip()


@contextlib.contextmanager
def owner_agent(directory: str) -> Iterator[str]:
    """An ssh-agent of the owner's, in the foreground on a socket of its own."""
    sock = os.path.join(directory, "agent.sock")
    proc = subprocess.Popen(
        ["ssh-agent", "-D", "-a", sock], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_until(lambda: os.path.exists(sock), 30, "the owner's ssh-agent listening")
        os.chmod(sock, 0o777)
        yield sock
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def ssh_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshWorld]:
    base = tmp_path_factory.mktemp("agentd-ssh")
    exposed = sandbox_dir("agentd-ssh-secrets-")  # where the sandbox uid could read
    try:
        owner_pub = _keygen(base / "owner_key")
        key_file = os.path.join(exposed, "daemon_key")
        file_pub = _keygen(Path(key_file), "ecdsa")
        rsa_file = os.path.join(exposed, "daemon_rsa")
        rsa_pub = _keygen(Path(rsa_file), "rsa")
        os.chmod(key_file, 0o644)
        repo = servers.bare_repo(base, "demo", "MARKER-SSH-AGENT")
        with contextlib.ExitStack() as stack:
            agent = stack.enter_context(owner_agent(exposed))
            subprocess.run(
                ["ssh-add", "-q", str(base / "owner_key")],
                check=True,
                env={**os.environ, "SSH_AUTH_SOCK": agent},
                stderr=subprocess.DEVNULL,
            )
            authorized = f"{owner_pub}\n{file_pub}\n{rsa_pub}\n"
            git_port = stack.enter_context(servers.sshd(base / "sshd", authorized))
            stranger_port = stack.enter_context(servers.sshd(base / "stranger", authorized))
            host_pub = (base / "sshd" / "host_ed25519.pub").read_text().split()
            line = f"[{GIT}]:{git_port} {host_pub[0]} {host_pub[1]}"
            # The stranger is configured under one name, with a key it does not hold.
            other = _keygen(base / "not_the_stranger").split()
            # git.test's entry hashed (as HashKnownHosts writes it), the other plain.
            known = base / "known_hosts"
            known.write_text(f"{line}\n")
            subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(known)], check=True)
            with known.open("a") as f:
                f.write(f"[{ALLOWED}]:{stranger_port} {other[0]} {other[1]}\n")
            config = base / "config.toml"
            proxied_config(
                config,
                f'ssh_agent_hosts = ["{GIT}:{git_port}", "{ALLOWED}:{stranger_port}"]\n'
                f'ssh_agent_key_files = ["{key_file}", "{rsa_file}"]\n'
                f'ssh_agent_upstream = "{agent}"\n'
                f'ssh_agent_known_hosts = "{known}"\n'
                # No protected refs: the agent then signs by session rules and asks
                # (test_ssh_agent_protected.py has them).
                "credential_protected_refs = []\n",
            )
            daemon = start_daemon(base / "d", ["--config", str(config)])
            try:
                yield SshWorld(
                    daemon,
                    repo,
                    git_port,
                    stranger_port,
                    owner_pub,
                    file_pub,
                    rsa_pub,
                    key_file,
                    agent,
                    line,
                    config,
                )
            finally:
                code = daemon.stop()
                assert code == 0, daemon.log
                assert "Traceback" not in daemon.log, daemon.log
    finally:
        shutil.rmtree(exposed, ignore_errors=True)


UNLISTED_HOST = PYPI  # a name the network allows that no ssh_agent_hosts entry names


def ssh_command(workspace: Path | None, pub_file: str = "") -> str:
    """ssh for git inside the sandbox: the session's GIT_SSH_COMMAND (through the proxy,
    checking the host against the configured hosts' keys the agent shows), never
    prompting; `workspace`: its known_hosts instead; with `pub_file` (in `workspace`),
    only the agent's key whose public half it holds."""
    own = f"-o UserKnownHostsFile={workspace}/known_hosts " if workspace else ""
    only = f" -o IdentitiesOnly=yes -i {workspace / pub_file}" if workspace and pub_file else ""
    return (
        f'"$GIT_SSH_COMMAND {own}-o StrictHostKeyChecking=yes -o BatchMode=yes '
        f'-o LogLevel=ERROR{only}"'
    )


class Terminal:
    """An attached client answering every Bash ask with allow and every SshAgent ask
    with `answer` (None: it only watches); it records the SshAgent asks it saw."""

    def __init__(self, client: Client, sid: str, answer: tuple[str, str] | None) -> None:
        self.client, self.sid, self.answer = client, sid, answer
        self.asked: list[Any] = []
        self.stream = client.attach(sid)
        assert self.stream.wait_attached()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with contextlib.suppress(Exception):
            for event in self.stream:
                if event.WhichOneof("kind") != "permission_requested":
                    continue
                req = event.permission_requested
                if req.tool_name != "SshAgent":
                    self.client.resolve_permission(self.sid, req.request_id, "allow")
                    continue
                self.asked.append(req)
                if self.answer is not None:
                    decision, scope = self.answer
                    self.client.resolve_permission(self.sid, req.request_id, decision, scope)

    def close(self) -> None:
        self.stream.cancel()
        self.thread.join(30)
