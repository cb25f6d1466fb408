from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Status(_message.Message):
    __slots__ = ("version", "pid", "uptime_seconds", "open_sessions", "running_calls", "running_tasks", "socket_path", "state_dir", "sandbox", "calls_served", "pending_asks", "state", "tasks_readopted")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    OPEN_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_CALLS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_TASKS_FIELD_NUMBER: _ClassVar[int]
    SOCKET_PATH_FIELD_NUMBER: _ClassVar[int]
    STATE_DIR_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    CALLS_SERVED_FIELD_NUMBER: _ClassVar[int]
    PENDING_ASKS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TASKS_READOPTED_FIELD_NUMBER: _ClassVar[int]
    version: str
    pid: int
    uptime_seconds: float
    open_sessions: int
    running_calls: int
    running_tasks: int
    socket_path: str
    state_dir: str
    sandbox: _struct_pb2.Struct
    calls_served: int
    pending_asks: int
    state: StateUsage
    tasks_readopted: int
    def __init__(self, version: _Optional[str] = ..., pid: _Optional[int] = ..., uptime_seconds: _Optional[float] = ..., open_sessions: _Optional[int] = ..., running_calls: _Optional[int] = ..., running_tasks: _Optional[int] = ..., socket_path: _Optional[str] = ..., state_dir: _Optional[str] = ..., sandbox: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., calls_served: _Optional[int] = ..., pending_asks: _Optional[int] = ..., state: _Optional[_Union[StateUsage, _Mapping]] = ..., tasks_readopted: _Optional[int] = ...) -> None: ...

class StateUsage(_message.Message):
    __slots__ = ("used_bytes", "max_bytes", "retention_seconds", "session_idle_seconds", "sessions_idle_closed", "sessions_reaped", "closed_sessions", "disk_full", "events_unjournaled", "database_problem")
    USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    RETENTION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDLE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_IDLE_CLOSED_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_REAPED_FIELD_NUMBER: _ClassVar[int]
    CLOSED_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    DISK_FULL_FIELD_NUMBER: _ClassVar[int]
    EVENTS_UNJOURNALED_FIELD_NUMBER: _ClassVar[int]
    DATABASE_PROBLEM_FIELD_NUMBER: _ClassVar[int]
    used_bytes: int
    max_bytes: int
    retention_seconds: float
    session_idle_seconds: float
    sessions_idle_closed: int
    sessions_reaped: int
    closed_sessions: int
    disk_full: bool
    events_unjournaled: int
    database_problem: str
    def __init__(self, used_bytes: _Optional[int] = ..., max_bytes: _Optional[int] = ..., retention_seconds: _Optional[float] = ..., session_idle_seconds: _Optional[float] = ..., sessions_idle_closed: _Optional[int] = ..., sessions_reaped: _Optional[int] = ..., closed_sessions: _Optional[int] = ..., disk_full: _Optional[bool] = ..., events_unjournaled: _Optional[int] = ..., database_problem: _Optional[str] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("id", "name", "labels", "workspace_roots", "cwd", "env", "owner_uid", "created_ms", "closed", "permission_mode", "allow_rules", "deny_rules", "ask_rules", "allow_network", "allow_unsandboxed", "last_seq", "last_activity_ms", "ignored_settings", "network", "network_summary", "ask_timeout_seconds", "review")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ROOTS_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    OWNER_UID_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_MODE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_RULES_FIELD_NUMBER: _ClassVar[int]
    DENY_RULES_FIELD_NUMBER: _ClassVar[int]
    ASK_RULES_FIELD_NUMBER: _ClassVar[int]
    ALLOW_NETWORK_FIELD_NUMBER: _ClassVar[int]
    ALLOW_UNSANDBOXED_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_MS_FIELD_NUMBER: _ClassVar[int]
    IGNORED_SETTINGS_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    NETWORK_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    ASK_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REVIEW_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    labels: _containers.ScalarMap[str, str]
    workspace_roots: _containers.RepeatedScalarFieldContainer[str]
    cwd: str
    env: _containers.ScalarMap[str, str]
    owner_uid: int
    created_ms: int
    closed: bool
    permission_mode: str
    allow_rules: _containers.RepeatedScalarFieldContainer[str]
    deny_rules: _containers.RepeatedScalarFieldContainer[str]
    ask_rules: _containers.RepeatedScalarFieldContainer[str]
    allow_network: bool
    allow_unsandboxed: bool
    last_seq: int
    last_activity_ms: int
    ignored_settings: _containers.RepeatedCompositeFieldContainer[IgnoredSettings]
    network: str
    network_summary: _struct_pb2.Struct
    ask_timeout_seconds: float
    review: bool
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., workspace_roots: _Optional[_Iterable[str]] = ..., cwd: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., owner_uid: _Optional[int] = ..., created_ms: _Optional[int] = ..., closed: _Optional[bool] = ..., permission_mode: _Optional[str] = ..., allow_rules: _Optional[_Iterable[str]] = ..., deny_rules: _Optional[_Iterable[str]] = ..., ask_rules: _Optional[_Iterable[str]] = ..., allow_network: _Optional[bool] = ..., allow_unsandboxed: _Optional[bool] = ..., last_seq: _Optional[int] = ..., last_activity_ms: _Optional[int] = ..., ignored_settings: _Optional[_Iterable[_Union[IgnoredSettings, _Mapping]]] = ..., network: _Optional[str] = ..., network_summary: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., ask_timeout_seconds: _Optional[float] = ..., review: _Optional[bool] = ...) -> None: ...

