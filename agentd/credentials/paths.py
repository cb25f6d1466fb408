"""A route's request target mapped onto its upstream, or refused: only origin-form
targets under `/<route>/`, no dot segments or encoded separators (as written or
percent-encoded), no Host but the route's own; and a redirect's Location mapped back
onto the route, or refused when it leaves the upstream's prefix."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from agentd.credentials.config import Route

# Percent-encodings of '\\', NUL and '%' itself (a double encoding): a server that
# decodes them after routing would see a path other than the one checked here. Dots
# and slashes are checked decoded ('%2e%2e' is '..'); npm asks for `@scope%2fname`.
_ENCODED = re.compile(r"%(5c|25|00)", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x20\x7f\\]")


class Refused(Exception):
    """Why a request may not go through the route (shown to the sandbox; no secret)."""


def route_name(target: str) -> str:
    """The route a target names: its first path segment."""
    return target.split("/", 2)[1] if target.startswith("/") and target.count("/") >= 1 else ""


def upstream_target(route: Route, target: str) -> str:
    """The path (and query) to ask the upstream for; Refused when outside the route."""
    if not target.startswith("/"):
        raise Refused("the route takes paths only (/<route>/...), not absolute URLs")
    path, sep, query = target.partition("?")
    head = f"/{route.name}/"
    if path + "/" == head:
        path = head
    if not path.startswith(head):
        raise Refused(f"the path is not under {head}")
    rest = path[len(head) :]
    if _CONTROL.search(path) or _ENCODED.search(path) or "#" in target:
        raise Refused("the path holds an encoded separator, a dot or a control character")
    segments = unquote(rest).split("/")
    # An empty segment ("//host/x") is a network-path reference to some servers.
    if any(s in (".", "..") for s in segments) or "" in segments[:-1]:
        raise Refused("the path holds '.' or '..' segments or an empty segment")
    return route.prefix + rest + (sep + query if sep else "")


def host_allowed(given: str, port: int) -> bool:
    """The sandbox must ask the route under its own name: 127.0.0.1 or localhost."""
    return given.lower() in (f"127.0.0.1:{port}", f"localhost:{port}")


def route_url(route: Route, port: int) -> str:
    return f"http://127.0.0.1:{port}/{route.name}/"


def mapped_location(route: Route, location: str, port: int) -> str | None:
    """A Location the sandbox may follow: the same place through the route; a relative
    reference is kept (it resolves under the route, and is checked when asked for);
    None for one that leaves the upstream's prefix (another host, scheme or path)."""
    try:
        parts = urlsplit(location)
    except ValueError:
        return None
    if not parts.scheme and not parts.netloc and not location.startswith("/"):
        return location if ".." not in location.split("?")[0].split("/") else None
    if (parts.scheme or parts.netloc) and (
        parts.scheme != "https" or parts.netloc.lower() != route.netloc.lower()
    ):
        return None
    path = parts.path
    if not path.startswith(route.prefix) or ".." in path.split("/"):
        return None
    rest = path[len(route.prefix) :]
    query = f"?{parts.query}" if parts.query else ""
    return route_url(route, port) + rest + query


def git_service(method: str, upstream_path: str) -> str | None:
    """What a git route's request is, judged on the path as the upstream will decode
    it: "refs" (the advertisement), "upload-pack" (a fetch), "receive-pack" (a push),
    or None for anything else (dumb-http pushes by PUT/MKCOL, other APIs): refused, so
    no push reaches the upstream without its ref updates being read."""
    path = unquote(upstream_path.partition("?")[0]).lower().rstrip("/")
    if method in ("GET", "HEAD") and path.endswith("/info/refs"):
        return "refs"
    if method == "POST" and path.endswith("/git-upload-pack"):
        return "upload-pack"
    if method == "POST" and path.endswith("/git-receive-pack"):
        return "receive-pack"
    if method in ("GET", "HEAD") and "receive-pack" not in path:
        return "files"  # dumb-http reads (objects/, HEAD): no change upstream
    return None
