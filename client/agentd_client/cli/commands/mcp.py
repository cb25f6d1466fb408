"""agentctl mcp: a session's tools served over MCP on stdio; `mcp install` for a client."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from agentd_client.cli import names
from agentd_client.core.client import Client
from agentd_client.core.errors import OK, Refused, Usage, need
from agentd_client.terminal import streams as terminal
from agentd_client.terminal.display import print_json
from agentd_client.terminal.sanitize import line as one


def cmd_mcp(c: Client, args: argparse.Namespace) -> int:
    """The session's tools over MCP on stdin/stdout; a new session with --workspace."""
    need("mcp", "mcp", "agentctl mcp")
    import asyncio

    from agentd_client.cli.version import version
    from agentd_client.core import contexts
    from agentd_client.core.aio import AsyncClient
    from agentd_client.integrations.mcp_server import serve_stdio

    if args.workspace and args.session:
        raise Usage("give --session or --workspace, not both")
    created = None
    if args.workspace:
        created = c.create_session(
            args.workspace, permission_mode=args.mode or "", allow_network=args.net
        ).id
    session_id = created or names.of_args(c, args)
    # Asked before serving: a daemon that is not there, or a session that is closed, is
    # the handshake's error (cli.main), not a server whose every call fails later.
    if c.get_session(session_id).closed:
        raise Refused(f"session {session_id} is closed; serve an open one, or --workspace")
    # stdout is the protocol's: what a person should know goes to stderr.
    if args.json:
        print(json.dumps({"serving": session_id, "transport": "stdio"}), file=sys.stderr)
    else:
        print(
            f"agentctl: serving session {one(session_id)} over MCP on stdio; "
            f"answer its asks with `agentctl attach {one(session_id)}`",
            file=sys.stderr,
        )

    async def serve() -> None:
        async with contexts.open_client(args.endpoint, factory=AsyncClient) as aio:
            await serve_stdio(aio, session_id, version())

    args.mcp_serving = True  # from here on the MCP SDK answers the client, errors too
    # stdout is the protocol's from here: JSON-RPC, which escapes what it carries.
    terminal.protocol_stdout()

    try:
        asyncio.run(serve())
    finally:
        if created:
            c.close_session(created)
    return OK


def cmd_mcp_install(args: argparse.Namespace) -> int:
    """Make an MCP client use agentd's tools instead of its own, in a workspace."""
    from agentd_client.cli.commands.contexts import endpoint_of
    from agentd_client.integrations import claude_code, codex
    from agentd_client.integrations.mcp_install import agentctl_path, pin, reachable

    endpoint = endpoint_of(args)
    workspace = os.path.abspath(os.path.expanduser(args.workspace))
    if not os.path.isdir(workspace):
        raise Usage(f"--workspace {args.workspace} is not a directory")
    flags, env = pin(endpoint)
    which = ["--session", args.session] if args.session else ["--workspace", workspace]
    server: dict[str, Any] = {"command": agentctl_path(), "args": [*flags, "mcp", *which]}
    if env:
        server["env"] = env
    if args.client == "codex":
        files, run = codex.install(server), codex.RUN
    else:
        files, run = claude_code.install(workspace, server), claude_code.RUN
    problem = reachable(endpoint)
    if args.json:
        print_json(
            {
                "client": args.client,
                "files": files,
                "server": server,
                "daemon": endpoint.where,
                "reachable": not problem,
                "run": run,
            }
        )
        return OK
    for f in files:
        print(f"updated {f}")
    print(f"the server dials {endpoint.where}, pinned in its command line")
    if problem:
        print(f"agentctl: warning: {problem}", file=sys.stderr)
    print(f"now run, in {workspace}: {run}")
    return OK
