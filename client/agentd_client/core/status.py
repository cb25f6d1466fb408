"""The daemon's status as a typed object (Client.status()): fields a program reads and a
person can print, not a protobuf message."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agentd_client.core import structs


@dataclass(frozen=True, slots=True)
class StateUsage:
    """What the daemon's state takes and how it is kept bounded."""

    used_bytes: int
    max_bytes: int  # the cap; 0 for none
    retention_seconds: float  # closed sessions are reaped this long after closing
    session_idle_seconds: float  # open sessions idle this long are closed; 0 for never
    sessions_idle_closed: int
    sessions_reaped: int
    closed_sessions: int
    disk_full: bool
    events_unjournaled: int
    database_problem: str  # one line saying what to do; "" while it is fine

    @classmethod
    def from_pb(cls, x: Any) -> StateUsage:
        return cls(
            x.used_bytes, x.max_bytes, x.retention_seconds, x.session_idle_seconds,
            x.sessions_idle_closed, x.sessions_reaped, x.closed_sessions, x.disk_full,
            x.events_unjournaled, x.database_problem,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Status:
    """Is the daemon up, and what is it doing."""

    version: str
    pid: int
    uptime_seconds: float
    open_sessions: int
    running_calls: int
    running_tasks: int
    socket_path: str  # on the daemon's machine
    state_dir: str
    sandbox: dict[str, Any]  # what the sandbox can enforce there (agentd-sandbox check)
    calls_served: int
    pending_asks: int
    tasks_readopted: int
    state: StateUsage | None

    @classmethod
    def from_pb(cls, x: Any) -> Status:
        return cls(
            version=x.version,
            pid=x.pid,
            uptime_seconds=x.uptime_seconds,
            open_sessions=x.open_sessions,
            running_calls=x.running_calls,
            running_tasks=x.running_tasks,
            socket_path=x.socket_path,
            state_dir=x.state_dir,
            sandbox=structs.from_struct(x.sandbox, "sandbox") if x.HasField("sandbox") else {},
            calls_served=x.calls_served,
            pending_asks=x.pending_asks,
            tasks_readopted=x.tasks_readopted,
            state=StateUsage.from_pb(x.state) if x.HasField("state") else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
