"""What the service keeps per proxied session: its listeners, running calls, counts
and the hosts it decided, for the Bash result, `session show` and `agentctl network`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class AskAnswer:
    allowed: bool
    decided_by: str
    # The rule an "always" answer added to the session ("" for once, or a refusal).
    rule: str = ""


@dataclass
class CallNet:
    """A running Bash call of the session: what was refused while it ran."""

    tool_use_id: str
    command: str
    refused: dict[str, str] = field(default_factory=dict)  # "host:port" -> why


@dataclass
class HostSeen:
    decision: str  # "allowed" / "refused"
    reason: str
    connections: int = 0
    last_ms: int = 0


@dataclass
class SessionNet:
    session_id: str
    path: str
    servers: list[asyncio.Server] = field(default_factory=list)
    # Its sockets are bound (served once the loop gets to it: connections wait meanwhile).
    listening: bool = False
    calls: list[CallNet] = field(default_factory=list)
    open: int = 0
    # The handler task of each open connection: owned here (asyncio's server drops its
    # reference once the transport is handed to a tunnel), cancelled when the session ends.
    handling: set[asyncio.Task[None]] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    bytes_out: int = 0
    bytes_in: int = 0
    hosts: dict[str, HostSeen] = field(default_factory=dict)
    asking: dict[tuple[str, int], asyncio.Future[AskAnswer]] = field(default_factory=dict)
    journaled: set[tuple[str, str, str]] = field(default_factory=set)
