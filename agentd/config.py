"""Every setting of the daemon and its default, in one place.

Precedence, lowest first: defaults, the TOML file (`--config`, else
`$AGENTD_CONFIG`, else `$XDG_CONFIG_HOME/agentd/config.toml` when it exists),
environment variables (`AGENTD_SOCKET`, `AGENTD_STATE_DIR`), command-line flags.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields
from typing import Any

from agentd.errors import InvalidRequest

# The client finds the socket the same way; one definition serves both.
from agentd_client import default_socket_path


def default_state_dir() -> str:
    if path := os.environ.get("AGENTD_STATE_DIR"):
        return path
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "agentd")


def default_config_file() -> str | None:
    if path := os.environ.get("AGENTD_CONFIG"):
        return path
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    path = os.path.join(base, "agentd", "config.toml")
    return path if os.path.exists(path) else None


@dataclass
class Config:
    socket_path: str = field(default_factory=default_socket_path)
    state_dir: str = field(default_factory=default_state_dir)
    # TCP is off unless set ("127.0.0.1:7777"); it then needs tls_cert, tls_key and token.
    tcp_listen: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    token: str = ""
    log_level: str = "INFO"
    # Largest request a client may send, in bytes.
    max_message_bytes: int = 16 * 1024 * 1024
    default_permission_mode: str = "default"
    # Seconds an "ask" waits for a person before it becomes a deny.
    permission_timeout_seconds: float = 60.0
    # Rules from the daemon's own config, in Claude Code's syntax.
    allow_rules: list[str] = field(default_factory=list)
    deny_rules: list[str] = field(default_factory=list)
    ask_rules: list[str] = field(default_factory=list)
    # Workspaces whose .claude/settings*.json hooks may run on this host.
    trusted_workspaces: list[str] = field(default_factory=list)
    # The uid a root daemon's sandboxed commands run as when the session owner is root.
    sandbox_uid: int = 65534
    sandbox_gid: int = 65534
    # Per Bash call limits.
    bash_memory_bytes: int = 4 * 1024**3
    bash_processes: int = 512
    bash_file_size_bytes: int = 8 * 1024**3
    bash_open_files: int = 4096
    # Bytes a background task's output file may hold; older output is dropped past it.
    task_output_bytes: int = 64 * 1024 * 1024
    # Seconds a task may run before it is stopped.
    task_max_seconds: float = 3600.0
    # Log lines as text (default) or one JSON object per line ("json").
    log_format: str = "text"
    # Prometheus metrics on this local address ("127.0.0.1:9464"); off when empty.
    metrics_listen: str = ""

    @classmethod
    def load(cls, path: str | None = None, **overrides: Any) -> Config:
        values: dict[str, Any] = {}
        path = path or default_config_file()
        if path:
            try:
                with open(path, "rb") as f:
                    values.update(tomllib.load(f))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise InvalidRequest(f"cannot read config file {path}: {exc}") from exc
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InvalidRequest(f"unknown settings in {path}: {', '.join(unknown)}")
        for key, env in (("socket_path", "AGENTD_SOCKET"), ("state_dir", "AGENTD_STATE_DIR")):
            if os.environ.get(env):
                values[key] = os.environ[env]
        values.update({k: v for k, v in overrides.items() if v is not None})
        config = cls(**values)
        config.socket_path = os.path.abspath(config.socket_path)
        config.state_dir = os.path.abspath(config.state_dir)
        return config

    @property
    def db_path(self) -> str:
        return os.path.join(self.state_dir, "agentd.db")

    def session_dir(self, session_id: str) -> str:
        """Where a session keeps its task output files and saved large results."""
        return os.path.join(self.state_dir, "sessions", session_id)
