"""A settings file's sandbox.credentials: "deny" entries restrict (always applied, not
what trust approves); any other entry widens (applied only while trusted)."""

from __future__ import annotations

import json

from agentd.permissions.settings import parse_settings, widening_parts

BODY = {
    "sandbox": {
        "credentials": {
            "envVars": [
                {"name": "AWS_SECRET_ACCESS_KEY", "mode": "deny"},
                {"name": "GITHUB_TOKEN", "mode": "mask", "injectHosts": ["api.github.com"]},
                "not a table",
            ],
            "files": [{"path": "/home/me/.npmrc", "mode": "deny"}],
        }
    }
}


def test_denies_restrict_and_masks_widen() -> None:
    parsed = parse_settings(json.dumps(BODY).encode(), "/w/.claude/settings.json", "/w")
    assert [
        (k, e["name"] if k == "envVars" else e["path"]) for k, e in parsed.credentials_denied
    ] == [
        ("envVars", "AWS_SECRET_ACCESS_KEY"),
        ("files", "/home/me/.npmrc"),
    ]
    assert [e["name"] for _, e in parsed.credentials_masked] == ["GITHUB_TOKEN"]
    widens = widening_parts(BODY)
    assert widens["sandbox"]["credentials"]["envVars"] == [
        {"name": "GITHUB_TOKEN", "mode": "mask", "injectHosts": ["api.github.com"]},
        "not a table",
    ]


def test_a_file_that_only_denies_widens_nothing() -> None:
    body = {"sandbox": {"credentials": {"envVars": [{"name": "T", "mode": "deny"}]}}}
    assert widening_parts(body) == {}
