"""Who may use a route: the session's network rules for the upstream's host. A
workspace's settings can take a route away (deniedDomains) but not grant one
(allowedDomains in an untrusted settings file is ignored)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.credentials.conftest import GIT_HOST, NOWHERE_HOST, ROUTE_PORT, Routes

pytestmark = pytest.mark.timeout(300)


def _settings(workspace: Path, network: dict[str, list[str]]) -> None:
    claude = workspace / ".claude"
    claude.mkdir(exist_ok=True)
    (claude / "settings.json").write_text(json.dumps({"sandbox": {"network": network}}))


def _get(routes: Routes, workspace: Path, path: str) -> str:
    with routes.client() as client:
        sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
        return client.run_tool(
            sid, "Bash", {"command": f"curl -sS -i http://127.0.0.1:{ROUTE_PORT}{path}"}
        ).text


def test_a_workspace_can_deny_a_route(routes: Routes, net_workspace: Path) -> None:
    path = "/git/demo.git/info/refs?service=git-upload-pack"
    assert " 200 " in _get(routes, net_workspace, path)  # the control: allowed by config
    _settings(net_workspace, {"deniedDomains": [GIT_HOST]})
    before = len(routes.git_seen.requests)
    out = _get(routes, net_workspace, path)
    assert " 403 " in out and f"denied by {GIT_HOST}" in out, out
    assert len(routes.git_seen.requests) == before


def test_a_workspace_cannot_grant_a_route(routes: Routes, net_workspace: Path) -> None:
    _settings(net_workspace, {"allowedDomains": [NOWHERE_HOST, "*.test"]})
    out = _get(routes, net_workspace, "/nowhere/agentdcredsdemo/")
    assert " 403 " in out and NOWHERE_HOST in out and "asks nobody" in out, out
