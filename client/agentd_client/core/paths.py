"""Where the daemon's socket is by default: standard library only, so `agentd health`
(a probe with a 3 s budget) and the daemon can ask without loading the client."""

from __future__ import annotations

import os


def default_socket_path() -> str:
    """The daemon's default socket, found the same way the daemon chooses it."""
    if path := os.environ.get("AGENTD_SOCKET"):
        return path
    if runtime := os.environ.get("XDG_RUNTIME_DIR"):
        return os.path.join(runtime, "agentd", "agentd.sock")
    return os.path.join(os.path.expanduser("~"), ".agentd", "agentd.sock")
