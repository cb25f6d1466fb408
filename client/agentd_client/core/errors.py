"""The errors of talking to agentd: typed exceptions for programs, exit codes for agentctl.

For programs, every failed RPC raises one of these instead of a bare grpc.RpcError.
The tree mirrors the daemon's own (agentd/foundation/errors.py maps each to a gRPC status), plus
the failures that happen on the way there:

    AgentdError                 an RPC failed; .code() and .details() as on grpc.RpcError
    ├── InvalidRequest          malformed request fields         INVALID_ARGUMENT
    ├── NotFound                unknown session, task, request    NOT_FOUND
    │   └── SessionNotFound     ... the session, by its message
    ├── AlreadyExists           e.g. an open session has the name ALREADY_EXISTS
    ├── SessionClosed           the session is closed             FAILED_PRECONDITION
    ├── Unavailable             daemon not running, unreachable,  UNAVAILABLE
    │                           or shutting down
    ├── DeadlineExceeded        no answer within the deadline     DEADLINE_EXCEEDED
    ├── Unauthenticated         missing or wrong bearer token     UNAUTHENTICATED
    ├── Cancelled               the call was cancelled            CANCELLED
    └── InternalError           a daemon bug; see its log         INTERNAL, anything else

They subclass grpc.RpcError, so code written against grpc keeps working. A failed
*tool call* is not an error here: it is a ToolResult with is_error set.

For agentctl, each failure becomes one exit code:

0    OK           done
1    TOOL_FAILED  the tool call ran and returned an error result (is_error)
2    UNREACHABLE  cannot reach the daemon: it is not running, or the address,
                  CA, token file or context is wrong
3    REFUSED      the daemon refused the request: wrong token, unknown or
                  ambiguous session, invalid input, a closed session, a session
                  name already taken
4    MODEL_FAILED the model's API failed (agentctl agent): unreachable, the key
                  refused, or an error answer
64   USAGE        the command line is wrong (EX_USAGE)
69   MISSING      the command needs an optional part not installed (EX_UNAVAILABLE)
130  INTERRUPTED  Ctrl-C
128+N             ended by signal N (SIGTERM 143, SIGHUP 129): the caller went away

CliError            one line for a person, and the exit code
├── Unreachable     -> 2
├── Refused         -> 3
├── ModelFailed     -> 4
├── Usage           -> 64
└── Missing         -> 69
"""

from __future__ import annotations

import grpc

# agentctl's exit codes and one-line errors live in exits.py (no gRPC, so agentctl's
# parser answers without loading it); here for the callers that import them from errors.
from agentd_client.core.exits import (
    EXIT_CODES_HELP,
    INTERRUPTED,
    MISSING,
    MODEL_FAILED,
    OK,
    REFUSED,
    TOOL_FAILED,
    UNREACHABLE,
    USAGE,
    CliError,
    Missing,
    ModelFailed,
    Refused,
    Unreachable,
    Usage,
    need,
)

__all__ = [
    "EXIT_CODES_HELP",
    "INTERRUPTED",
    "MISSING",
    "MODEL_FAILED",
    "OK",
    "REFUSED",
    "TOOL_FAILED",
    "UNREACHABLE",
    "USAGE",
    "AgentdError",
    "AlreadyExists",
    "Cancelled",
    "CliError",
    "DeadlineExceeded",
    "InternalError",
    "InvalidRequest",
    "Missing",
    "ModelFailed",
    "NotFound",
    "Refused",
    "SessionClosed",
    "SessionNotFound",
    "Unauthenticated",
    "Unavailable",
    "Unreachable",
    "Usage",
    "from_grpc",
    "from_rpc_error",
    "need",
]


class AgentdError(grpc.RpcError):
    """An RPC to agentd failed. `code()` and `details()` answer as grpc.RpcError's do."""

    status: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, details: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(details)
        self._details = details
        self._code = code or self.status

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def __str__(self) -> str:
        return self._details or self._code.name


class InvalidRequest(AgentdError):
    status = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(AgentdError):
    status = grpc.StatusCode.NOT_FOUND


