"""`agentctl credentials` against the real daemon: sources by where they come from,
routes with their sandbox URL and the sessions that used them; never a secret."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.credentials.conftest import Routes


def agentctl(routes: Routes, *args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "agentd_client.cli.main", "--socket", routes.daemon.socket, *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def test_credentials_lists_sources_routes_and_their_sessions(routes: Routes, net_workspace: Path):
    with routes.client() as client:
        sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
        client.run_tool(
            sid, "Bash", {"command": "curl -s http://127.0.0.1:3130/pypi/agentdcredsdemo/"}
        )
    text = agentctl(routes, "credentials")
    assert str(routes.token_file) in text and "$AGENTD_TEST_PYPI_TOKEN" in text, text
    assert "http://127.0.0.1:3130/pypi/" in text and "PIP_INDEX_URL" in text, text
    assert f"session {sid}: 1 requests" in text, text
    assert "refs/heads/main" in text
    shown = json.loads(agentctl(routes, "credentials", "--json"))
    pypi = next(r for r in shown["routes"] if r["name"] == "pypi")
    assert [u["session_id"] for u in pypi["sessions"]] == [sid]
    assert {s["name"] for s in shown["sources"]} == {
        "git-token",
        "pypi-token",
        "git-fill",
        "missing",
    }
    for secret in (routes.git_token, routes.pypi_token):
        assert secret not in text and secret not in json.dumps(shown)
