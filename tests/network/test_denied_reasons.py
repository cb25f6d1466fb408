"""A denied host's reason (sandbox-runtime's deniedDomainReasons): the sentence the
daemon's config or a workspace's settings give a deniedDomains entry is what the refused
program, and so the model, is told."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentd_client import Client
from tests.network.support import net_workspace  # noqa: F401
from tests.support.daemon import start_daemon

REASON = "Pastebins leak code; share through git.corp instead."


def test_a_denied_hosts_reason_is_passed_on(tmp_path: Path, net_workspace: Path) -> None:  # noqa: F811
    config = tmp_path / "config.toml"
    config.write_text(
        'network_denied_domains = ["paste.test"]\n'
        f'network_denied_domain_reasons = {{ "paste.test" = "{REASON}" }}\n'
    )
    (net_workspace / ".claude").mkdir()
    (net_workspace / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "sandbox": {
                    "network": {
                        "deniedDomains": ["gist.test"],
                        "deniedDomainReasons": {"gist.test": "Not from\x1b[31m here.\nEver."},
                    }
                }
            }
        )
    )
    daemon = start_daemon(tmp_path / "d", ["--config", str(config)])
    try:
        with Client(daemon.socket, timeout=240) as client:
            sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
            out = client.run_tool(
                sid,
                "Bash",
                {"command": "curl -sS https://paste.test/x; curl -sS https://gist.test/y; true"},
            ).text
    finally:
        assert daemon.stop() == 0, daemon.log
    assert f"denied by paste.test (daemon config): {REASON}" in out, out
    # A workspace's sentence: one printable line.
    assert "denied by gist.test" in out and "Not from [31m here. Ever." in out, out
    assert "\x1b" not in out


def test_a_reason_for_no_denied_entry_stops_the_start(tmp_path: Path) -> None:
    from agentd.foundation.config import Config
    from agentd.foundation.errors import InvalidRequest
    from agentd.permissions.network_rules import NetworkRulesSource

    config = Config(network_denied_domain_reasons={"typo.test": "x"})
    with pytest.raises(InvalidRequest, match="not an entry of network_denied_domains"):
        NetworkRulesSource(config, lambda: None)  # type: ignore[arg-type,return-value]
