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


def test_the_route_listener_is_neither_listed_nor_forwarded(
    routes: Routes, net_workspace: Path
) -> None:
    """agentd's own route listener (127.0.0.1:3130 in the session's namespace) is not a
    server of the session's: `ports` leaves it out and a forward of it is refused."""
    import grpc
    import pytest

    from agentd_client.v1 import agentd_pb2 as pb

    with routes.client() as client:
        sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
        ran = client.run_tool(
            sid, "Bash", {"command": "curl -s -o /dev/null http://127.0.0.1:3130/"}
        )
        assert not ran.is_error, ran.text
        listed = client.stub.ListPorts(pb.ListPortsRequest(session_id=sid))
        assert 3130 not in [p.port for p in listed.ports], listed
        with pytest.raises(grpc.RpcError) as refused:
            client.stub.StartForward(pb.StartForwardRequest(session_id=sid, port=3130))
        assert "agentd's own" in (refused.value.details() or "")
