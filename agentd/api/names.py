"""Sessions named by a person's words in every request: a full id, a name, or a unique id
prefix, as Docker's API takes a container's. Resolved here, once, for every RPC whose
request (or a stream's first message) has a `session_id`: the handlers see the full id.

Order: a full id; a name (the open session of that name, which the daemon keeps unique;
else the closed ones, which may share it); a unique prefix of an id. A reference that
picks several is refused, naming them; one that picks none is left as it is, for the
handler's own "no session" answer.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import grpc

from agentd.api.decoding import Refusal
from agentd.foundation.errors import InvalidRequest
from agentd.sessions.session import Session, SessionManager

_FULL_ID = re.compile(r"[0-9a-f]{32}")
_PREFIX = re.compile(r"[0-9a-f]{1,31}")
SHOWN = 10  # candidates named in an ambiguity's message


def resolve(sessions: Iterable[Session], ref: str) -> str | None:
    """The id `ref` names, None if none; InvalidRequest if it names several."""
    if _FULL_ID.fullmatch(ref):
        return ref
    every = list(sessions)
    named = [s for s in every if s.name == ref]
    if named:
        open_named = [s for s in named if not s.closed]
        return _one(ref, open_named or named, "name")
    if _PREFIX.fullmatch(ref):
        prefixed = [s for s in every if s.id.startswith(ref)]
        if prefixed:
            return _one(ref, prefixed, "id prefix")
    return None


def _one(ref: str, matches: list[Session], how: str) -> str:
    if len(matches) == 1:
        return matches[0].id
    matches = sorted(matches, key=lambda s: (s.closed, -s.created_ms))  # open, newest first
    listed = ", ".join(
        f"{s.id} ({s.name or 'no name'}, {'closed' if s.closed else 'open'})"
        for s in matches[:SHOWN]
    )
    more = f" and {len(matches) - SHOWN} more" if len(matches) > SHOWN else ""
    raise InvalidRequest(
        f"session {ref[:80]!r} is ambiguous: {len(matches)} sessions match by {how} "
        f"({listed}{more}); give more of the id"
    )


def named(session: Session) -> str:
    """A session as a person knows it: its name and short id, else its id."""
    return f"{session.name!r} ({session.id[:12]})" if session.name else session.id


class SessionNames(grpc.aio.ServerInterceptor):
    """Rewrites a request's `session_id` from a name or prefix to the id. Listed after
    DecodeGuard, whose decoder wraps this one (a refusal here is answered there)."""

    def __init__(self, sessions: SessionManager) -> None:
        self.sessions = sessions

    def _resolved(self, request: Any) -> Any:
        ref = getattr(request, "session_id", None)
        if not isinstance(ref, str) or not ref or _FULL_ID.fullmatch(ref):
            return request
        try:
            found = resolve(self.sessions.list(include_closed=True), ref)
        except InvalidRequest as exc:
            return Refusal(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        if found is not None:
            request.session_id = found
        return request

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(details)
        decode = getattr(handler, "request_deserializer", None)
        if handler is None or decode is None or not hasattr(handler, "_replace"):
            return handler

        def decode_and_resolve(raw: bytes) -> Any:
            return self._resolved(decode(raw))

        return handler._replace(request_deserializer=decode_and_resolve)
