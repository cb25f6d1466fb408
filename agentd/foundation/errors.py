"""The errors of agentd, and the one place each maps to a gRPC status.

    AgentdError                 something a client asked for cannot be done
    ├── InvalidRequest          malformed RPC fields          -> INVALID_ARGUMENT
    ├── NotFound                unknown session, task, request -> NOT_FOUND
    │   └── SessionNotFound
    ├── AlreadyExists           e.g. an open session has the name -> ALREADY_EXISTS
    ├── SessionClosed           the session is closed          -> FAILED_PRECONDITION
    ├── Unavailable             the daemon is shutting down    -> UNAVAILABLE
    ├── StorageFull             the state disk is full         -> RESOURCE_EXHAUSTED
    ├── StateDamaged            the state database is gone, damaged or unwritable -> DATA_LOSS
    └── ConfigError             a setting is invalid; `agentd serve` exits 2

    ToolError                   a tool call failed; the model sees the message
    └── InputError              the input was invalid; shown in <tool_use_error>
        └── PathOutsideWorkspace  a path resolves outside the session's roots

AgentdError ends an RPC with a status. ToolError never does: it becomes an
`is_error` tool_result the model can act on, because a failed tool call is an
answer, not a broken request.
"""

from __future__ import annotations

import grpc

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
    status: grpc.StatusCode = grpc.StatusCode.INTERNAL


class InvalidRequest(AgentdError):
    status = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(AgentdError):
    status = grpc.StatusCode.NOT_FOUND


class SessionNotFound(NotFound):
    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"no session with id {quoted(session_id)}; list sessions with `agentctl session ls`"
        )


class AlreadyExists(AgentdError):
    status = grpc.StatusCode.ALREADY_EXISTS


class SessionClosed(AgentdError):
    status = grpc.StatusCode.FAILED_PRECONDITION

    def __init__(self, session_id: str) -> None:
        shown = session_id if len(session_id) <= QUOTE_CHARS else quoted(session_id)
        super().__init__(f"session {shown} is closed; create a new one")


class Unavailable(AgentdError):
    status = grpc.StatusCode.UNAVAILABLE


class StorageFull(AgentdError):
    """The state dir's disk (or quota) is full: what had to be stored was not."""

    status = grpc.StatusCode.RESOURCE_EXHAUSTED


class StateDamaged(AgentdError):
    """The state database cannot be trusted or used: gone, replaced, damaged, not a
    database, or not writable. The message is one line saying what to do."""

    status = grpc.StatusCode.DATA_LOSS


class ConfigError(AgentdError):
    """A setting has the wrong type or value, or a path is unsafe to use; the message is
    one line naming the key (or path) and what is expected."""

    status = grpc.StatusCode.FAILED_PRECONDITION


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
