"""The errors of agentd: what went wrong, in the domain's words.

    AgentdError                 something a client asked for cannot be done
    ├── InvalidRequest          malformed request fields
    ├── NotFound                unknown session, task, request
    │   └── SessionNotFound
    ├── AlreadyExists           e.g. an open session has the name
    ├── FailedPrecondition      the state it needs is not there
    │   ├── SessionClosed       the session is closed
    │   ├── ConfigError         a setting is invalid; `agentd serve` exits 2
    │   └── StateDamaged        the state database is gone, damaged or unwritable
    ├── Exhausted               a limit is reached
    │   └── StorageFull         the state disk is full
    └── Unavailable             the daemon is shutting down

    ToolError                   a tool call failed; the model sees the message
    └── InputError              the input was invalid; shown in <tool_use_error>
        └── PathOutsideWorkspace  a path resolves outside the session's roots

No error here names a transport: agentd/api/errors.py maps each AgentdError to the
one gRPC status an RPC ends with. ToolError never ends an RPC: it becomes an
`is_error` tool_result the model can act on, because a failed tool call is an
answer, not a broken request.
"""

from __future__ import annotations

# The most of a client's own input an error message quotes, and the longest message an
# RPC ends with (a status's details travel in metadata, which has a size limit of its own).
QUOTE_CHARS = 80
MESSAGE_CHARS = 2000


def quoted(value: str, limit: int = QUOTE_CHARS) -> str:
    """`value` as an error message quotes client input: repr'd, cut to `limit`."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value)} characters)"


def bounded(message: str) -> str:
    """An RPC error's message, cut to MESSAGE_CHARS."""
    if len(message) <= MESSAGE_CHARS:
        return message
    return message[:MESSAGE_CHARS] + f"… ({len(message)} characters)"


class AgentdError(Exception):
    """Something a client asked for cannot be done; the message says what to do next."""


class InvalidRequest(AgentdError):
    pass


class NotFound(AgentdError):
    pass


class SessionNotFound(NotFound):
    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"no session {quoted(session_id)} (by id, name or unique id prefix); list "
            "sessions with `agentctl session ls`"
        )


class AlreadyExists(AgentdError):
    pass


class FailedPrecondition(AgentdError):
    """What was asked needs a state that is not there (a closed session, a finished
    task, a setting that is wrong)."""


class SessionClosed(FailedPrecondition):
    def __init__(self, session_id: str) -> None:
        shown = session_id if len(session_id) <= QUOTE_CHARS else quoted(session_id)
        super().__init__(f"session {shown} is closed; create a new one")


class Exhausted(AgentdError):
    """A limit is reached: space, or how many of something may be open at once."""


class Unavailable(AgentdError):
    pass


class StorageFull(Exhausted):
    """The state dir's disk (or quota) is full: what had to be stored was not."""


class StateDamaged(FailedPrecondition):
    """The state database cannot be trusted or used: gone, replaced, damaged, not a
    database, or not writable. The message is one line saying what to do; an RPC that
    meets it ends FAILED_PRECONDITION with that line, never INTERNAL."""


class ConfigError(FailedPrecondition):
    """A setting has the wrong type or value, or a path is unsafe to use; the message is
    one line naming the key (or path) and what is expected."""


class ToolError(Exception):
    """A tool call failed; `str(error)` is the text the model reads."""


class InputError(ToolError):
    """The call's input was invalid; the text is wrapped in <tool_use_error>."""


class PathOutsideWorkspace(InputError):
    def __init__(self, path: str, roots: list[str]) -> None:
        super().__init__(
            f"Path {path} is outside the session's workspace ({', '.join(roots)}). "
            "Only files inside the workspace can be accessed; use a path inside it."
        )
