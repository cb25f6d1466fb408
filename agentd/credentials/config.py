"""The credential sources and routes of the daemon's config, checked at start: a typo
is a one-line error naming the entry, never a route that silently sends no secret."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from agentd.foundation.config import Config
from agentd.foundation.errors import ConfigError

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER = re.compile(r"^[A-Za-z0-9-]{1,64}$")
_SCHEMES = ("Bearer", "Basic", "token", "")
# Variables a route may not set in the sandbox: they would undo the sandbox's proxying
# or its shell (a route's env is config, but a typo must not open a hole).
_RESERVED_ENV = re.compile(r"^(LD_|GIT_CONFIG|BASH_ENV$|ENV$|PATH$|HOME$|.*_PROXY$|.*_proxy$)")


@dataclass(frozen=True, slots=True)
class Source:
    """Where one secret comes from; exactly one of file, env, git_credential, command."""

    name: str
    kind: str  # "file" | "env" | "git-credential" | "command"
    file: str = ""
    env: str = ""
    # A command run as `user` (default: the session's owner) printing the secret on its
    # first line (`gh auth token`), its answer kept for cache_seconds.
    command: tuple[str, ...] = ()
    cache_seconds: float = 0.0
    # git credential fill: the URL asked for, the user whose helpers answer (default:
    # the session's owner), and the HOME its git reads (default: that user's home;
    # never one a sandbox can write).
    url: str = ""
    user: str = ""
    home: str = ""

    @property
    def where(self) -> str:
        """What `agentctl credentials` shows: never the secret."""
        if self.kind == "file":
            return self.file
        if self.kind == "env":
            return f"${self.env}"
        if self.kind == "command":
            return f"`{' '.join(self.command)}` as " + (self.user or "the session's owner")
        return f"git credential fill {self.url} as " + (self.user or "the session's owner")


@dataclass(frozen=True, slots=True)
class Route:
    name: str
    kind: str  # "git" | "http"
    upstream: str  # https://host[:port]/prefix/ (always ends in /)
    source: str
    header: str = "Authorization"
    scheme: str = "Bearer"
    username: str = ""
    ca_file: str = ""
    env: dict[str, str] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return urlsplit(self.upstream).hostname or ""

    @property
    def port(self) -> int:
        return urlsplit(self.upstream).port or 443

    @property
    def netloc(self) -> str:
        return urlsplit(self.upstream).netloc

    @property
    def prefix(self) -> str:
        """The upstream's path every forwarded request stays under ("/" or "/a/b/")."""
        return urlsplit(self.upstream).path


@dataclass(frozen=True, slots=True)
class CredentialConfig:
    sources: dict[str, Source]
    routes: dict[str, Route]
    protected_refs: tuple[str, ...]
    port: int


def _fail(what: str, why: str) -> ConfigError:
    return ConfigError(f"{what}: {why}")


def _text(entry: dict[str, Any], key: str, what: str) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str):
        raise _fail(what, f"{key} must be a string")
    return value


def _source(entry: Any, index: int) -> Source:
    what = f"credential_sources[{index}]"
    if not isinstance(entry, dict):
        raise _fail(what, "must be a table ({name, file | env | git_credential | command})")
    keys = {"name", "file", "env", "git_credential", "command", "cache_seconds", "user", "home"}
    unknown = set(entry) - keys
    if unknown:
        raise _fail(what, f"unknown keys {sorted(unknown)}")
    name = _text(entry, "name", what)
    if not _NAME.match(name):
        raise _fail(what, "name must be lower-case letters, digits, '.', '_' or '-'")
    given = [k for k in ("file", "env", "git_credential", "command") if entry.get(k)]
    if len(given) != 1:
        raise _fail(what, "give exactly one of file, env, git_credential, command")
    kind = given[0]
    if kind == "command":
        return _command_source(entry, name, what)
    if kind == "file":
        path = _text(entry, "file", what)
        if not os.path.isabs(path):
            raise _fail(what, "file must be an absolute path")
        return Source(name, "file", file=path)
    if kind == "env":
        var = _text(entry, "env", what)
        if not _ENV_NAME.match(var):
            raise _fail(what, "env must be a variable name")
        return Source(name, "env", env=var)
    url = _text(entry, "git_credential", what)
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname or parts.username or parts.password:
        raise _fail(what, "git_credential must be an https://host[:port] URL")
    home = _text(entry, "home", what)
    if home and not os.path.isabs(home):
        raise _fail(what, "home must be an absolute path")
    user = _text(entry, "user", what)
    return Source(name, "git-credential", url=url, user=user, home=home)


