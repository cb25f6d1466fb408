"""Real clients inside a proxied sandbox, told nothing about the proxy: pip from a
package index, npm from a registry, git over http (git http-backend) and over ssh
(openssh-server), each against a server this test starts on the host's loopback, by a
host name only the daemon's resolver map knows."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agentd_client import Client
from tests.network import servers
from tests.network.support import GIT, NPM, PYPI, UNLISTED
from tests.support.daemon import DaemonProcess

pytestmark = pytest.mark.timeout(300)
SANDBOX_UID = 65534


@pytest.fixture
def net_client(proxied_daemon: DaemonProcess):
    with Client(proxied_daemon.socket, timeout=240) as c:
        yield c


@pytest.fixture
def sid(net_client: Client, net_workspace: Path) -> str:
    return net_client.create_session(str(net_workspace), permission_mode="bypassPermissions").id


def bash(client: Client, sid: str, command: str) -> str:
    r = client.run_tool(sid, "Bash", {"command": command, "timeout": 240_000})
    return r.text


def test_pip_installs_from_a_package_index(net_client, sid, net_workspace, tmp_path):
    servers.wheel(tmp_path, "agentdnetdemo", "1.2.3")
    with servers.static(tmp_path) as port:
        out = bash(
            net_client,
            sid,
            "python3 -m pip install --no-cache-dir --break-system-packages --target site "
            f"--index-url http://{PYPI}:{port}/simple/ --trusted-host {PYPI} agentdnetdemo && "
            "PYTHONPATH=site python3 -c 'import agentdnetdemo; print(agentdnetdemo.VALUE)'",
        )
    assert "from-agentdnetdemo-1.2.3" in out, out


def test_npm_installs_from_a_registry(net_client, sid, tmp_path):
    with servers.registry(tmp_path) as port:
        servers.npm_package(tmp_path, NPM, port, "agentd-net-demo", "2.0.0")
        out = bash(
            net_client,
            sid,
            f"npm install --no-audit --no-fund --registry http://{NPM}:{port}/ "
            "agentd-net-demo && node -e \"console.log(require('agentd-net-demo'))\"",
        )
    assert "from-agentd-net-demo-2.0.0" in out, out


def test_git_clones_and_fetches_over_http(net_client, sid, tmp_path):
    servers.bare_repo(tmp_path, "demo", "MARKER-HTTP")
    with servers.git_http(tmp_path) as port:
        out = bash(
            net_client,
            sid,
            f"git clone -q http://{GIT}:{port}/demo.git viahttp && cat viahttp/MARKER && "
            "git -C viahttp fetch -q origin && echo FETCHED",
        )
        assert "MARKER-HTTP" in out and "FETCHED" in out, out
        # The same server by a name no rule allows: refused, and the result says so.
        out = bash(net_client, sid, f"git clone -q http://{UNLISTED}:{port}/demo.git nope")
        assert "403" in out and f"{UNLISTED}:{port}" in out, out


def test_an_unattended_git_clone_leaves_a_working_repository(
    net_client, sid, net_workspace, tmp_path
):
    servers.bare_repo(tmp_path, "demo", "MARKER-CLONE")
    with servers.git_http(tmp_path) as port:
        out = bash(net_client, sid, f"git clone -q http://{GIT}:{port}/demo.git cloned && echo OK")
        # Nobody is attached: a held config would stay reverted. What git wrote passes.
        assert "OK" in out and "held" not in out, out
        out = bash(
            net_client,
            sid,
            "git -C cloned remote get-url origin && git -C cloned pull -q && "
            "git -C cloned status -sb | head -1",
        )
    assert f"http://{GIT}:{port}/demo.git" in out, out
    assert "## main...origin/main" in out, out
    config = (net_workspace / "cloned" / ".git" / "config").read_text()
    assert '[remote "origin"]' in config and '[branch "main"]' in config, config


def test_git_clones_over_ssh_through_the_proxy(net_client, sid, net_workspace, tmp_path):
    bare = servers.bare_repo(tmp_path, "demo", "MARKER-SSH")
    key = net_workspace / "id_test"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    for path in (key, Path(f"{key}.pub")):
        os.chown(path, SANDBOX_UID, SANDBOX_UID)
    with servers.sshd(tmp_path / "sshd", Path(f"{key}.pub").read_text()) as port:
        ssh = (
            '"$GIT_SSH_COMMAND -i id_test -o BatchMode=yes -o StrictHostKeyChecking=no '
            '-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"'
        )
        out = bash(
            net_client,
            sid,
            f"GIT_SSH_COMMAND={ssh} git clone -q ssh://root@{GIT}:{port}{bare} viassh && "
            "cat viassh/MARKER",
        )
    assert "MARKER-SSH" in out, out
