"""Where agentctl connects: flags, environment, and named contexts in the client config.

A context names a daemon the way kubectl's and docker's contexts do: an address
with its CA and token file (the TLS listener), or a socket (the local one, or one
forwarded over SSH), and optionally a default session. The file is
`$AGENTD_CLIENT_CONFIG`, else `$XDG_CONFIG_HOME/agentd/client.toml`:

    current_context = "devbox"

    [contexts.devbox]
    address = "devbox.example:7777"
    ca = "/home/me/.config/agentd/devbox/ca.pem"
    token_file = "/home/me/.config/agentd/devbox/token"
    session = "web"

    [contexts.web]                         # one of many daemons behind one entry point
    address = "router.example:7443"
    server_name = "web.agentd.example"     # the TLS name sent (SNI) and checked
    ca = "/home/me/.config/agentd/web/ca.pem"
    token_file = "/home/me/.config/agentd/web/token"

Precedence, highest first: flags, each overriding one field (`--address` keeps the
context's CA and token file, as kubectl's `--server` does); then `--context NAME` as a
whole; then the environment (`AGENTD_ADDRESS`, `AGENTD_SERVER_NAME`, `AGENTD_TOKEN_FILE`,
`AGENTD_CA`, `AGENTD_SOCKET`, `AGENTD_SESSION`); then `AGENTD_CONTEXT` or the file's
current context; then the default unix socket.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentd_client.core.exits import Unreachable, Usage, need
from agentd_client.core.files import write_atomic
from agentd_client.core.paths import default_socket_path

if TYPE_CHECKING:
    from agentd_client.core.client import Client

FIELDS = ("address", "server_name", "socket", "token_file", "ca", "session")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*$")
_ENV = {
    "address": "AGENTD_ADDRESS",
    "server_name": "AGENTD_SERVER_NAME",
    "token_file": "AGENTD_TOKEN_FILE",
    "ca": "AGENTD_CA",
    "socket": "AGENTD_SOCKET",
    "session": "AGENTD_SESSION",
}


def config_path() -> Path:
    if path := os.environ.get("AGENTD_CLIENT_CONFIG"):
        return Path(path)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "agentd" / "client.toml"


@dataclass
class Endpoint:
    """Everything needed to open a client, and where it came from (for error messages)."""

    address: str = ""
    # The name TLS sends (SNI) and checks the daemon's certificate against, when the
    # address is an entry point that routes by name rather than the daemon itself.
    server_name: str = ""
    socket: str = ""
    token_file: str = ""
    ca: str = ""
    session: str = ""
    context: str = ""
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        label = self.address or f"unix:{self.socket or default_socket_path()}"
        if self.address and self.server_name:
            label = f"{self.server_name} via {self.address}"
        return f"{label} (context {self.context})" if self.context else label

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load() -> dict[str, Any]:
    path = config_path()
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return {"contexts": {}}
    except OSError as exc:
        raise Unreachable(f"cannot read the client config {path}: {exc}") from None
    import tomllib  # only when there is a config to read

    try:
        data = tomllib.loads(raw.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise Unreachable(f"cannot read the client config {path}: {exc}") from None
    contexts = data.get("contexts", {})
    if not isinstance(contexts, dict) or not all(isinstance(v, dict) for v in contexts.values()):
        raise Unreachable(f"{path}: [contexts.NAME] tables expected")
    data["contexts"] = contexts
    return data


def save(data: dict[str, Any]) -> Path:
    """Written whole to a temp file and renamed: a crash never leaves half a config."""
    need("tomli_w", "cli", "changing contexts")
    import tomli_w

    path = config_path()
    write_atomic(path, tomli_w.dumps(data).encode(), keep_mode=False)
    return path


def _absolute(path: str, what: str) -> str:
    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(full):
        raise Usage(f"{what} {path} is not a file")
    return full


def add(
    name: str,
    *,
    address: str = "",
    socket: str = "",
    token_file: str = "",
    ca: str = "",
    session: str = "",
    use: bool = False,
    server_name: str = "",
) -> dict[str, str]:
    """Adds (or replaces) context `name`; files are checked and stored as absolute paths."""
    if not _NAME.match(name):
        raise Usage(f"context name {name!r}: use letters, digits, '.', '_' or '-'")
    if bool(address) == bool(socket):
        raise Usage("a context needs --address HOST:PORT (TLS) or --socket PATH, not both")
    if address and not token_file:
        raise Usage("a context with --address needs --token-file (`agentd tls init` makes one)")
    if server_name and not address:
        raise Usage("--server-name goes with --address (the entry point that routes by it)")
    _check_server_name(server_name)
    entry = {"address": address, "server_name": server_name, "session": session}
    if socket:
        entry["socket"] = os.path.abspath(os.path.expanduser(socket))
    if token_file:
        entry["token_file"] = _absolute(token_file, "--token-file")
        if why := open_to_others(token_file, os.stat(entry["token_file"]).st_mode):
            raise Usage(f"--token-file {why}")
    if ca:
        entry["ca"] = _absolute(ca, "--ca")
    entry = {k: v for k, v in entry.items() if v}
    data = load()
    data["contexts"][name] = entry
    if use or not data.get("current_context"):
        data["current_context"] = name
    save(data)
    return entry


def _check_server_name(name: str) -> None:
    if name and not _HOST.match(name):
        raise Usage(f"--server-name {name!r}: give a DNS name, such as web.agentd.example")


def use(name: str) -> None:
    data = load()
    if name not in data["contexts"]:
        raise Usage(f"no context {name!r}; {_known(data)}")
    data["current_context"] = name
    save(data)


def remove(name: str) -> None:
    data = load()
    if name not in data["contexts"]:
        raise Usage(f"no context {name!r}; {_known(data)}")
    del data["contexts"][name]
    if data.get("current_context") == name:
        data.pop("current_context")
    save(data)


def _known(data: dict[str, Any]) -> str:
    names = sorted(data["contexts"])
    if not names:
        return "add one with `agentctl context add NAME --address HOST:PORT ...`"
    return "known: " + ", ".join(names)


def resolve(flags: dict[str, str | None], context_flag: str | None) -> Endpoint:
    """The endpoint from flags, `--context`, the environment and the config file."""
    endpoint = Endpoint()
    data: dict[str, Any] | None = None
    name = context_flag or os.environ.get("AGENTD_CONTEXT") or ""
    source = "--context" if context_flag else "AGENTD_CONTEXT"
    if not name:
        data = load()
        name = data.get("current_context", "")
        source = str(config_path())
    if name:
        data = data if data is not None else load()
        entry = data["contexts"].get(name)
        if entry is None:
            raise Unreachable(f"no context {name!r} (from {source}); {_known(data)}")
        endpoint.context = name
        for key in FIELDS:
            if value := entry.get(key, ""):
                setattr(endpoint, key, str(value))
                endpoint.sources[key] = f"context {name}"
    # An explicit --context wins over the environment; otherwise the environment is the
    # more specific choice (a shell that exports AGENTD_ADDRESS means it).
    env_layer = {} if context_flag else {k: os.environ.get(v, "") for k, v in _ENV.items()}
    flag_layer = {k: v or "" for k, v in flags.items()}
    for layer, label in ((env_layer, "environment"), (flag_layer, "flag")):
        if label == "flag" and layer.get("address") and layer.get("socket"):
            raise Usage("give --address or --socket, not both")
        if label == "flag" and (layer.get("address") or layer.get("socket")):
            # A flag overrides one field, as kubectl's --server does: the context's CA,
            # token file and session stay; only the other kind of endpoint goes.
            other = "socket" if layer.get("address") else "address"
            setattr(endpoint, other, "")
            endpoint.sources.pop(other, None)
        elif layer.get("address") or layer.get("socket"):
            # A new endpoint from the environment replaces the old one whole: its address,
            # socket, CA and token (a shell that exports AGENTD_ADDRESS means that daemon).
            for key in ("address", "server_name", "socket", "token_file", "ca"):
                setattr(endpoint, key, "")
                endpoint.sources.pop(key, None)
            # ... and is no longer the context's, nor is its default session.
            endpoint.context = ""
            if endpoint.sources.get("session", "").startswith("context "):
                endpoint.session = ""
                endpoint.sources.pop("session")
        for key in FIELDS:
            if value := layer.get(key, ""):
                setattr(endpoint, key, value)
                endpoint.sources[key] = label
    if endpoint.address and endpoint.socket:
        # Both from one layer: the person asked for two endpoints.
        raise Usage("give --address or --socket, not both")
    return endpoint


def open_to_others(path: str, mode: int) -> str:
    """Why a secret file is refused, or "": as ssh refuses a private key that anyone but
    its owner may read or change, since whoever reads the token may call the daemon."""
    if not mode & 0o077:
        return ""
    return (
        f"{path} is open to other users (mode {stat.S_IMODE(mode):04o}); agentctl refuses "
        f"it, as ssh refuses such a key: chmod 600 {path}"
    )


def _read_file(path: str, what: str, endpoint: Endpoint, private: bool = False) -> bytes:
    source = endpoint.sources.get(what.lstrip("-").replace("-", "_"), "")
    hint = f" (from {source})" if source else ""
    try:
        with open(os.path.expanduser(path), "rb") as f:
            if private and (why := open_to_others(path, os.fstat(f.fileno()).st_mode)):
                raise Unreachable(f"{what} {why}{hint}")
            return f.read()
    except OSError as exc:
        raise Unreachable(f"cannot read {what} {path}{hint}: {exc.strerror}") from None


def open_client(
    endpoint: Endpoint, *, wait_for_ready: bool = True, factory: Callable[..., Any] | None = None
) -> Any:
    """A Client for the endpoint: the unix socket, or TLS with the token from its file.

    agentctl passes wait_for_ready=False: a person waiting should hear at once that
    the daemon is not there, not after a deadline. `factory=AsyncClient` for asyncio;
    Client by default (imported here: resolving an endpoint needs no gRPC)."""
    if factory is None:
        from agentd_client.core.client import Client

        factory = Client
    if not endpoint.address:
        return factory(endpoint.socket or None, wait_for_ready=wait_for_ready)
    # Without a token file the call goes out without a token, and the daemon's refusal
    # (exit 3) says what is missing.
    token = ""
    if endpoint.token_file:
        raw = _read_file(endpoint.token_file, "--token-file", endpoint, private=True)
        token = raw.decode().strip()
        if not token:
            raise Unreachable(f"token file {endpoint.token_file} is empty")
    _check_server_name(endpoint.server_name)
    roots = _read_file(endpoint.ca, "--ca", endpoint) if endpoint.ca else None
    return factory(
        address=endpoint.address,
        server_name=endpoint.server_name,
        token=token,
        root_certificates=roots,
        wait_for_ready=wait_for_ready,
    )


def connect(context: str | None = None) -> Client:
    """A Client for `context`, or wherever agentctl would connect now (environment, the
    current context, the local socket)."""
    return open_client(resolve({}, context))
