"""A route's request mapped onto its upstream, and a redirect mapped back: the class of
ways out of the prefix (dot segments as written or encoded, double encoding, empty
segments, backslashes, absolute URLs), not only the examples the attacks send."""

from __future__ import annotations

import pytest

from agentd.credentials.config import Route
from agentd.credentials.paths import Refused, git_service, mapped_location, upstream_target

ROUTE = Route("reg", "http", "https://reg.example/simple/", "tok")


def test_paths_under_the_route_map_under_the_prefix() -> None:
    assert upstream_target(ROUTE, "/reg/pkg/") == "/simple/pkg/"
    assert upstream_target(ROUTE, "/reg/@scope%2fname?x=1") == "/simple/@scope%2fname?x=1"
    assert upstream_target(ROUTE, "/reg") == "/simple/"


@pytest.mark.parametrize(
    "target",
    [
        "/other/x",
        "/regx/y",
        "/reg/../x",
        "/reg/a/../../x",
        "/reg/%2e%2e/x",
        "/reg/%2E./x",
        "/reg/a/..%2F..%2Fx",
        "/reg/%252e%252e/x",
        "/reg//evil/x",
        "/reg/a\\..\\x",
        "/reg/a%5c..%5cx",
        "/reg/a%00",
        "/reg/./x",
        "http://reg.example/simple/x",
        "*",
    ],
)
def test_ways_out_of_the_prefix_are_refused(target: str) -> None:
    with pytest.raises(Refused):
        upstream_target(ROUTE, target)


@pytest.mark.parametrize(
    ("location", "mapped"),
    [
        ("https://reg.example/simple/p/", "http://127.0.0.1:3130/reg/p/"),
        ("/simple/p/?a=b", "http://127.0.0.1:3130/reg/p/?a=b"),
        ("p/", "p/"),
        ("https://evil.example/simple/p/", None),
        ("http://reg.example/simple/p/", None),
        ("https://reg.example/other/", None),
        ("/other/", None),
        ("//evil.example/simple/", None),
        ("../../x", None),
    ],
)
def test_redirects_stay_on_the_route(location: str, mapped: str | None) -> None:
    assert mapped_location(ROUTE, location, 3130) == mapped


@pytest.mark.parametrize(
    ("method", "path", "service"),
    [
        ("GET", "/r.git/info/refs?service=git-receive-pack", "refs"),
        ("POST", "/r.git/git-upload-pack", "upload-pack"),
        ("POST", "/r.git/git-receive-pack", "receive-pack"),
        ("POST", "/r.git/git-receive-pack?x", "receive-pack"),
        ("POST", "/r.git/git%2dreceive-pack", "receive-pack"),
        ("POST", "/r.git/Git-Receive-Pack/", "receive-pack"),
        ("GET", "/r.git/objects/ab/cd", "files"),
        ("GET", "/r.git/git-receive-pack", None),
        ("PUT", "/r.git/objects/ab/cd", None),
        ("POST", "/r.git/info/lfs/objects/batch", None),
    ],
)
def test_git_requests_are_known_by_their_decoded_path(method: str, path: str, service: str | None):
    assert git_service(method, path) == service
