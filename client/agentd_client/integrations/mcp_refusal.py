"""`agentctl mcp` when it cannot serve: say why, in the MCP handshake itself.

An MCP client starts the server and reads nothing but the protocol: a server that
prints its reason on stderr and exits leaves Codex saying only "handshaking with MCP
server failed" and Claude Code "failed to connect". So the reason (the daemon cannot
be reached, the session is unknown, the MCP SDK is missing) becomes the JSON-RPC error
of every request, `initialize` first, until the client hangs up. The framing is MCP's
stdio transport (one JSON message a line), written by hand: this must work when the
SDK itself is what is missing.
"""

from __future__ import annotations

import json
from typing import BinaryIO

# JSON-RPC's range for errors a server defines.
SERVER_ERROR = -32000


def refuse(message: str, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Answers each request on `stdin` with an error carrying `message`, until `stdin`
    ends; returns how many it answered. Notifications and replies get no answer."""
    answered = 0
    for line in stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if not isinstance(request, dict) or "method" not in request or "id" not in request:
            continue
        reply = {
            "jsonrpc": "2.0",
            "id": request["id"],
            "error": {"code": SERVER_ERROR, "message": message},
        }
        try:
            stdout.write(json.dumps(reply).encode() + b"\n")
            stdout.flush()
        except (BrokenPipeError, OSError):
            break  # the client hung up
        answered += 1
    return answered
