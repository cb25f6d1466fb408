"""Host endpoints and secrets stay out of the sandbox (issue 7, item 5).

Attacks through the real daemon's Bash: connect to host unix sockets, read planted
credentials in a home directory, read the daemon's own config file. Each would succeed
on a sandbox that only hides a short deny list.
"""

# ruff: noqa: F811  (pytest fixtures imported from _sandbox_attack, used as parameters)
from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Iterator

import pytest

import agentd
from agentd_client import Client

from ._sandbox_attack import (  # noqa: F401  (fixtures are used by name)
    CONFIG_MARKER,
    TOKEN,
    Daemon,
    bash,
    guarded_py,
    guarded_sh,
    sandbox_daemon,
    sec_client,
    sec_session,
    sec_workspace,
    temp_dir_in,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

CONNECT_EACH = """
import socket, sys
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        print("CONNECTED", path)
    except OSError as exc:
        print("REFUSED", path, exc.errno)
"""


def _listen(path: str) -> socket.socket:
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(8)
    return server


@pytest.fixture
def host_sockets(sandbox_daemon: Daemon) -> Iterator[dict[str, str]]:
    """Listening sockets the sandbox uid could connect to on the host: under /run (where
    D-Bus and docker.sock live), under a visible directory, and the one the config names."""
    run_dir = temp_dir_in("/run", "agentd-sec-")
    var_dir = temp_dir_in("/var/tmp", "agentd-sec-sock-")
    paths = {
        "run": os.path.join(run_dir, "bus.sock"),
        "var": os.path.join(var_dir, "daemon.sock"),
        "allowed": sandbox_daemon.allowed_socket,
    }
    servers = [_listen(p) for p in paths.values()]
    yield paths
    for server in servers:
        server.close()
    for d in (run_dir, var_dir):
        shutil.rmtree(d, ignore_errors=True)
    os.unlink(sandbox_daemon.allowed_socket)


def test_host_unix_sockets_are_refused_unless_named(
    sec_client: Client, sec_session: str, host_sockets: dict[str, str]
) -> None:
    r = bash(sec_client, sec_session, guarded_py(CONNECT_EACH, *host_sockets.values()))
    # The socket the config names proves a connect from inside can succeed at all.
    assert f"CONNECTED {host_sockets['allowed']}" in r.text, r.text
    assert f"REFUSED {host_sockets['run']}" in r.text, r.text
    assert f"REFUSED {host_sockets['var']}" in r.text, r.text


def test_run_is_empty_and_read_only(sec_client: Client, sec_session: str) -> None:
    # Nothing of the host's: only agentd's own, read-only: the session's output files
    # (agentd-tasks) and the ssh ProxyCommand of a proxied session (agentd-net).
    mine = "grep -vxE 'agentd-tasks|agentd-net'"
    script = f"echo RUN=$(ls -A /run/ | {mine} | wc -l) "
    script += f"VARRUN=$(ls -A /var/run/ | {mine} | wc -l); "
    script += "touch /run/x && echo WROTE"
    r = bash(sec_client, sec_session, guarded_sh(script))
    assert "RUN=0 VARRUN=0" in r.text, r.text
    assert "WROTE" not in r.text and "Read-only" in r.text, r.text


def test_nothing_of_the_daemons_installation_is_bound_in(
    sec_client: Client, sec_session: str
) -> None:
    """The ssh helper of a proxied session is given by content (issue #34): bwrap resolves
    every bound path as the sandbox identity, which cannot reach a checkout or venv in a
    home only its owner may enter (the sandbox could then never start)."""
    installed = [os.path.dirname(agentd.__file__), sys.prefix, os.path.realpath(sys.prefix)]
    # mountinfo's 4th field: the path inside its file system that each mount shows.
    script = "cut -d' ' -f4 /proc/self/mountinfo; head -n1 /run/agentd-net/ssh-proxy; "
    script += "test -x /run/agentd-net/ssh-proxy && echo RUNNABLE; "
    script += "echo x >> /run/agentd-net/ssh-proxy && echo WROTE"
    r = bash(sec_client, sec_session, guarded_sh(script))
    assert "#!/bin/bash" in r.text and "RUNNABLE" in r.text, r.text
    assert "WROTE" not in r.text, r.text
    shown = r.text.splitlines()
    assert not [p for p in shown if any(p.startswith(d + "/") for d in installed)], r.text


@pytest.fixture
def planted_home() -> Iterator[str]:
    """A home under /home with a credential on the deny list, a credential nobody listed,
    and a git config on the allow-list, all readable by the sandbox uid on the host."""
    home = temp_dir_in("/home", "agentd-sec-home-")
    for name, text in {
        ".git-credentials": "https://user:SECRET-CRED@example.com\n",
        ".brand-new-tool-token": "SECRET-NEW\n",
        ".gitconfig": "[user]\n\tname = Allowed Config\n",
    }.items():
        with open(os.path.join(home, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(home, name), 0o644)
    yield home
    shutil.rmtree(home, ignore_errors=True)


def test_home_secrets_are_hidden_and_the_allow_list_is_read_only(
    sec_client: Client, sec_session: str, planted_home: str
) -> None:
    script = (
        f"cat {planted_home}/.git-credentials {planted_home}/.brand-new-tool-token; "
        f"cat {planted_home}/.gitconfig; echo x >> {planted_home}/.gitconfig && echo WROTE; "
        "ls -A /root"
    )
    r = bash(sec_client, sec_session, guarded_sh(script))
    assert "SECRET" not in r.text, r.text
    assert "Allowed Config" in r.text, r.text
    assert "WROTE" not in r.text, r.text
    assert ".npmrc" not in r.text and ".claude" not in r.text, r.text


def test_the_daemons_config_file_is_hidden(
    sec_client: Client, sec_session: str, sandbox_daemon: Daemon
) -> None:
    assert os.stat(sandbox_daemon.config_file).st_mode & 0o004  # readable on the host
    r = bash(sec_client, sec_session, guarded_sh(f"cat {sandbox_daemon.config_file}; echo END"))
    assert "END" in r.text, r.text
    assert CONFIG_MARKER not in r.text, r.text


def test_the_daemons_token_file_is_hidden(
    sec_client: Client, sec_session: str, sandbox_daemon: Daemon
) -> None:
    assert os.stat(sandbox_daemon.token_file).st_mode & 0o004  # readable on the host
    r = bash(sec_client, sec_session, guarded_sh(f"cat {sandbox_daemon.token_file}; echo END"))
    assert "END" in r.text, r.text
    assert TOKEN not in r.text, r.text
