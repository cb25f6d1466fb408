"""Which hosts the sandbox's ssh-agent may sign for, and the rules that allow or deny a
key for a host: `ssh_agent_hosts` entries, their keys in known_hosts, and
`SshAgent(HOST)` / `SshAgent(HOST KEY)` rules of the daemon's config or the session."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from agentd.credentials import ssh_agent_wire as wire
from agentd.credentials.ssh_agent_keys import host_keys, known_host_name
from agentd.foundation.config import Config
from agentd.foundation.errors import ConfigError
from agentd.sessions.session import Session


@dataclass(frozen=True, slots=True)
class Host:
    """A host the agent may sign for, as `ssh_agent_hosts` names it."""

    name: str
    port: int

    @property
    def shown(self) -> str:
        return self.name if self.port == 22 else f"{self.name}:{self.port}"


def parse_hosts(entries: list[str]) -> list[Host]:
    hosts = []
    for entry in entries:
        name, sep, port = entry.strip().lower().rpartition(":")
        if not sep:
            name, port = port, "22"
        if not name or not port.isdigit() or not 0 < int(port) < 65536 or "/" in name:
            raise ConfigError(
                f'ssh_agent_hosts: {entry!r} is not a host or host:port ("git.example.com")'
            )
        hosts.append(Host(name, int(port)))
    return hosts


def rule_for(host: Host, fp: str) -> str:
    """The rule an "always" answer adds to the session: this key, this host."""
    return f"SshAgent({host.shown} {fp})"


def ssh_rule_spec(text: str) -> str | None:
    """What an `SshAgent(...)` rule names ("host[:port]" or "host[:port] SHA256:..."),
    the host lower-cased; None for any other rule."""
    if not (text.startswith("SshAgent(") and text.endswith(")")):
        return None
    where, _, key = text[len("SshAgent(") : -1].strip().partition(" ")
    where = where.lower()
    if where.endswith(":22"):
        where = where[:-3]
    return f"{where} {key.strip()}" if key.strip() else where


def known_hosts_text(hosts: list[Host], known_hosts: str) -> str:
    """The known_hosts lines of the configured hosts, for the sandbox's ssh."""
    lines = []
    for host in hosts:
        name = known_host_name(host.name, host.port)
        for blob in sorted(host_keys(known_hosts, host.name, host.port)):
            kind = wire.key_type(blob).decode()
            lines.append(f"{name} {kind} {base64.b64encode(blob).decode()}\n")
    return "".join(lines)


def hosts_of(hosts: list[Host], known_hosts: str, host_key: bytes) -> list[Host]:
    """Every configured host whose known keys hold `host_key`: one server may be known
    under several names, and a decision about any of them is about it."""
    return [h for h in hosts if host_key in host_keys(known_hosts, h.name, h.port)]


def ruled(
    config: Config, session: Session, kind: str, host: Host, fp: str, sessions: bool = True
) -> str | None:
    """The `SshAgent(HOST)` or `SshAgent(HOST KEY)` rule of the daemon's config or
    the session's own (unless not `sessions`) that allows or denies (`kind`) this key
    for this host. Never a workspace's: its settings may deny the host (network
    rules), never grant."""
    wanted = {host.shown, f"{host.shown} {fp}"}
    sources = [("daemon config", getattr(config, f"{kind}_rules"))]
    if sessions:
        sources.append(("session", getattr(session, f"{kind}_rules")))
    for source, texts in sources:
        for text in texts:
            if ssh_rule_spec(text) in wanted:
                return f"{text} ({source})"
    return None
