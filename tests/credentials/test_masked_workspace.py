"""sandbox.credentials from a workspace's settings: a "deny" entry applies whatever the
file's trust (it only narrows), even over the daemon's "mask"; a "mask" entry applies
only while that exact content is trusted, and takes its real value from the session's
own environment, never the daemon's."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from tests.credentials.masked_world import API, World, masked_world
from tests.sandbox._sandbox_attack import bash

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with masked_world(tmp_path_factory.mktemp("agentd-masked-ws")) as w:
        yield w


def _settings(workspace: Path, credentials: dict[str, list[dict[str, object]]]) -> Path:
    claude = workspace / ".claude"
    claude.mkdir(exist_ok=True)
    path = claude / "settings.json"
    path.write_text(json.dumps({"sandbox": {"credentials": credentials}}))
    return path


def test_an_untrusted_workspace_may_deny_even_what_the_daemon_masks(
    world: World, net_workspace: Path
) -> None:
    _settings(
        net_workspace,
        {
            "envVars": [{"name": "GITHUB_TOKEN", "mode": "deny"}],
            "files": [{"path": "/run/agentd-test/git-credentials", "mode": "deny"}],
        },
    )
    with Client(world.daemon.socket, timeout=240) as client:
        sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
        out = bash(
            client, sid, 'echo "[${GITHUB_TOKEN-unset}]"; wc -c < /run/agentd-test/git-credentials'
        ).text
    assert "[unset]" in out and out.strip().endswith("0"), out


def test_a_workspace_mask_applies_only_while_trusted(world: World, net_workspace: Path) -> None:
    real = "ghp_" + "0123456789abcdefABCDEF0123456789abcd"
    path = _settings(
        net_workspace,
        {"envVars": [{"name": "SESSION_TOKEN", "mode": "mask", "injectHosts": [API]}]},
    )
    env = {"SESSION_TOKEN": real}
    curl = f'curl -sS -H "Authorization: Bearer $SESSION_TOKEN" {world.url(API, "/echo")}'
    with Client(world.daemon.socket, timeout=240) as client:
        sid = client.create_session(
            str(net_workspace), permission_mode="bypassPermissions", env=env
        ).id
        # Untrusted: not applied; the session's variable is as the person gave it.
        assert bash(client, sid, 'printf %s "$SESSION_TOKEN"').text.strip() == real
        client.approve_trust(str(path), hashlib.sha256(path.read_bytes()).hexdigest())
        shown = bash(client, sid, 'printf %s "$SESSION_TOKEN"').text.strip()
        assert shown != real and len(shown) == len(real) and shown.startswith("ghp_")
        echoed = json.loads(bash(client, sid, curl).text)
    assert echoed["auth"] == f"Bearer {shown}"
    assert world.seen.requests[-1][3]["authorization"] == f"Bearer {real}"