class SessionNotFound(NotFound):
    pass


class AlreadyExists(AgentdError):
    status = grpc.StatusCode.ALREADY_EXISTS


class SessionClosed(AgentdError):
    status = grpc.StatusCode.FAILED_PRECONDITION


class Unavailable(AgentdError):
    status = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(AgentdError):
    status = grpc.StatusCode.DEADLINE_EXCEEDED


class Unauthenticated(AgentdError):
    status = grpc.StatusCode.UNAUTHENTICATED


class Cancelled(AgentdError):
    status = grpc.StatusCode.CANCELLED


class InternalError(AgentdError):
    status = grpc.StatusCode.INTERNAL


_BY_CODE: dict[grpc.StatusCode, type[AgentdError]] = {
    cls.status: cls
    for cls in (
        InvalidRequest,
        NotFound,
        AlreadyExists,
        SessionClosed,
        Unavailable,
        DeadlineExceeded,
        Unauthenticated,
        Cancelled,
        InternalError,
    )
}


def from_grpc(exc: grpc.RpcError) -> AgentdError:
    """The typed error for a failed RPC (itself, if it is one already)."""
    if isinstance(exc, AgentdError):
        return exc
    code = exc.code() if hasattr(exc, "code") else None
    code = code or grpc.StatusCode.UNKNOWN
    details = (exc.details() if hasattr(exc, "details") else "") or ""
    cls = _BY_CODE.get(code, InternalError)
    if cls is NotFound and details.startswith("no session"):
        cls = SessionNotFound
    error = cls(details, code)
    error.__cause__ = exc
    return error


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def _why(detail: str) -> str:
    """gRPC's connect failure without its boilerplate: "Connection refused", ..."""
    detail = detail.removeprefix("failed to connect to all addresses; last error: ")
    return detail.rpartition(" error: ")[2] if " error: " in detail else detail


def from_rpc_error(exc: grpc.RpcError, where: str, ca: str | None = None) -> CliError:
    """The failure of an RPC to the daemon at `where`, said so a person knows what to do;
    `ca`: the CA file given ("" for none: the system's roots), when known."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    detail = _first_line(exc.details() if hasattr(exc, "details") else str(exc))
    status = code.name if code else "UNKNOWN"
    if code == grpc.StatusCode.UNAVAILABLE:
        if "CERTIFICATE_VERIFY_FAILED" in detail or "certificate verify failed" in detail:
            if ca == "":
                return Unreachable(
                    f"cannot reach agentd at {where}: its TLS certificate is not signed by a "
                    "CA this machine trusts, and no CA was given: pass --ca (the daemon's "
                    "ca.pem) or use a context that has it",
                    status,
                )
            return Unreachable(
                f"cannot reach agentd at {where}: its TLS certificate is not signed by the "
                "given CA (check --ca or the context's ca)",
                status,
            )
        if "Hostname Verification" in detail or "Peer name" in detail:
            host = where.split(" ")[0].rpartition(":")[0].strip("[]")
            return Unreachable(
                f"cannot reach agentd at {where}: its TLS certificate does not name {host}; "
                "connect by a name it has, or remake it on the daemon's host with "
                f"`agentd tls init --force --name {host}`",
                status,
            )
        if "Ssl handshake failed" in detail or "SSL" in detail:
            return Unreachable(
                f"cannot reach agentd at {where}: the TLS handshake failed (is it the TLS "
                f"listener, and does its certificate name this host?): {detail}",
                status,
            )
        return Unreachable(
            f"cannot reach agentd at {where} ({_why(detail)}); start it with `agentd serve`, "
            "or pass --socket, --address or --context",
            status,
        )
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Unreachable(f"agentd at {where} did not answer in time ({detail})", status)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return Refused(
            f"agentd at {where} refused the request: {detail or 'not authenticated'} "
            "(check --token-file or the context's token_file)",
            status,
        )
    if code == grpc.StatusCode.CANCELLED:
        return Refused(f"the request to agentd at {where} was cancelled ({detail})", status)
    return Refused(f"agentd refused: {detail or status} ({status})", status)
