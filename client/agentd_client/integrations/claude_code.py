"""`agentctl mcp install claude-code`: make Claude Code use agentd's tools instead of its own.

Found by running Claude Code 2.1 against a fake Messages API
(tests/e2e/test_mcp_claude_code.py). Everything goes into the user's own configuration
and nothing into the workspace, whose files may come from anyone:

- `~/.claude.json`, `projects[WS].mcpServers.agentd`: the server, in Claude Code's
  "local" scope, which needs no approval (a workspace's `.mcp.json` would need
  `enabledMcpjsonServers` and a trusted workspace, and trusting a workspace lets its
  own settings and hooks act);
- `~/.claude/settings.json`: `permissions.allow` gets `mcp__agentd`, so agentd, not
  Claude Code, decides what needs asking; `env` gets `ENABLE_TOOL_SEARCH=false` (else
  MCP tools hide behind ToolSearch) and `MCP_CONNECTION_NONBLOCKING=false` (else the
  first turn goes out before the server is connected);
- the built-in tools go with `claude --tools ""` at launch: no setting removes them,
  and a deny rule `Bash` would deny `mcp__agentd__Bash` too.

Each file is merged (other content kept) and replaced whole by a rename.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentd_client.core.errors import Refused
from agentd_client.core.files import write_atomic

SERVER = "agentd"
ENV = {"ENABLE_TOOL_SEARCH": "false", "MCP_CONNECTION_NONBLOCKING": "false"}
ALLOW = f"mcp__{SERVER}"
RUN = 'claude --tools ""'


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise Refused(f"cannot read {path} ({exc}); fix or move it, then run again") from None
    if not isinstance(data, dict):
        raise Refused(f"{path} does not hold a JSON object; fix or move it, then run again")
    return data


def _save(path: Path, data: dict[str, Any]) -> None:
    write_atomic(path, (json.dumps(data, indent=2) + "\n").encode(), dir_mode=0o777)


def _object(parent: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = parent.setdefault(key, {})
    if not isinstance(value, dict):
        raise Refused(f"{path}: {key} is not a JSON object; fix it, then run again")
    return value


def install(workspace: str, server: dict[str, Any], home: Path | None = None) -> list[str]:
    """Writes the configuration; returns the files changed."""
    home = home or Path.home()
    state_path = home / ".claude.json"
    state = _load(state_path)
    project = _object(_object(state, "projects", state_path), workspace, state_path)
    _object(project, "mcpServers", state_path)[SERVER] = server

    settings_path = home / ".claude" / "settings.json"
    settings = _load(settings_path)
    _object(settings, "env", settings_path).update(ENV)
    permissions = _object(settings, "permissions", settings_path)
    allow = permissions.setdefault("allow", [])
    if not isinstance(allow, list):
        raise Refused(f"{settings_path}: permissions.allow is not a list; fix it, then run again")
    if ALLOW not in allow:
        allow.append(ALLOW)

    _save(state_path, state)
    _save(settings_path, settings)
    return [str(state_path), str(settings_path)]
