"""What a session's sandbox is shown for its masked credentials, and which CONNECTs the
proxy takes over: by the entries, the daemon's and a workspace's, without a daemon."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agentd.credentials.config import _source
from agentd.credentials.masked_config import load_masked
from agentd.credentials.masks import CredentialMasks
from agentd.credentials.session_ca import BUNDLE_MOUNT, CA_MOUNT
from agentd.network.connection import Request

TOKEN = "ghp_" + "abcdefghij0123456789ABCDEFGHIJ012345"


@pytest.fixture
def masks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CredentialMasks:
    monkeypatch.setenv("AGENTD_TEST_MASKED", TOKEN)
    monkeypatch.setenv("AGENTD_TEST_SHORT", "abc")
    token_file = tmp_path / "tok"
    token_file.write_text("npm_" + "z" * 36 + "\n")
    token_file.chmod(0o600)
    sources = {"npm": _source({"name": "npm", "file": str(token_file)}, 0)}
    entries = load_masked(
        [
            {"name": "AGENTD_TEST_MASKED", "mode": "mask", "injectHosts": ["api.example"]},
            {"name": "AGENTD_TEST_SHORT", "mode": "mask", "injectHosts": ["api.example"]},
            {"name": "AGENTD_TEST_DENIED", "mode": "deny"},
        ],
        [{"path": "/run/x/npmrc", "mode": "mask", "injectHosts": ["npm.example"], "source": "npm"}],
        sources,
    )
    workspace: list[tuple[str, dict[str, Any], str]] = []
    made = CredentialMasks(entries, str(tmp_path / "state"), None, workspace=lambda s: workspace)  # type: ignore[arg-type]
    made.workspace_list = workspace  # type: ignore[attr-defined]
    return made


def session(sid: str = "s1", **env: str) -> Any:
    return SimpleNamespace(id=sid, env=env, owner_uid=os.getuid())


def test_the_view_of_a_session(masks: CredentialMasks) -> None:
    view = masks.sandbox_view(session(AGENTD_TEST_DENIED="x"))
    shown = view.env["AGENTD_TEST_MASKED"]
    assert len(shown) == len(TOKEN) and shown != TOKEN and shown.startswith("ghp_")
    # Too short to mask, and denied: unset.
    assert set(view.unset) == {"AGENTD_TEST_SHORT", "AGENTD_TEST_DENIED"}
    [(content, path)] = view.files
    assert path == "/run/x/npmrc" and content.startswith(b"npm_") and b"z" * 36 not in content
    # The same placeholder for the session's next sandbox; another for another session.
    assert masks.sandbox_view(session()).env["AGENTD_TEST_MASKED"] == shown
    assert masks.sandbox_view(session("s2")).env["AGENTD_TEST_MASKED"] != shown
    # Its sandbox trusts its CA; only the injectHosts are taken over.
    assert {p for _, p in masks.files("s1")} >= {CA_MOUNT, BUNDLE_MOUNT}
    assert masks.environment("s1")["SSL_CERT_FILE"] == BUNDLE_MOUNT
    assert masks.intercept("s1", Request("api.example", 443, "CONNECT")) is not None
    assert masks.intercept("s1", Request("npm.example", 443, "CONNECT")) is not None
    assert masks.intercept("s1", Request("other.example", 443, "CONNECT")) is None
    assert masks.intercept("s3", Request("api.example", 443, "CONNECT")) is None


def test_a_workspace_denies_and_masks_what_its_session_holds(masks: CredentialMasks) -> None:
    workspace = masks.workspace_list  # type: ignore[attr-defined]
    workspace += [
        ("envVars", {"name": "AGENTD_TEST_MASKED", "mode": "deny"}, "/w/.claude/settings.json"),
        (
            "envVars",
            {"name": "MINE", "mode": "mask", "injectHosts": ["mine.example"]},
            "/w/.claude/settings.json",
        ),
        ("files", {"path": "/etc/x", "mode": "mask"}, "/w/.claude/settings.json"),
        ("envVars", {"name": "LD_PRELOAD", "mode": "deny"}, "/w/.claude/settings.json"),
        ("files", {"path": "/proc/self/environ", "mode": "deny"}, "/w/.claude/settings.json"),
    ]
    real = "sk-" + "q" * 40
    view = masks.sandbox_view(session(MINE=real))
    assert "AGENTD_TEST_MASKED" in view.unset  # the workspace's deny wins
    assert view.env["MINE"] != real and len(view.env["MINE"]) == len(real)
    assert "/etc/x" not in [p for _, p in view.files]  # a workspace's file may only deny
    assert "/proc/self/environ" not in [p for _, p in view.files]  # nor cover the kernel's
    assert masks.intercept("s1", Request("mine.example", 443, "CONNECT")) is not None
    assert masks.intercept("s1", Request("api.example", 443, "CONNECT")) is None
    listed = {(e["name"], e["mode"]) for e in masks.summary()}
    assert ("MINE", "mask") in listed and ("AGENTD_TEST_MASKED", "deny") in listed


def test_an_upstream_ca_file_that_cannot_be_read_stops_the_start(tmp_path: Path) -> None:
    from agentd.foundation.errors import ConfigError

    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    for path in (str(bad), str(tmp_path / "missing.pem")):
        with pytest.raises(ConfigError, match="network_upstream_ca_file"):
            CredentialMasks([], str(tmp_path / "state"), None, path)  # type: ignore[arg-type]
