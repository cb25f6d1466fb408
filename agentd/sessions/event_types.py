"""A session's events as types: one frozen dataclass per kind of the proto's Event oneof.

The emitter builds one of these; the journal (sessions/journal.py) and the wire
(api/wire.py) each have one encoder for them, so mypy stands between every emitter
and every reader. Nested parts keep the JSON shapes the journal has always held
(TypedDicts: a result, a task, a todo, a pushed ref), so they cost nothing to build.

`KIND` is the name in the journal's `kind` column and in the proto's oneof; an
agent's streamed text (`agent_live`) is the one journal kind besides them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypedDict


class ContentPayload(TypedDict, total=False):
    """A result's content block: text, or an image or document as base64."""

    type: str
    text: str
    media_type: str
    base64: str


class ResultPayload(TypedDict):
    """A tool's result as events and the journal carry it (executor.result_payload).
    `data` is JSON-able, or an EncodedDict whose encodings were made beforehand."""

    tool_use_id: str
    content: list[ContentPayload]
    is_error: bool
    data: Any


class TaskPayload(TypedDict):
    """A background task (runs.tasks.Task.to_dict)."""

    id: str
    session_id: str
    command: str
    description: str
    status: str
    exit_code: int | None
    output_path: str
    started_ms: int
    ended_ms: int
    tool_use_id: str


class TodoPayload(TypedDict):
    """One item of TodoWrite's list, as the model wrote it (the journal's reader passes
    older rows on as they are: the wire encoder reads each key with a default)."""

    content: str
    status: str
    activeForm: str


class PushedRef(TypedDict):
    ref: str
    old: str
    new: str
    kind: str
    protected: bool


@dataclass(frozen=True, slots=True)
class CallStarted:
    KIND: ClassVar[str] = "call_started"
    tool_use_id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a running call stands: live only, never journaled."""

    KIND: ClassVar[str] = "progress"
    tool_use_id: str
    elapsed_ms: int = 0
    output: str = ""
    message: str = ""
    output_id: str = ""
    output_size: int = 0
    last_line: str = ""
    permission_request_id: str = ""
    attached_clients: int = 0


@dataclass(frozen=True, slots=True)
class CallFinished:
    KIND: ClassVar[str] = "call_finished"
    name: str
    duration_ms: int
    result: ResultPayload
    # Ended by the start after a crash (sessions/recovery.py), not by the call itself.
    interrupted: bool = False


@dataclass(frozen=True, slots=True)
class TodosChanged:
    KIND: ClassVar[str] = "todos_changed"
    todos: list[TodoPayload]


@dataclass(frozen=True, slots=True)
class FilesChanged:
    """A writing call (or a restore) changed files: its checkpoint (agentd/changes/)."""

    KIND: ClassVar[str] = "files_changed"
    tool_use_id: str
    tool_name: str
    checkpoint: int  # its number in the session
    added: int
    changed: int
    deleted: int
    # The first paths, relative to their root ("+" added, "~" changed, "-" deleted).
    paths: list[str]
    not_restorable: int
    action: str = "call"  # call, task, restore, rewind
    by: str = ""  # who asked for a restore


@dataclass(frozen=True, slots=True)
class TaskStarted:
    KIND: ClassVar[str] = "task_started"
    task: TaskPayload


@dataclass(frozen=True, slots=True)
class TaskFinished:
    KIND: ClassVar[str] = "task_finished"
    task: TaskPayload


@dataclass(frozen=True, slots=True)
class PermissionRequested:
    KIND: ClassVar[str] = "permission_requested"
    request_id: str
    tool_use_id: str
    tool_name: str
    input: Mapping[str, Any]
    reasons: list[str]
    suggested_rule: str
    expires_ms: int
    rule_choices: list[str]


@dataclass(frozen=True, slots=True)
class PermissionResolved:
    KIND: ClassVar[str] = "permission_resolved"
    request_id: str
    decision: str
    scope: str
    decided_by: str
    rule: str = ""


@dataclass(frozen=True, slots=True)
class PermissionDecided:
    KIND: ClassVar[str] = "permission_decided"
    tool_use_id: str
    tool_name: str
    behavior: str
    decided_by: str
    reason: str


@dataclass(frozen=True, slots=True)
class CwdChanged:
    KIND: ClassVar[str] = "cwd_changed"
    cwd: str
    previous: str


@dataclass(frozen=True, slots=True)
class SessionClosed:
    KIND: ClassVar[str] = "session_closed"


@dataclass(frozen=True, slots=True)
class Gap:
    """A subscriber fell behind: made for it alone, never journaled."""

    KIND: ClassVar[str] = "gap"
    from_seq: int
    to_seq: int


@dataclass(frozen=True, slots=True)
class SettingsIgnored:
    KIND: ClassVar[str] = "settings_ignored"
    path: str
    sha256: str
    # None when the file could not be read.
    widens: Mapping[str, Any] | None
    reason: str


@dataclass(frozen=True, slots=True)
class Agent:
    """An agent loop's event (agentctl agent), as the journal keeps it: the AgentEvent
    message as JSON (sessions/agent_events.py). `live`: a text delta, not journaled."""

    KIND: ClassVar[str] = "agent"
    LIVE_KIND: ClassVar[str] = "agent_live"
    event: Mapping[str, Any]
    live: bool = False


@dataclass(frozen=True, slots=True)
class GitPush:
    KIND: ClassVar[str] = "git_push"
    tool_use_id: str
    route: str
    repository: str
    updates: list[PushedRef]
    allowed: bool
    decided_by: str


@dataclass(frozen=True, slots=True)
class TaskControlled:
    KIND: ClassVar[str] = "task_controlled"
    task_id: str
    action: str
    by: str
    bytes: int = 0
    reason: str = ""
    signal: str = ""
    # (rows, cols) of a PTY: opened with one, or resized.
    size: tuple[int, int] | None = None
    stdin: bool = False


@dataclass(frozen=True, slots=True)
class PortForward:
    KIND: ClassVar[str] = "port_forward"
    action: str
    forward_id: str
    connection_id: str = ""
    port: int = 0
    address: str = ""
    local: str = ""
    by: str = ""
    bytes_in: int = 0
    bytes_out: int = 0
    how: str = ""


EventBody = (
    CallStarted
    | Progress
    | CallFinished
    | TodosChanged
    | FilesChanged
    | TaskStarted
    | TaskFinished
    | PermissionRequested
    | PermissionResolved
    | PermissionDecided
    | CwdChanged
    | SessionClosed
    | Gap
    | SettingsIgnored
    | Agent
    | GitPush
    | TaskControlled
    | PortForward
)

# Every kind, by the name the proto's oneof and the journal give it.
BY_KIND: dict[str, type[EventBody]] = {
    cls.KIND: cls
    for cls in (
        CallStarted,
        Progress,
        CallFinished,
        TodosChanged,
        FilesChanged,
        TaskStarted,
        TaskFinished,
        PermissionRequested,
        PermissionResolved,
        PermissionDecided,
        CwdChanged,
        SessionClosed,
        Gap,
        SettingsIgnored,
        Agent,
        GitPush,
        TaskControlled,
        PortForward,
    )
}


def journal_kind(body: EventBody) -> str:
    """The name in the journal's kind column (an agent's text delta has its own)."""
    if isinstance(body, Agent) and body.live:
        return Agent.LIVE_KIND
    return body.KIND


def live_only(body: EventBody) -> bool:
    """Not journaled: progress, a gap, and an agent's streamed text (its whole message
    is journaled when it ends)."""
    return isinstance(body, Progress | Gap) or (isinstance(body, Agent) and body.live)
