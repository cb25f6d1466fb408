"""WebFetch's URL rules: which URLs may be fetched, and which redirects stay on a site.

Kept apart from the fetching so the permission check (validate_input) and the redirect
loop judge URLs by the same few functions, and so they can be tested without a network.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from agentd.network.address import AllowList
from agentd.tools.base import InputError

MAX_URL_LENGTH = 2000
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def checked_url(url: str, allow: AllowList | None = None) -> str:
    """The URL to fetch: validated, and upgraded to https unless it is loopback or a host
    the operator allowed as internal (internal services often speak plain http)."""
    if len(url) > MAX_URL_LENGTH:
        raise InputError(f"The URL is {len(url)} characters long; the limit is {MAX_URL_LENGTH}.")
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise InputError(f"Invalid URL {url!r}: {exc}.") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise InputError(f"Invalid URL {url!r}: only http:// and https:// URLs can be fetched.")
    if not host:
        raise InputError(f"Invalid URL {url!r}: it names no host.")
    if parts.username is not None or parts.password is not None:
        raise InputError(
            f"Invalid URL {url!r}: URLs with a user name or password cannot be fetched."
        )
    scheme = parts.scheme.lower()
    internal = host.lower() in LOOPBACK_HOSTS or (allow is not None and allow.names_host(host))
    if scheme == "http" and not internal:
        scheme = "https"
    return urlunsplit((scheme, parts.netloc, parts.path or "/", parts.query, ""))


def _effective_port(url: str) -> int | None:
    parts = urlsplit(url)
    return parts.port or {"http": 80, "https": 443}.get(parts.scheme)


def is_same_host(current: str, target: str) -> bool:
    """Whether a redirect from `current` to `target` stays on the same host (a leading
    "www." aside), on the same port, without credentials and without leaving http(s)."""
    a, b = urlsplit(current), urlsplit(target)
    if b.scheme not in ("http", "https") or b.username is not None or b.password is not None:
        return False
    if (a.hostname or "").removeprefix("www.") != (b.hostname or "").removeprefix("www."):
        return False
    if a.scheme == b.scheme:
        return _effective_port(current) == _effective_port(target)
    # http -> https on the default ports is the same site, upgraded.
    return a.scheme == "http" and b.scheme == "https" and a.port is None and b.port is None
