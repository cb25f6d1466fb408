"""`agentctl mcp install codex`: make Codex use agentd's tools instead of its own.

Found by running Codex 0.169 offline against a fake Responses API
(tests/e2e/test_mcp_codex.py). Codex reads MCP servers from its own configuration only,
`$CODEX_HOME/config.toml` (default `~/.codex/config.toml`), for every project; the
entry `[mcp_servers.agentd]` is written there (the rest of the file kept, replaced
whole by a rename):

- `required = true`: Codex waits for the server before the first turn (else the first
  request goes out without agentd's tools);
- `default_tools_approval_mode = "approve"`: agentd, not Codex, decides what needs
  asking (else `codex exec` refuses every MCP call: "requires approval, but approval
  policy is never");
- its built-in shell goes with `-c features.shell_tool=false -c
  features.unified_exec=false` at launch, for that run only.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from agentd_client.core.errors import Refused, need
from agentd_client.core.files import write_atomic

SERVER = "agentd"
RUN = "codex -c features.shell_tool=false -c features.unified_exec=false"


def config_path() -> Path:
    home = os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")
    return Path(home) / "config.toml"


def _load(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise Refused(f"cannot read {path} ({exc}); fix or move it, then run again") from None


def _save(path: Path, data: dict[str, Any]) -> None:
    import tomli_w

    write_atomic(path, tomli_w.dumps(data).encode())


def install(server: dict[str, Any], path: Path | None = None) -> list[str]:
    """Writes the server entry into Codex's configuration; returns the files changed."""
    need("tomli_w", "cli", "agentctl mcp install codex")
    path = path or config_path()
    data = _load(path)
    servers = data.setdefault("mcp_servers", {})
    if not isinstance(servers, dict):
        raise Refused(f"{path}: mcp_servers is not a table; fix it, then run again")
    servers[SERVER] = {
        **server,
        "required": True,
        "default_tools_approval_mode": "approve",
        # Codex waits 10 s for a server by default: agentctl's start (Python, grpc) can
        # take longer than that on a loaded machine, and a required server that times out
        # stops the session.
        "startup_timeout_sec": 60,
    }
    _save(path, data)
    return [str(path)]
