"""A private package index through the daemon's credential route: real pip inside a
proxied sandbox installs from an upstream that requires a bearer token, with nothing
but PIP_INDEX_URL (set by the route) pointing it there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.credentials.conftest import Routes

pytestmark = pytest.mark.timeout(300)


def test_pip_installs_from_an_index_that_requires_a_token(routes: Routes, net_workspace: Path):
    with routes.client() as client:
        sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
        out = client.run_tool(
            sid,
            "Bash",
            {
                "command": "echo INDEX=$PIP_INDEX_URL; python3 -m pip install --no-cache-dir "
                "--break-system-packages --target site agentdcredsdemo 2>&1 && "
                "PYTHONPATH=site python3 -c 'import agentdcredsdemo; print(agentdcredsdemo.VALUE)'",
                "timeout": 240_000,
            },
        ).text
    assert "INDEX=http://127.0.0.1:3130/pypi/" in out, out
    assert "from-agentdcredsdemo-1.0.0" in out, out
    assert routes.pypi_token not in out
    # The upstream was asked under its prefix only, each time with the token.
    assert routes.pypi_seen.requests, routes.pypi_seen
    assert all(p.startswith("/simple/") for p in routes.pypi_seen.paths())
    assert all(a == f"Bearer {routes.pypi_token}" for _, _, a in routes.pypi_seen.requests)


def test_npm_installs_from_a_registry_that_requires_a_token(routes: Routes, net_workspace: Path):
    """The packument names the tarball by the upstream's absolute https URL: the route
    rewrites it onto itself, so npm fetches the tarball through the route too."""
    with routes.client() as client:
        sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
        out = client.run_tool(
            sid,
            "Bash",
            {
                "command": "cd /tmp && npm install --no-audit --no-fund agentd-creds-npm 2>&1 && "
                "node -e \"console.log(require('agentd-creds-npm'))\"",
                "timeout": 240_000,
            },
        ).text
    assert "from-agentd-creds-npm-1.0.0" in out, out
    assert routes.pypi_token not in out
    assert routes.npm_seen is not None
    paths = routes.npm_seen.paths()
    assert any(p.endswith(".tgz") for p in paths), paths
    assert all(a == f"Bearer {routes.pypi_token}" for _, _, a in routes.npm_seen.requests)
