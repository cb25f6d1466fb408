"""sandbox.credentials in the daemon's config: each mistake a one-line error naming
the entry; what a good entry means."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.credentials.config import _source
from agentd.credentials.masked_config import load_masked
from agentd.foundation.errors import ConfigError

GH = "api.github.com"
SOURCES = {"gh": _source({"name": "gh", "command": ["gh", "auth", "token"]}, 0)}


def load(env_vars: list[Any], files: list[Any] | None = None) -> list[Any]:
    return load_masked(env_vars, files or [], SOURCES)


def test_good_entries() -> None:
    entries = load(
        [
            {"name": "GITHUB_TOKEN", "mode": "mask", "injectHosts": [GH], "source": "gh"},
            {"name": "ANTHROPIC_API_KEY", "mode": "mask", "injectHosts": ["*.anthropic.com"]},
            {"name": "AWS_SECRET_ACCESS_KEY", "mode": "deny"},
        ],
        [{"path": "/home/me/.npmrc", "mode": "mask", "injectHosts": ["registry.npmjs.org"]}],
    )
    gh, key, aws, npmrc = entries
    assert gh.source is SOURCES["gh"] and gh.injects_to("api.github.com", 443)
    assert not gh.injects_to("github.com", 443)
    assert key.source is not None and key.source.kind == "env" and key.source.env == key.name
    assert key.injects_to("api.anthropic.com", 443) and not key.injects_to("anthropic.com", 443)
    assert aws.mode == "deny" and aws.source is None
    assert npmrc.source is not None and npmrc.source.file == "/home/me/.npmrc"
    assert npmrc.label == "files /home/me/.npmrc"


@pytest.mark.parametrize(
    ("env_vars", "files", "says"),
    [
        ([{"name": "T", "mode": "hide"}], [], 'mode must be "deny" or "mask"'),
        ([{"name": "T", "mode": "deny", "injectHosts": ["a.b"]}], [], "injectHosts is for"),
        ([{"name": "T", "mode": "mask", "injectHosts": ["a b"]}], [], "injectHosts"),
        ([{"name": "T", "mode": "mask", "source": "nope"}], [], "not one of credential_sources"),
        ([{"name": "LD_PRELOAD", "mode": "mask"}], [], "is not a variable"),
        ([{"name": "HTTPS_PROXY", "mode": "deny"}], [], "is not a variable"),
        ([{"name": "T", "mode": "mask", "extra": 1}], [], "unknown keys"),
        ([{"name": "T", "mode": "deny"}, {"name": "T", "mode": "deny"}], [], "given twice"),
        ([], [{"path": "rel/x", "mode": "deny"}], "plain absolute path"),
        ([], [{"path": "/a/../etc/shadow", "mode": "deny"}], "plain absolute path"),
        ([], [{"path": "/a", "mode": "mask", "from": "rel"}], "from must be"),
        (["x"], [], "must be a table"),
    ],
)
def test_mistakes_name_the_entry(env_vars: list[Any], files: list[Any], says: str) -> None:
    with pytest.raises(ConfigError, match="credential_") as caught:
        load(env_vars, files)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"name": "c", "command": "gh auth token"}, "command must be a list"),
        ({"name": "c", "command": ["gh"], "cache_seconds": 99999}, "cache_seconds must lie"),
        ({"name": "c", "command": ["gh"], "env": "X"}, "exactly one of"),
    ],
)
def test_a_command_source_is_checked(entry: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        _source(entry, 0)