class IgnoredSettings(_message.Message):
    __slots__ = ("path", "sha256", "widens", "reason")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    WIDENS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    path: str
    sha256: str
    widens: _struct_pb2.Struct
    reason: str
    def __init__(self, path: _Optional[str] = ..., sha256: _Optional[str] = ..., widens: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("workspace_roots", "cwd", "env", "name", "labels", "permission_mode", "allow_network", "allow_unsandboxed", "network", "ask_timeout_seconds", "review")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    WORKSPACE_ROOTS_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_MODE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_NETWORK_FIELD_NUMBER: _ClassVar[int]
    ALLOW_UNSANDBOXED_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    ASK_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REVIEW_FIELD_NUMBER: _ClassVar[int]
    workspace_roots: _containers.RepeatedScalarFieldContainer[str]
    cwd: str
    env: _containers.ScalarMap[str, str]
    name: str
    labels: _containers.ScalarMap[str, str]
    permission_mode: str
    allow_network: bool
    allow_unsandboxed: bool
    network: str
    ask_timeout_seconds: float
    review: bool
    def __init__(self, workspace_roots: _Optional[_Iterable[str]] = ..., cwd: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., permission_mode: _Optional[str] = ..., allow_network: _Optional[bool] = ..., allow_unsandboxed: _Optional[bool] = ..., network: _Optional[str] = ..., ask_timeout_seconds: _Optional[float] = ..., review: _Optional[bool] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("include_closed",)
    INCLUDE_CLOSED_FIELD_NUMBER: _ClassVar[int]
    include_closed: bool
    def __init__(self, include_closed: _Optional[bool] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions",)
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CollectSessionsRequest(_message.Message):
    __slots__ = ("idle_seconds", "reap_after_seconds", "dry_run")
    IDLE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REAP_AFTER_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    idle_seconds: float
    reap_after_seconds: float
    dry_run: bool
    def __init__(self, idle_seconds: _Optional[float] = ..., reap_after_seconds: _Optional[float] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class CollectedSession(_message.Message):
    __slots__ = ("id", "name", "action", "idle_seconds", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    IDLE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    action: str
    idle_seconds: float
    reason: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., action: _Optional[str] = ..., idle_seconds: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class CollectSessionsResponse(_message.Message):
    __slots__ = ("sessions",)
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[CollectedSession]
    def __init__(self, sessions: _Optional[_Iterable[_Union[CollectedSession, _Mapping]]] = ...) -> None: ...

class UpdatePermissionsRequest(_message.Message):
    __slots__ = ("session_id", "permission_mode", "add_allow", "add_deny", "add_ask", "ask_timeout_seconds")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_MODE_FIELD_NUMBER: _ClassVar[int]
    ADD_ALLOW_FIELD_NUMBER: _ClassVar[int]
    ADD_DENY_FIELD_NUMBER: _ClassVar[int]
    ADD_ASK_FIELD_NUMBER: _ClassVar[int]
    ASK_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    permission_mode: str
    add_allow: _containers.RepeatedScalarFieldContainer[str]
    add_deny: _containers.RepeatedScalarFieldContainer[str]
    add_ask: _containers.RepeatedScalarFieldContainer[str]
    ask_timeout_seconds: float
    def __init__(self, session_id: _Optional[str] = ..., permission_mode: _Optional[str] = ..., add_allow: _Optional[_Iterable[str]] = ..., add_deny: _Optional[_Iterable[str]] = ..., add_ask: _Optional[_Iterable[str]] = ..., ask_timeout_seconds: _Optional[float] = ...) -> None: ...

class ListToolsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ToolSpec(_message.Message):
    __slots__ = ("name", "description", "input_schema", "hints")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    HINTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    input_schema: _struct_pb2.Struct
    hints: ToolHints
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., hints: _Optional[_Union[ToolHints, _Mapping]] = ...) -> None: ...

class ToolHints(_message.Message):
    __slots__ = ("read_only", "destructive", "idempotent", "open_world")
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    DESTRUCTIVE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_FIELD_NUMBER: _ClassVar[int]
    OPEN_WORLD_FIELD_NUMBER: _ClassVar[int]
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool
    def __init__(self, read_only: _Optional[bool] = ..., destructive: _Optional[bool] = ..., idempotent: _Optional[bool] = ..., open_world: _Optional[bool] = ...) -> None: ...

class ListToolsResponse(_message.Message):
    __slots__ = ("tools",)
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[ToolSpec]
    def __init__(self, tools: _Optional[_Iterable[_Union[ToolSpec, _Mapping]]] = ...) -> None: ...

class ToolUse(_message.Message):
    __slots__ = ("tool_use_id", "name", "input")
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    tool_use_id: str
    name: str
    input: _struct_pb2.Struct
    def __init__(self, tool_use_id: _Optional[str] = ..., name: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class RunToolRequest(_message.Message):
    __slots__ = ("session_id", "call", "ask_timeout_seconds")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    ASK_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    call: ToolUse
    ask_timeout_seconds: float
    def __init__(self, session_id: _Optional[str] = ..., call: _Optional[_Union[ToolUse, _Mapping]] = ..., ask_timeout_seconds: _Optional[float] = ...) -> None: ...

class RunToolsRequest(_message.Message):
    __slots__ = ("session_id", "calls")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    calls: _containers.RepeatedCompositeFieldContainer[ToolUse]
    def __init__(self, session_id: _Optional[str] = ..., calls: _Optional[_Iterable[_Union[ToolUse, _Mapping]]] = ...) -> None: ...

class ImageSource(_message.Message):
    __slots__ = ("type", "media_type", "data")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    type: str
    media_type: str
    data: bytes
    def __init__(self, type: _Optional[str] = ..., media_type: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class ContentBlock(_message.Message):
    __slots__ = ("type", "text", "source")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    type: str
    text: str
    source: ImageSource
    def __init__(self, type: _Optional[str] = ..., text: _Optional[str] = ..., source: _Optional[_Union[ImageSource, _Mapping]] = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ("tool_use_id", "content", "is_error", "data")
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    tool_use_id: str
    content: _containers.RepeatedCompositeFieldContainer[ContentBlock]
    is_error: bool
    data: _struct_pb2.Value
    def __init__(self, tool_use_id: _Optional[str] = ..., content: _Optional[_Iterable[_Union[ContentBlock, _Mapping]]] = ..., is_error: _Optional[bool] = ..., data: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("tool_use_id", "elapsed_ms", "output", "message", "output_id", "output_size", "last_line", "permission_request_id", "attached_clients")
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SIZE_FIELD_NUMBER: _ClassVar[int]
    LAST_LINE_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ATTACHED_CLIENTS_FIELD_NUMBER: _ClassVar[int]
    tool_use_id: str
    elapsed_ms: int
    output: str
    message: str
    output_id: str
    output_size: int
    last_line: str
    permission_request_id: str
    attached_clients: int
    def __init__(self, tool_use_id: _Optional[str] = ..., elapsed_ms: _Optional[int] = ..., output: _Optional[str] = ..., message: _Optional[str] = ..., output_id: _Optional[str] = ..., output_size: _Optional[int] = ..., last_line: _Optional[str] = ..., permission_request_id: _Optional[str] = ..., attached_clients: _Optional[int] = ...) -> None: ...

class ToolCallUpdate(_message.Message):
    __slots__ = ("progress", "result")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    progress: Progress
    result: ToolResult
    def __init__(self, progress: _Optional[_Union[Progress, _Mapping]] = ..., result: _Optional[_Union[ToolResult, _Mapping]] = ...) -> None: ...

class CancelCallRequest(_message.Message):
    __slots__ = ("session_id", "tool_use_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    tool_use_id: str
    def __init__(self, session_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ...) -> None: ...

class CancelCallResponse(_message.Message):
    __slots__ = ("cancelled",)
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    def __init__(self, cancelled: _Optional[bool] = ...) -> None: ...

class AttachRequest(_message.Message):
    __slots__ = ("session_id", "after_seq", "no_follow")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    NO_FOLLOW_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    after_seq: int
    no_follow: bool
    def __init__(self, session_id: _Optional[str] = ..., after_seq: _Optional[int] = ..., no_follow: _Optional[bool] = ...) -> None: ...

class CallStarted(_message.Message):
    __slots__ = ("tool_use_id", "name", "input")
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    tool_use_id: str
    name: str
    input: _struct_pb2.Struct
    def __init__(self, tool_use_id: _Optional[str] = ..., name: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CallFinished(_message.Message):
    __slots__ = ("name", "result", "duration_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    result: ToolResult
    duration_ms: int
    def __init__(self, name: _Optional[str] = ..., result: _Optional[_Union[ToolResult, _Mapping]] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class Todo(_message.Message):
    __slots__ = ("content", "status", "active_form")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FORM_FIELD_NUMBER: _ClassVar[int]
    content: str
    status: str
    active_form: str
    def __init__(self, content: _Optional[str] = ..., status: _Optional[str] = ..., active_form: _Optional[str] = ...) -> None: ...

class TodosChanged(_message.Message):
    __slots__ = ("todos",)
    TODOS_FIELD_NUMBER: _ClassVar[int]
    todos: _containers.RepeatedCompositeFieldContainer[Todo]
    def __init__(self, todos: _Optional[_Iterable[_Union[Todo, _Mapping]]] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("id", "session_id", "command", "description", "status", "exit_code", "has_exit_code", "output_path", "started_ms", "ended_ms", "tool_use_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    HAS_EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PATH_FIELD_NUMBER: _ClassVar[int]
    STARTED_MS_FIELD_NUMBER: _ClassVar[int]
    ENDED_MS_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    session_id: str
    command: str
    description: str
    status: str
    exit_code: int
    has_exit_code: bool
    output_path: str
    started_ms: int
    ended_ms: int
    tool_use_id: str
    def __init__(self, id: _Optional[str] = ..., session_id: _Optional[str] = ..., command: _Optional[str] = ..., description: _Optional[str] = ..., status: _Optional[str] = ..., exit_code: _Optional[int] = ..., has_exit_code: _Optional[bool] = ..., output_path: _Optional[str] = ..., started_ms: _Optional[int] = ..., ended_ms: _Optional[int] = ..., tool_use_id: _Optional[str] = ...) -> None: ...

class TaskStarted(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: Task
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ...) -> None: ...

class TaskFinished(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: Task
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ...) -> None: ...

class SettingsIgnored(_message.Message):
    __slots__ = ("path", "sha256", "widens", "reason")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    WIDENS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    path: str
    sha256: str
    widens: _struct_pb2.Struct
    reason: str
    def __init__(self, path: _Optional[str] = ..., sha256: _Optional[str] = ..., widens: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class PermissionRequested(_message.Message):
    __slots__ = ("request_id", "tool_use_id", "tool_name", "input", "reasons", "suggested_rule", "expires_ms", "rule_choices")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    SUGGESTED_RULE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    RULE_CHOICES_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    tool_use_id: str
    tool_name: str
    input: _struct_pb2.Struct
    reasons: _containers.RepeatedScalarFieldContainer[str]
    suggested_rule: str
    expires_ms: int
    rule_choices: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, request_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., reasons: _Optional[_Iterable[str]] = ..., suggested_rule: _Optional[str] = ..., expires_ms: _Optional[int] = ..., rule_choices: _Optional[_Iterable[str]] = ...) -> None: ...

class PermissionResolved(_message.Message):
    __slots__ = ("request_id", "decision", "scope", "decided_by", "rule")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    decision: str
    scope: str
    decided_by: str
    rule: str
    def __init__(self, request_id: _Optional[str] = ..., decision: _Optional[str] = ..., scope: _Optional[str] = ..., decided_by: _Optional[str] = ..., rule: _Optional[str] = ...) -> None: ...

class PermissionDecided(_message.Message):
    __slots__ = ("tool_use_id", "tool_name", "behavior", "decided_by", "reason")
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    BEHAVIOR_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    tool_use_id: str
    tool_name: str
    behavior: str
    decided_by: str
    reason: str
    def __init__(self, tool_use_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., behavior: _Optional[str] = ..., decided_by: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CwdChanged(_message.Message):
    __slots__ = ("cwd", "previous")
    CWD_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    cwd: str
    previous: str
    def __init__(self, cwd: _Optional[str] = ..., previous: _Optional[str] = ...) -> None: ...

class SessionClosed(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Gap(_message.Message):
    __slots__ = ("from_seq", "to_seq")
    FROM_SEQ_FIELD_NUMBER: _ClassVar[int]
    TO_SEQ_FIELD_NUMBER: _ClassVar[int]
    from_seq: int
    to_seq: int
    def __init__(self, from_seq: _Optional[int] = ..., to_seq: _Optional[int] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("seq", "session_id", "time_ms", "call_started", "progress", "call_finished", "todos_changed", "task_started", "task_finished", "permission_requested", "permission_resolved", "cwd_changed", "session_closed", "gap", "permission_decided", "settings_ignored", "agent", "git_push", "task_controlled", "port_forward", "files_changed")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    CALL_STARTED_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    CALL_FINISHED_FIELD_NUMBER: _ClassVar[int]
    TODOS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    TASK_STARTED_FIELD_NUMBER: _ClassVar[int]
    TASK_FINISHED_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_RESOLVED_FIELD_NUMBER: _ClassVar[int]
    CWD_CHANGED_FIELD_NUMBER: _ClassVar[int]
    SESSION_CLOSED_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_DECIDED_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_IGNORED_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    GIT_PUSH_FIELD_NUMBER: _ClassVar[int]
    TASK_CONTROLLED_FIELD_NUMBER: _ClassVar[int]
    PORT_FORWARD_FIELD_NUMBER: _ClassVar[int]
    FILES_CHANGED_FIELD_NUMBER: _ClassVar[int]
    seq: int
    session_id: str
    time_ms: int
    call_started: CallStarted
    progress: Progress
    call_finished: CallFinished
    todos_changed: TodosChanged
    task_started: TaskStarted
    task_finished: TaskFinished
    permission_requested: PermissionRequested
    permission_resolved: PermissionResolved
    cwd_changed: CwdChanged
    session_closed: SessionClosed
    gap: Gap
    permission_decided: PermissionDecided
    settings_ignored: SettingsIgnored
    agent: AgentEvent
    git_push: GitPush
    task_controlled: TaskControlled
    port_forward: PortForward
    files_changed: FilesChanged
    def __init__(self, seq: _Optional[int] = ..., session_id: _Optional[str] = ..., time_ms: _Optional[int] = ..., call_started: _Optional[_Union[CallStarted, _Mapping]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., call_finished: _Optional[_Union[CallFinished, _Mapping]] = ..., todos_changed: _Optional[_Union[TodosChanged, _Mapping]] = ..., task_started: _Optional[_Union[TaskStarted, _Mapping]] = ..., task_finished: _Optional[_Union[TaskFinished, _Mapping]] = ..., permission_requested: _Optional[_Union[PermissionRequested, _Mapping]] = ..., permission_resolved: _Optional[_Union[PermissionResolved, _Mapping]] = ..., cwd_changed: _Optional[_Union[CwdChanged, _Mapping]] = ..., session_closed: _Optional[_Union[SessionClosed, _Mapping]] = ..., gap: _Optional[_Union[Gap, _Mapping]] = ..., permission_decided: _Optional[_Union[PermissionDecided, _Mapping]] = ..., settings_ignored: _Optional[_Union[SettingsIgnored, _Mapping]] = ..., agent: _Optional[_Union[AgentEvent, _Mapping]] = ..., git_push: _Optional[_Union[GitPush, _Mapping]] = ..., task_controlled: _Optional[_Union[TaskControlled, _Mapping]] = ..., port_forward: _Optional[_Union[PortForward, _Mapping]] = ..., files_changed: _Optional[_Union[FilesChanged, _Mapping]] = ...) -> None: ...

class FilesChanged(_message.Message):
    __slots__ = ("tool_use_id", "tool_name", "checkpoint", "added", "changed", "deleted", "paths", "not_restorable", "action", "by")
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    NOT_RESTORABLE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    tool_use_id: str
    tool_name: str
    checkpoint: int
    added: int
    changed: int
    deleted: int
    paths: _containers.RepeatedScalarFieldContainer[str]
    not_restorable: int
    action: str
    by: str
    def __init__(self, tool_use_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., checkpoint: _Optional[int] = ..., added: _Optional[int] = ..., changed: _Optional[int] = ..., deleted: _Optional[int] = ..., paths: _Optional[_Iterable[str]] = ..., not_restorable: _Optional[int] = ..., action: _Optional[str] = ..., by: _Optional[str] = ...) -> None: ...

class AgentContentBlock(_message.Message):
    __slots__ = ("type", "text", "id", "name", "input")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    type: str
    text: str
    id: str
    name: str
    input: _struct_pb2.Struct
    def __init__(self, type: _Optional[str] = ..., text: _Optional[str] = ..., id: _Optional[str] = ..., name: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class AgentUsage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_CREATION_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_READ_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cache_creation_input_tokens: _Optional[int] = ..., cache_read_input_tokens: _Optional[int] = ...) -> None: ...

class AgentPrompt(_message.Message):
    __slots__ = ("text", "model")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    text: str
    model: str
    def __init__(self, text: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class AgentTextDelta(_message.Message):
    __slots__ = ("turn", "text")
    TURN_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    turn: int
    text: str
    def __init__(self, turn: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class AgentMessage(_message.Message):
    __slots__ = ("turn", "content", "stop_reason", "model", "usage")
    TURN_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    turn: int
    content: _containers.RepeatedCompositeFieldContainer[AgentContentBlock]
    stop_reason: str
    model: str
    usage: AgentUsage
    def __init__(self, turn: _Optional[int] = ..., content: _Optional[_Iterable[_Union[AgentContentBlock, _Mapping]]] = ..., stop_reason: _Optional[str] = ..., model: _Optional[str] = ..., usage: _Optional[_Union[AgentUsage, _Mapping]] = ...) -> None: ...

class AgentStopped(_message.Message):
    __slots__ = ("reason", "turns", "usage", "message")
    REASON_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    turns: int
    usage: AgentUsage
    message: str
    def __init__(self, reason: _Optional[str] = ..., turns: _Optional[int] = ..., usage: _Optional[_Union[AgentUsage, _Mapping]] = ..., message: _Optional[str] = ...) -> None: ...

class AgentEvent(_message.Message):
    __slots__ = ("conversation_id", "prompt", "text_delta", "message", "stopped")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    prompt: AgentPrompt
    text_delta: AgentTextDelta
    message: AgentMessage
    stopped: AgentStopped
    def __init__(self, conversation_id: _Optional[str] = ..., prompt: _Optional[_Union[AgentPrompt, _Mapping]] = ..., text_delta: _Optional[_Union[AgentTextDelta, _Mapping]] = ..., message: _Optional[_Union[AgentMessage, _Mapping]] = ..., stopped: _Optional[_Union[AgentStopped, _Mapping]] = ...) -> None: ...

class AppendAgentEventRequest(_message.Message):
    __slots__ = ("session_id", "event")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    event: AgentEvent
    def __init__(self, session_id: _Optional[str] = ..., event: _Optional[_Union[AgentEvent, _Mapping]] = ...) -> None: ...

class AppendAgentEventResponse(_message.Message):
    __slots__ = ("seq",)
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...

class ResolvePermissionRequest(_message.Message):
    __slots__ = ("session_id", "request_id", "decision", "scope", "rule")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    request_id: str
    decision: str
    scope: str
    rule: str
    def __init__(self, session_id: _Optional[str] = ..., request_id: _Optional[str] = ..., decision: _Optional[str] = ..., scope: _Optional[str] = ..., rule: _Optional[str] = ...) -> None: ...

class ResolvePermissionResponse(_message.Message):
    __slots__ = ("accepted", "message")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    message: str
    def __init__(self, accepted: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ("session_id", "include_finished")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FINISHED_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    include_finished: bool
    def __init__(self, session_id: _Optional[str] = ..., include_finished: _Optional[bool] = ...) -> None: ...

class ListTasksResponse(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ...) -> None: ...

class ClassifyRequest(_message.Message):
    __slots__ = ("command",)
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    command: str
    def __init__(self, command: _Optional[str] = ...) -> None: ...

class ClassifyResponse(_message.Message):
    __slots__ = ("classification",)
    CLASSIFICATION_FIELD_NUMBER: _ClassVar[int]
    classification: _struct_pb2.Struct
    def __init__(self, classification: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListTrustRequest(_message.Message):
    __slots__ = ("path",)
    PATH_FIELD_NUMBER: _ClassVar[int]
    path: str
    def __init__(self, path: _Optional[str] = ...) -> None: ...

class TrustEntry(_message.Message):
    __slots__ = ("path", "sha256", "state", "source", "approved_by", "approved_ms", "widens", "current", "error")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    APPROVED_BY_FIELD_NUMBER: _ClassVar[int]
    APPROVED_MS_FIELD_NUMBER: _ClassVar[int]
    WIDENS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    path: str
    sha256: str
    state: str
    source: str
    approved_by: str
    approved_ms: int
    widens: _struct_pb2.Struct
    current: bool
    error: str
    def __init__(self, path: _Optional[str] = ..., sha256: _Optional[str] = ..., state: _Optional[str] = ..., source: _Optional[str] = ..., approved_by: _Optional[str] = ..., approved_ms: _Optional[int] = ..., widens: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., current: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class ListTrustResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[TrustEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[TrustEntry, _Mapping]]] = ...) -> None: ...

class ApproveTrustRequest(_message.Message):
    __slots__ = ("path", "sha256")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    path: str
    sha256: str
    def __init__(self, path: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class RevokeTrustRequest(_message.Message):
    __slots__ = ("path", "sha256")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    path: str
    sha256: str
    def __init__(self, path: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class RevokeTrustResponse(_message.Message):
    __slots__ = ("revoked",)
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    revoked: _containers.RepeatedCompositeFieldContainer[TrustEntry]
    def __init__(self, revoked: _Optional[_Iterable[_Union[TrustEntry, _Mapping]]] = ...) -> None: ...

class ReadOutputRequest(_message.Message):
    __slots__ = ("session_id", "id", "offset", "follow")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    id: str
    offset: int
    follow: bool
    def __init__(self, session_id: _Optional[str] = ..., id: _Optional[str] = ..., offset: _Optional[int] = ..., follow: _Optional[bool] = ...) -> None: ...

class OutputChunk(_message.Message):
    __slots__ = ("offset", "data", "output_id", "done")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_ID_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    offset: int
    data: bytes
    output_id: str
    done: bool
    def __init__(self, offset: _Optional[int] = ..., data: _Optional[bytes] = ..., output_id: _Optional[str] = ..., done: _Optional[bool] = ...) -> None: ...

class ListCredentialsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CredentialSource(_message.Message):
    __slots__ = ("name", "kind", "where")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    where: str
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., where: _Optional[str] = ...) -> None: ...

class CredentialUse(_message.Message):
    __slots__ = ("session_id", "requests", "refused", "pushes", "last_ms")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    PUSHES_FIELD_NUMBER: _ClassVar[int]
    LAST_MS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    requests: int
    refused: int
    pushes: int
    last_ms: int
    def __init__(self, session_id: _Optional[str] = ..., requests: _Optional[int] = ..., refused: _Optional[int] = ..., pushes: _Optional[int] = ..., last_ms: _Optional[int] = ...) -> None: ...

class CredentialRoute(_message.Message):
    __slots__ = ("name", "kind", "upstream", "source", "header", "url", "env", "sessions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    upstream: str
    source: str
    header: str
    url: str
    env: _containers.RepeatedScalarFieldContainer[str]
    sessions: _containers.RepeatedCompositeFieldContainer[CredentialUse]
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., upstream: _Optional[str] = ..., source: _Optional[str] = ..., header: _Optional[str] = ..., url: _Optional[str] = ..., env: _Optional[_Iterable[str]] = ..., sessions: _Optional[_Iterable[_Union[CredentialUse, _Mapping]]] = ...) -> None: ...

class ListCredentialsResponse(_message.Message):
    __slots__ = ("sources", "routes", "protected_refs", "available", "ssh_agent", "masked")
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    PROTECTED_REFS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    SSH_AGENT_FIELD_NUMBER: _ClassVar[int]
    MASKED_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[CredentialSource]
    routes: _containers.RepeatedCompositeFieldContainer[CredentialRoute]
    protected_refs: _containers.RepeatedScalarFieldContainer[str]
    available: bool
    ssh_agent: SshAgentShown
    masked: _containers.RepeatedCompositeFieldContainer[MaskedCredential]
    def __init__(self, sources: _Optional[_Iterable[_Union[CredentialSource, _Mapping]]] = ..., routes: _Optional[_Iterable[_Union[CredentialRoute, _Mapping]]] = ..., protected_refs: _Optional[_Iterable[str]] = ..., available: _Optional[bool] = ..., ssh_agent: _Optional[_Union[SshAgentShown, _Mapping]] = ..., masked: _Optional[_Iterable[_Union[MaskedCredential, _Mapping]]] = ...) -> None: ...

class MaskedCredential(_message.Message):
    __slots__ = ("kind", "name", "mode", "inject_hosts", "source", "sessions")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    INJECT_HOSTS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    mode: str
    inject_hosts: _containers.RepeatedScalarFieldContainer[str]
    source: str
    sessions: _containers.RepeatedCompositeFieldContainer[MaskedCredentialUse]
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ..., mode: _Optional[str] = ..., inject_hosts: _Optional[_Iterable[str]] = ..., source: _Optional[str] = ..., sessions: _Optional[_Iterable[_Union[MaskedCredentialUse, _Mapping]]] = ...) -> None: ...

class MaskedCredentialUse(_message.Message):
    __slots__ = ("session_id", "requests", "refused", "last_ms")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    LAST_MS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    requests: int
    refused: int
    last_ms: int
    def __init__(self, session_id: _Optional[str] = ..., requests: _Optional[int] = ..., refused: _Optional[int] = ..., last_ms: _Optional[int] = ...) -> None: ...

class SshAgentKey(_message.Message):
    __slots__ = ("fingerprint", "source")
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    fingerprint: str
    source: str
    def __init__(self, fingerprint: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class SshAgentUse(_message.Message):
    __slots__ = ("session_id", "host", "key", "signatures", "refused", "allowed_by")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURES_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_BY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    host: str
    key: str
    signatures: int
    refused: int
    allowed_by: str
    def __init__(self, session_id: _Optional[str] = ..., host: _Optional[str] = ..., key: _Optional[str] = ..., signatures: _Optional[int] = ..., refused: _Optional[int] = ..., allowed_by: _Optional[str] = ...) -> None: ...

class SshAgentShown(_message.Message):
    __slots__ = ("enabled", "hosts", "known_hosts", "keys", "upstream", "uses")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    KNOWN_HOSTS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    USES_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    hosts: _containers.RepeatedScalarFieldContainer[str]
    known_hosts: str
    keys: _containers.RepeatedCompositeFieldContainer[SshAgentKey]
    upstream: str
    uses: _containers.RepeatedCompositeFieldContainer[SshAgentUse]
    def __init__(self, enabled: _Optional[bool] = ..., hosts: _Optional[_Iterable[str]] = ..., known_hosts: _Optional[str] = ..., keys: _Optional[_Iterable[_Union[SshAgentKey, _Mapping]]] = ..., upstream: _Optional[str] = ..., uses: _Optional[_Iterable[_Union[SshAgentUse, _Mapping]]] = ...) -> None: ...

class GitPushRef(_message.Message):
    __slots__ = ("ref", "old", "new", "kind", "protected")
    REF_FIELD_NUMBER: _ClassVar[int]
    OLD_FIELD_NUMBER: _ClassVar[int]
    NEW_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PROTECTED_FIELD_NUMBER: _ClassVar[int]
    ref: str
    old: str
    new: str
    kind: str
    protected: bool
    def __init__(self, ref: _Optional[str] = ..., old: _Optional[str] = ..., new: _Optional[str] = ..., kind: _Optional[str] = ..., protected: _Optional[bool] = ...) -> None: ...

class GitPush(_message.Message):
    __slots__ = ("tool_use_id", "route", "repository", "updates", "allowed", "decided_by")
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    REPOSITORY_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    tool_use_id: str
    route: str
    repository: str
    updates: _containers.RepeatedCompositeFieldContainer[GitPushRef]
    allowed: bool
    decided_by: str
    def __init__(self, tool_use_id: _Optional[str] = ..., route: _Optional[str] = ..., repository: _Optional[str] = ..., updates: _Optional[_Iterable[_Union[GitPushRef, _Mapping]]] = ..., allowed: _Optional[bool] = ..., decided_by: _Optional[str] = ...) -> None: ...

class TerminalSize(_message.Message):
    __slots__ = ("rows", "cols")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COLS_FIELD_NUMBER: _ClassVar[int]
    rows: int
    cols: int
    def __init__(self, rows: _Optional[int] = ..., cols: _Optional[int] = ...) -> None: ...

class StartTaskRequest(_message.Message):
    __slots__ = ("session_id", "command", "description", "pty", "stdin", "tool_use_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PTY_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    command: str
    description: str
    pty: TerminalSize
    stdin: bool
    tool_use_id: str
    def __init__(self, session_id: _Optional[str] = ..., command: _Optional[str] = ..., description: _Optional[str] = ..., pty: _Optional[_Union[TerminalSize, _Mapping]] = ..., stdin: _Optional[bool] = ..., tool_use_id: _Optional[str] = ...) -> None: ...

class TaskRef(_message.Message):
    __slots__ = ("session_id", "task_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    task_id: str
    def __init__(self, session_id: _Optional[str] = ..., task_id: _Optional[str] = ...) -> None: ...

class TaskTerminal(_message.Message):
    __slots__ = ("task_id", "status", "pty", "size", "stdin_open", "exit_code", "has_exit_code", "output_id")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PTY_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    STDIN_OPEN_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    HAS_EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    status: str
    pty: bool
    size: TerminalSize
    stdin_open: bool
    exit_code: int
    has_exit_code: bool
    output_id: str
    def __init__(self, task_id: _Optional[str] = ..., status: _Optional[str] = ..., pty: _Optional[bool] = ..., size: _Optional[_Union[TerminalSize, _Mapping]] = ..., stdin_open: _Optional[bool] = ..., exit_code: _Optional[int] = ..., has_exit_code: _Optional[bool] = ..., output_id: _Optional[str] = ...) -> None: ...

class TaskInput(_message.Message):
    __slots__ = ("session_id", "task_id", "data", "hangup_on_drop", "detach", "close_stdin")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    HANGUP_ON_DROP_FIELD_NUMBER: _ClassVar[int]
    DETACH_FIELD_NUMBER: _ClassVar[int]
    CLOSE_STDIN_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    task_id: str
    data: bytes
    hangup_on_drop: bool
    detach: bool
    close_stdin: bool
    def __init__(self, session_id: _Optional[str] = ..., task_id: _Optional[str] = ..., data: _Optional[bytes] = ..., hangup_on_drop: _Optional[bool] = ..., detach: _Optional[bool] = ..., close_stdin: _Optional[bool] = ...) -> None: ...

class OpenTerminalRequest(_message.Message):
    __slots__ = ("session_id", "task_id", "uid", "offset", "input", "hangup_on_drop")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    HANGUP_ON_DROP_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    task_id: str
    uid: int
    offset: int
    input: bool
    hangup_on_drop: bool
    def __init__(self, session_id: _Optional[str] = ..., task_id: _Optional[str] = ..., uid: _Optional[int] = ..., offset: _Optional[int] = ..., input: _Optional[bool] = ..., hangup_on_drop: _Optional[bool] = ...) -> None: ...

class TerminalChannel(_message.Message):
    __slots__ = ("path", "token", "expires_ms")
    PATH_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    path: str
    token: bytes
    expires_ms: int
    def __init__(self, path: _Optional[str] = ..., token: _Optional[bytes] = ..., expires_ms: _Optional[int] = ...) -> None: ...

class WriteInputResponse(_message.Message):
    __slots__ = ("bytes", "reason")
    BYTES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    reason: str
    def __init__(self, bytes: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class SignalTaskRequest(_message.Message):
    __slots__ = ("session_id", "task_id", "signal")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    task_id: str
    signal: str
    def __init__(self, session_id: _Optional[str] = ..., task_id: _Optional[str] = ..., signal: _Optional[str] = ...) -> None: ...

class ResizeTaskRequest(_message.Message):
    __slots__ = ("session_id", "task_id", "size")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    task_id: str
    size: TerminalSize
    def __init__(self, session_id: _Optional[str] = ..., task_id: _Optional[str] = ..., size: _Optional[_Union[TerminalSize, _Mapping]] = ...) -> None: ...

class TaskControlled(_message.Message):
    __slots__ = ("task_id", "action", "by", "bytes", "reason", "signal", "size", "stdin")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    action: str
    by: str
    bytes: int
    reason: str
    signal: str
    size: TerminalSize
    stdin: bool
    def __init__(self, task_id: _Optional[str] = ..., action: _Optional[str] = ..., by: _Optional[str] = ..., bytes: _Optional[int] = ..., reason: _Optional[str] = ..., signal: _Optional[str] = ..., size: _Optional[_Union[TerminalSize, _Mapping]] = ..., stdin: _Optional[bool] = ...) -> None: ...

class StartForwardRequest(_message.Message):
    __slots__ = ("session_id", "port", "local")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    port: int
    local: str
    def __init__(self, session_id: _Optional[str] = ..., port: _Optional[int] = ..., local: _Optional[str] = ...) -> None: ...

class ForwardStarted(_message.Message):
    __slots__ = ("forward_id", "address", "port")
    FORWARD_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    forward_id: str
    address: str
    port: int
    def __init__(self, forward_id: _Optional[str] = ..., address: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class StopForwardRequest(_message.Message):
    __slots__ = ("session_id", "forward_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    FORWARD_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    forward_id: str
    def __init__(self, session_id: _Optional[str] = ..., forward_id: _Optional[str] = ...) -> None: ...

class StopForwardResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ForwardOpen(_message.Message):
    __slots__ = ("session_id", "port", "host", "forward_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    FORWARD_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    port: int
    host: str
    forward_id: str
    def __init__(self, session_id: _Optional[str] = ..., port: _Optional[int] = ..., host: _Optional[str] = ..., forward_id: _Optional[str] = ...) -> None: ...

class ForwardRequest(_message.Message):
    __slots__ = ("open", "data")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    open: ForwardOpen
    data: bytes
    def __init__(self, open: _Optional[_Union[ForwardOpen, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class ForwardOpened(_message.Message):
    __slots__ = ("connection_id", "address")
    CONNECTION_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    connection_id: str
    address: str
    def __init__(self, connection_id: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class ForwardResponse(_message.Message):
    __slots__ = ("opened", "data", "eof")
    OPENED_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    opened: ForwardOpened
    data: bytes
    eof: bool
    def __init__(self, opened: _Optional[_Union[ForwardOpened, _Mapping]] = ..., data: _Optional[bytes] = ..., eof: _Optional[bool] = ...) -> None: ...

class ForwardFrame(_message.Message):
    __slots__ = ("id", "open", "opened", "data", "eof", "close", "window")
    ID_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    OPENED_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    id: int
    open: bool
    opened: str
    data: bytes
    eof: bool
    close: str
    window: int
    def __init__(self, id: _Optional[int] = ..., open: _Optional[bool] = ..., opened: _Optional[str] = ..., data: _Optional[bytes] = ..., eof: _Optional[bool] = ..., close: _Optional[str] = ..., window: _Optional[int] = ...) -> None: ...

class ForwardMuxStart(_message.Message):
    __slots__ = ("session_id", "port", "host", "forward_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    FORWARD_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    port: int
    host: str
    forward_id: str
    def __init__(self, session_id: _Optional[str] = ..., port: _Optional[int] = ..., host: _Optional[str] = ..., forward_id: _Optional[str] = ...) -> None: ...

class ForwardMuxStarted(_message.Message):
    __slots__ = ("window", "max_data")
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    MAX_DATA_FIELD_NUMBER: _ClassVar[int]
    window: int
    max_data: int
    def __init__(self, window: _Optional[int] = ..., max_data: _Optional[int] = ...) -> None: ...

class ForwardMuxRequest(_message.Message):
    __slots__ = ("start", "frames")
    START_FIELD_NUMBER: _ClassVar[int]
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    start: ForwardMuxStart
    frames: _containers.RepeatedCompositeFieldContainer[ForwardFrame]
    def __init__(self, start: _Optional[_Union[ForwardMuxStart, _Mapping]] = ..., frames: _Optional[_Iterable[_Union[ForwardFrame, _Mapping]]] = ...) -> None: ...

class ForwardMuxResponse(_message.Message):
    __slots__ = ("started", "frames")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    started: ForwardMuxStarted
    frames: _containers.RepeatedCompositeFieldContainer[ForwardFrame]
    def __init__(self, started: _Optional[_Union[ForwardMuxStarted, _Mapping]] = ..., frames: _Optional[_Iterable[_Union[ForwardFrame, _Mapping]]] = ...) -> None: ...

class OpenForwardRequest(_message.Message):
    __slots__ = ("session_id", "port", "host", "forward_id", "uid")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    FORWARD_ID_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    port: int
    host: str
    forward_id: str
    uid: int
    def __init__(self, session_id: _Optional[str] = ..., port: _Optional[int] = ..., host: _Optional[str] = ..., forward_id: _Optional[str] = ..., uid: _Optional[int] = ...) -> None: ...

class ForwardChannel(_message.Message):
    __slots__ = ("path", "token", "expires_ms", "window", "max_data")
    PATH_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    MAX_DATA_FIELD_NUMBER: _ClassVar[int]
    path: str
    token: bytes
    expires_ms: int
    window: int
    max_data: int
    def __init__(self, path: _Optional[str] = ..., token: _Optional[bytes] = ..., expires_ms: _Optional[int] = ..., window: _Optional[int] = ..., max_data: _Optional[int] = ...) -> None: ...

class ListPortsRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class ListeningPort(_message.Message):
    __slots__ = ("address", "port", "forwardable", "processes")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    FORWARDABLE_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    address: str
    port: int
    forwardable: bool
    processes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, address: _Optional[str] = ..., port: _Optional[int] = ..., forwardable: _Optional[bool] = ..., processes: _Optional[_Iterable[str]] = ...) -> None: ...

class ListPortsResponse(_message.Message):
    __slots__ = ("ports", "network")
    PORTS_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    ports: _containers.RepeatedCompositeFieldContainer[ListeningPort]
    network: str
    def __init__(self, ports: _Optional[_Iterable[_Union[ListeningPort, _Mapping]]] = ..., network: _Optional[str] = ...) -> None: ...

class PortForward(_message.Message):
    __slots__ = ("action", "forward_id", "connection_id", "port", "address", "local", "by", "bytes_in", "bytes_out", "how")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    FORWARD_ID_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    BYTES_IN_FIELD_NUMBER: _ClassVar[int]
    BYTES_OUT_FIELD_NUMBER: _ClassVar[int]
    HOW_FIELD_NUMBER: _ClassVar[int]
    action: str
    forward_id: str
    connection_id: str
    port: int
    address: str
    local: str
    by: str
    bytes_in: int
    bytes_out: int
    how: str
    def __init__(self, action: _Optional[str] = ..., forward_id: _Optional[str] = ..., connection_id: _Optional[str] = ..., port: _Optional[int] = ..., address: _Optional[str] = ..., local: _Optional[str] = ..., by: _Optional[str] = ..., bytes_in: _Optional[int] = ..., bytes_out: _Optional[int] = ..., how: _Optional[str] = ...) -> None: ...

class FileImage(_message.Message):
    __slots__ = ("kind", "mode", "size", "sha256", "target", "why")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    WHY_FIELD_NUMBER: _ClassVar[int]
    kind: str
    mode: int
    size: int
    sha256: str
    target: str
    why: str
    def __init__(self, kind: _Optional[str] = ..., mode: _Optional[int] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ..., target: _Optional[str] = ..., why: _Optional[str] = ...) -> None: ...

class CheckpointFile(_message.Message):
    __slots__ = ("root", "path", "change", "before", "after")
    ROOT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    root: str
    path: str
    change: str
    before: FileImage
    after: FileImage
    def __init__(self, root: _Optional[str] = ..., path: _Optional[str] = ..., change: _Optional[str] = ..., before: _Optional[_Union[FileImage, _Mapping]] = ..., after: _Optional[_Union[FileImage, _Mapping]] = ...) -> None: ...

class Checkpoint(_message.Message):
    __slots__ = ("seq", "tool_use_id", "tool_name", "state", "time_ms", "added", "changed", "deleted", "not_restorable", "action", "note")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    NOT_RESTORABLE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    seq: int
    tool_use_id: str
    tool_name: str
    state: str
    time_ms: int
    added: int
    changed: int
    deleted: int
    not_restorable: int
    action: str
    note: str
    def __init__(self, seq: _Optional[int] = ..., tool_use_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., state: _Optional[str] = ..., time_ms: _Optional[int] = ..., added: _Optional[int] = ..., changed: _Optional[int] = ..., deleted: _Optional[int] = ..., not_restorable: _Optional[int] = ..., action: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class ListCheckpointsRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class ListCheckpointsResponse(_message.Message):
    __slots__ = ("checkpoints",)
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    checkpoints: _containers.RepeatedCompositeFieldContainer[Checkpoint]
    def __init__(self, checkpoints: _Optional[_Iterable[_Union[Checkpoint, _Mapping]]] = ...) -> None: ...

class DiffCheckpointRequest(_message.Message):
    __slots__ = ("session_id", "tool_use_id", "since", "to_tool_use_id", "format", "paths")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    TO_TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    tool_use_id: str
    since: bool
    to_tool_use_id: str
    format: str
    paths: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., since: _Optional[bool] = ..., to_tool_use_id: _Optional[str] = ..., format: _Optional[str] = ..., paths: _Optional[_Iterable[str]] = ...) -> None: ...

class DiffCheckpointResponse(_message.Message):
    __slots__ = ("files", "text")
    FILES_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[CheckpointFile]
    text: str
    def __init__(self, files: _Optional[_Iterable[_Union[CheckpointFile, _Mapping]]] = ..., text: _Optional[str] = ...) -> None: ...

class RestoreCheckpointRequest(_message.Message):
    __slots__ = ("session_id", "tool_use_id", "dry_run", "paths", "on_conflict", "by")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    ON_CONFLICT_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    tool_use_id: str
    dry_run: bool
    paths: _containers.RepeatedScalarFieldContainer[str]
    on_conflict: str
    by: str
    def __init__(self, session_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., dry_run: _Optional[bool] = ..., paths: _Optional[_Iterable[str]] = ..., on_conflict: _Optional[str] = ..., by: _Optional[str] = ...) -> None: ...

class RewindToCallRequest(_message.Message):
    __slots__ = ("session_id", "tool_use_id", "dry_run", "on_conflict", "by")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    ON_CONFLICT_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    tool_use_id: str
    dry_run: bool
    on_conflict: str
    by: str
    def __init__(self, session_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., dry_run: _Optional[bool] = ..., on_conflict: _Optional[str] = ..., by: _Optional[str] = ...) -> None: ...

class RestorePath(_message.Message):
    __slots__ = ("root", "path", "action", "conflict", "to")
    ROOT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    root: str
    path: str
    action: str
    conflict: str
    to: FileImage
    def __init__(self, root: _Optional[str] = ..., path: _Optional[str] = ..., action: _Optional[str] = ..., conflict: _Optional[str] = ..., to: _Optional[_Union[FileImage, _Mapping]] = ...) -> None: ...

class RestoreCheckpointResponse(_message.Message):
    __slots__ = ("paths", "applied", "checkpoint", "message")
    PATHS_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    paths: _containers.RepeatedCompositeFieldContainer[RestorePath]
    applied: bool
    checkpoint: int
    message: str
    def __init__(self, paths: _Optional[_Iterable[_Union[RestorePath, _Mapping]]] = ..., applied: _Optional[bool] = ..., checkpoint: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class ListPendingChangesRequest(_message.Message):
    __slots__ = ("session_id", "format")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    format: str
    def __init__(self, session_id: _Optional[str] = ..., format: _Optional[str] = ...) -> None: ...

class PendingChanges(_message.Message):
    __slots__ = ("id", "tool_use_id", "command", "files", "text", "time_ms")
    ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    id: int
    tool_use_id: str
    command: str
    files: _containers.RepeatedCompositeFieldContainer[CheckpointFile]
    text: str
    time_ms: int
    def __init__(self, id: _Optional[int] = ..., tool_use_id: _Optional[str] = ..., command: _Optional[str] = ..., files: _Optional[_Iterable[_Union[CheckpointFile, _Mapping]]] = ..., text: _Optional[str] = ..., time_ms: _Optional[int] = ...) -> None: ...

class ResolvePendingChangesRequest(_message.Message):
    __slots__ = ("session_id", "id", "action", "force", "by")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    id: int
    action: str
    force: bool
    by: str
    def __init__(self, session_id: _Optional[str] = ..., id: _Optional[int] = ..., action: _Optional[str] = ..., force: _Optional[bool] = ..., by: _Optional[str] = ...) -> None: ...

class ResolvePendingChangesResponse(_message.Message):
    __slots__ = ("applied", "discarded", "checkpoint", "paths", "message")
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    DISCARDED_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    applied: bool
    discarded: bool
    checkpoint: int
    paths: _containers.RepeatedCompositeFieldContainer[RestorePath]
    message: str
    def __init__(self, applied: _Optional[bool] = ..., discarded: _Optional[bool] = ..., checkpoint: _Optional[int] = ..., paths: _Optional[_Iterable[_Union[RestorePath, _Mapping]]] = ..., message: _Optional[str] = ...) -> None: ...
