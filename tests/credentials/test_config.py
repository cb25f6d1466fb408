"""The credential sections of the daemon's config: each mistake a one-line error
naming the entry, never a route that silently sends nothing or somewhere else."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.credentials import config as creds
from agentd.foundation.config import Config
from agentd.foundation.errors import ConfigError

SOURCE = {"name": "tok", "file": "/etc/agentd/tok"}
ROUTE = {"name": "gh", "kind": "git", "upstream": "https://git.example/org/", "source": "tok"}


def load(sources: list[Any], routes: list[Any], **extra: Any) -> creds.CredentialConfig:
    return creds.load(Config(credential_sources=sources, credential_routes=routes, **extra))


def test_a_good_config_loads() -> None:
    c = load([SOURCE, {"name": "env", "env": "TOKEN"}], [ROUTE])
    route = c.routes["gh"]
    assert route.upstream == "https://git.example/org/" and route.scheme == "Basic"
    assert route.host == "git.example" and route.port == 443 and route.prefix == "/org/"
    assert c.sources["env"].where == "$TOKEN"


@pytest.mark.parametrize(
    ("sources", "routes", "says"),
    [
        ([{"name": "x"}], [], "exactly one of"),
        ([{"name": "x", "file": "rel/path"}], [], "absolute"),
        ([{"name": "x", "env": "A B"}], [], "variable name"),
        ([{"name": "x", "git_credential": "http://h"}], [], "https"),
        ([{"name": "X!", "file": "/f"}], [], "name must be"),
        ([SOURCE, SOURCE], [], "used twice"),
        ([SOURCE], [{**ROUTE, "upstream": "http://git.example/"}], "https://"),
        ([SOURCE], [{**ROUTE, "upstream": "https://u:p@git.example/"}], "user or password"),
        ([SOURCE], [{**ROUTE, "upstream": "https://git.example/a/../b"}], "plain"),
        ([SOURCE], [{**ROUTE, "source": "nope"}], "not one of"),
        ([SOURCE], [{**ROUTE, "kind": "ftp"}], "kind"),
        ([SOURCE], [{**ROUTE, "header": "Bad Header"}], "header"),
        ([SOURCE], [{**ROUTE, "env": {"LD_PRELOAD": "x"}}], "may not set"),
        ([SOURCE], [{**ROUTE, "env": {"HTTPS_PROXY": "x"}}], "may not set"),
        ([SOURCE], [{**ROUTE, "extra": 1}], "unknown keys"),
    ],
)
def test_mistakes_are_refused_by_name(sources: list[Any], routes: list[Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load(sources, routes)


def test_protected_refs_are_full_refs() -> None:
    with pytest.raises(ConfigError, match="full ref"):
        load([], [], credential_protected_refs=["main"])


def test_the_route_port_is_not_the_proxy_s() -> None:
    with pytest.raises(ConfigError, match="credential_route_port"):
        load([SOURCE], [ROUTE], credential_route_port=3128)
