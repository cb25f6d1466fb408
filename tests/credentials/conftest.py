"""A daemon with credential routes to TLS upstreams this module starts: `git` (git over
https, the token from a file) and `pypi` (a package index, the token from the daemon's
environment), plus `nowhere`, a route to a host no rule allows."""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentd_client import Client
from tests.credentials import upstreams
from tests.credentials.ssh_world import ssh_world  # noqa: F401
from tests.network import servers
from tests.network.support import net_workspace  # noqa: F401
from tests.support.daemon import DaemonProcess, start_daemon

GIT_HOST, PYPI_HOST, NOWHERE_HOST = "git.test", "pypi.test", "nowhere.test"
NPM_HOST = "npm.test"
ROUTE_PORT = 3130


@dataclass
class Routes:
    daemon: DaemonProcess
    git_token: str
    pypi_token: str
    git_port: int
    pypi_port: int
    git_seen: upstreams.Seen
    pypi_seen: upstreams.Seen
    repos: Path
    index: Path
    token_file: Path
    npm_port: int = 0
    npm_seen: upstreams.Seen | None = None

    def client(self) -> Client:
        return Client(self.daemon.socket, timeout=240)


def _config(base: Path, tls: upstreams.Tls, token_file: Path, git: int, pypi: int, npm: int) -> str:
    """Routes to the two upstreams; `gitfill` takes its token from `git credential fill`
    run by the daemon with a HOME whose helper answers (and logs what it was asked)."""
    names = (GIT_HOST, PYPI_HOST, NOWHERE_HOST, NPM_HOST)
    resolve = ", ".join(f'"{n}" = ["127.0.0.1"]' for n in names)
    private = ", ".join(f'"{n}"' for n in names)
    return f"""
network_allowed_domains = ["{GIT_HOST}", "{PYPI_HOST}", "{NPM_HOST}"]
network_allow_private_hosts = [{private}]
network_resolve = {{ {resolve} }}
credential_route_port = {ROUTE_PORT}

[[credential_sources]]
name = "git-token"
file = "{token_file}"

[[credential_sources]]
name = "pypi-token"
env = "AGENTD_TEST_PYPI_TOKEN"

[[credential_sources]]
name = "git-fill"
git_credential = "https://{GIT_HOST}:{git}"
home = "{base / "fill-home"}"

[[credential_routes]]
name = "gitfill"
kind = "git"
upstream = "https://{GIT_HOST}:{git}/fill/"
source = "git-fill"
ca_file = "{tls.ca}"

[[credential_routes]]
name = "git"
kind = "git"
upstream = "https://{GIT_HOST}:{git}/"
source = "git-token"
username = "agentd-bot"
ca_file = "{tls.ca}"

[[credential_routes]]
name = "pypi"
kind = "http"
upstream = "https://{PYPI_HOST}:{pypi}/simple/"
source = "pypi-token"
ca_file = "{tls.ca}"
env = {{ PIP_INDEX_URL = "{{url}}" }}

[[credential_routes]]
name = "npm"
kind = "http"
upstream = "https://{NPM_HOST}:{npm}/"
source = "pypi-token"
ca_file = "{tls.ca}"
env = {{ npm_config_registry = "{{url}}" }}

[[credential_sources]]
name = "missing"
file = "{base / "no-such-token"}"

[[credential_routes]]
name = "broken"
kind = "http"
upstream = "https://{PYPI_HOST}:{pypi}/simple/"
source = "missing"
ca_file = "{tls.ca}"

[[credential_routes]]
name = "nowhere"
kind = "http"
upstream = "https://{NOWHERE_HOST}:{pypi}/simple/"
source = "pypi-token"
ca_file = "{tls.ca}"
"""


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Routes]:
    base = tmp_path_factory.mktemp("agentd-creds")
    tls = upstreams.make_tls(base / "tls", [GIT_HOST, PYPI_HOST, NOWHERE_HOST, NPM_HOST])
    git_token = "ghp_" + os.urandom(12).hex()
    pypi_token = "pypi-" + os.urandom(12).hex()
    token_file = base / "git-token"
    token_file.write_text(git_token + "\n")
    token_file.chmod(0o600)
    repos = base / "repos"
    repos.mkdir()
    bare = servers.bare_repo(repos, "demo", "MARKER-HTTPS")
    # http-backend takes pushes from an authenticated user only, or when told to.
    subprocess.run(
        ["git", "--git-dir", str(bare), "config", "http.receivepack", "true"], check=True
    )
    (repos / "fill").mkdir()
    filled = servers.bare_repo(repos / "fill", "demo", "MARKER-FILL")
    subprocess.run(
        ["git", "--git-dir", str(filled), "config", "http.receivepack", "true"], check=True
    )
    home = base / "fill-home"
    home.mkdir()
    helper = home / "helper.sh"
    helper.write_text(
        '#!/bin/sh\ncat >> "$HOME/asked"\n'
        f'[ "$1" = get ] && printf "username=agentd-bot\\npassword={git_token}\\n"\n'
    )
    helper.chmod(0o755)
    (home / ".gitconfig").write_text(f"[credential]\n\thelper = {helper}\n")
    registry = base / "registry"
    registry.mkdir()
    index = base / "index"
    servers.wheel(index, "agentdcredsdemo", "1.0.0")
    basic = base64.b64encode(f"agentd-bot:{git_token}".encode()).decode()
    evil = "http://evil.test:9"
    with (
        upstreams.git_https(repos, tls, f"Basic {basic}", evil) as (git_port, git_seen),
        upstreams.index_https(index, tls, f"Bearer {pypi_token}", evil) as (pypi_port, pypi_seen),
        upstreams.registry_https(registry, tls, f"Bearer {pypi_token}") as (npm_port, npm_seen),
    ):
        # The packument names its tarball by the upstream's absolute https URL.
        servers.npm_package(registry, NPM_HOST, npm_port, "agentd-creds-npm", "1.0.0")
        packument = registry / "agentd-creds-npm" / "index.json"
        packument.write_text(packument.read_text().replace("http://", "https://"))
        config = _config(base, tls, token_file, git_port, pypi_port, npm_port)
        (base / "config.toml").write_text(config)
        proc = start_daemon(
            base / "d",
            ["--config", str(base / "config.toml")],
            env={"AGENTD_TEST_PYPI_TOKEN": pypi_token},
        )
        try:
            yield Routes(
                proc,
                git_token,
                pypi_token,
                git_port,
                pypi_port,
                git_seen,
                pypi_seen,
                repos,
                index,
                token_file,
                npm_port,
                npm_seen,
            )
        finally:
            code = proc.stop()
        assert code == 0, proc.log
        assert "Traceback" not in proc.log, proc.log
