"""`agentctl mcp install`: an MCP client's server entry that finds the same daemon later.

Codex and the official MCP SDK start a stdio server with a stripped environment (PATH,
HOME, USER and a few more: no XDG_RUNTIME_DIR, no AGENTD_*), and Claude Code with its
own. A login user's daemon listens under XDG_RUNTIME_DIR, so an entry that relied on
the environment would dial `~/.agentd/agentd.sock` and find nothing. The entry pins
where this command would connect now: the socket by its absolute path; an address
with its CA and token file; or the context by name, with the client config that
defines it (so a context's later changes, a new token say, still apply).
"""

from __future__ import annotations

import os
import shutil
import sys

from agentd_client.core import contexts
from agentd_client.core.paths import default_socket_path


def agentctl_path() -> str:
    """This agentctl, by an absolute path: the MCP client starts it without our PATH."""
    here = os.path.abspath(sys.argv[0])
    if os.path.basename(here) == "agentctl":
        return here
    beside = os.path.join(os.path.dirname(sys.executable), "agentctl")
    return beside if os.access(beside, os.X_OK) else shutil.which("agentctl") or "agentctl"


def pin(endpoint: contexts.Endpoint) -> tuple[list[str], dict[str, str]]:
    """(the connection flags, the environment) that reach `endpoint` from an empty
    environment and any working directory."""
    files = [
        (flag, os.path.abspath(os.path.expanduser(value)))
        for flag, key in (("--token-file", "token_file"), ("--ca", "ca"))
        if (value := getattr(endpoint, key))
    ]
    if endpoint.context:
        # The context's own files come with it; only what overrode them is pinned.
        flags = ["--context", endpoint.context]
        for flag, value in files:
            source = endpoint.sources.get(flag.lstrip("-").replace("-", "_"), "")
            if not source.startswith("context "):
                flags += [flag, value]
        return flags, {"AGENTD_CLIENT_CONFIG": str(contexts.config_path().absolute())}
    if endpoint.address:
        return ["--address", endpoint.address, *(x for pair in files for x in pair)], {}
    return ["--socket", os.path.abspath(endpoint.socket or default_socket_path())], {}


def reachable(endpoint: contexts.Endpoint) -> str:
    """Empty when the daemon answers now; else one line saying why not."""
    import grpc

    from agentd_client.core.errors import CliError, from_rpc_error

    try:
        with contexts.open_client(endpoint, wait_for_ready=False) as client:
            client.status(timeout=5)
    except CliError as exc:
        return exc.message
    except grpc.RpcError as exc:
        return from_rpc_error(exc, endpoint.where).message
    return ""