# How long a command's answer may be kept, at most (a revoked token stops working soon).
MAX_CACHE_SECONDS = 3600.0


def _command_source(entry: dict[str, Any], name: str, what: str) -> Source:
    argv = entry["command"]
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise _fail(what, 'command must be a list of strings (["gh", "auth", "token"])')
    keep = entry.get("cache_seconds", 300)
    if not isinstance(keep, int | float) or isinstance(keep, bool):
        raise _fail(what, "cache_seconds must be a number")
    if not 0 <= keep <= MAX_CACHE_SECONDS:
        raise _fail(what, f"cache_seconds must lie in 0..{int(MAX_CACHE_SECONDS)}")
    home = _text(entry, "home", what)
    if home and not os.path.isabs(home):
        raise _fail(what, "home must be an absolute path")
    user = _text(entry, "user", what)
    return Source(
        name, "command", command=tuple(argv), cache_seconds=float(keep), user=user, home=home
    )


def _route(entry: Any, index: int, sources: dict[str, Source]) -> Route:
    what = f"credential_routes[{index}]"
    if not isinstance(entry, dict):
        raise _fail(what, "must be a table ({name, kind, upstream, source, ...})")
    keys = {"name", "kind", "upstream", "source", "header", "scheme", "username", "ca_file"}
    unknown = set(entry) - keys - {"env"}
    if unknown:
        raise _fail(what, f"unknown keys {sorted(unknown)}")
    name = _text(entry, "name", what)
    if not _NAME.match(name):
        raise _fail(what, "name must be lower-case letters, digits, '.', '_' or '-'")
    kind = _text(entry, "kind", what) or "http"
    if kind not in ("git", "http"):
        raise _fail(what, 'kind must be "git" or "http"')
    upstream = _text(entry, "upstream", what)
    try:
        parts = urlsplit(upstream)
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError:
        raise _fail(what, "upstream is not a URL") from None
    if parts.scheme != "https" or not parts.hostname or parts.query or parts.fragment:
        raise _fail(what, "upstream must be an https://host[:port]/path/ URL")
    if parts.username or parts.password:
        raise _fail(what, "upstream must not hold a user or password (use a source)")
    if ".." in parts.path.split("/") or "%" in parts.path:
        raise _fail(what, "upstream's path must be plain")
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    source = _text(entry, "source", what)
    if source not in sources:
        raise _fail(what, f"source {source!r} is not one of credential_sources")
    header = _text(entry, "header", what) or "Authorization"
    if not _HEADER.match(header):
        raise _fail(what, "header must be an HTTP header name")
    default_scheme = "Basic" if kind == "git" else "Bearer"
    scheme = entry.get("scheme", default_scheme)
    if scheme not in _SCHEMES:
        raise _fail(what, f"scheme must be one of {list(_SCHEMES)}")
    username = _text(entry, "username", what)
    ca_file = _text(entry, "ca_file", what)
    if ca_file and not os.path.isabs(ca_file):
        raise _fail(what, "ca_file must be an absolute path")
    env = entry.get("env", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise _fail(what, "env must be a table of strings")
    for var in env:
        if not _ENV_NAME.match(var) or _RESERVED_ENV.match(var):
            raise _fail(what, f"env may not set {var}")
    upstream = f"https://{parts.netloc}{path}"
    return Route(name, kind, upstream, source, header, scheme, username, ca_file, dict(env))


def load(config: Config) -> CredentialConfig:
    """The checked sources and routes; ConfigError naming the first bad entry."""
    sources: dict[str, Source] = {}
    for i, entry in enumerate(config.credential_sources):
        source = _source(entry, i)
        if source.name in sources:
            raise _fail(f"credential_sources[{i}]", f"name {source.name!r} is used twice")
        sources[source.name] = source
    routes: dict[str, Route] = {}
    for i, entry in enumerate(config.credential_routes):
        route = _route(entry, i, sources)
        if route.name in routes:
            raise _fail(f"credential_routes[{i}]", f"name {route.name!r} is used twice")
        routes[route.name] = route
    if routes and config.credential_route_port in (
        config.network_http_port,
        config.network_socks_port,
    ):
        raise _fail("credential_route_port", "must differ from the proxy's own ports")
    for pattern in config.credential_protected_refs:
        if not pattern.startswith("refs/"):
            raise _fail("credential_protected_refs", f"{pattern!r} must be a full ref (refs/...)")
    return CredentialConfig(
        sources, routes, tuple(config.credential_protected_refs), config.credential_route_port
    )
