"""Asking people: pending permission requests, answered by any attached client.

`ask` emits a `permission_requested` event to the session's log, so every attached
client sees it, and waits. The first `resolve` wins and is announced to all as a
`permission_resolved` event; a later answer gets accepted=False and a message saying
who answered first. No answer within the timeout is a deny (decided_by "timeout"),
never an allow. With nobody attached there is nobody to ask: the caller denies at once.

The timeout is the call's own if it gave one (`ToolContext.ask_timeout`, from RunTool),
else its session's (`Session.ask_timeout_seconds`), else the daemon's
(`permission_timeout_seconds`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agentd.foundation import metrics
from agentd.foundation.errors import InvalidRequest, SessionNotFound
from agentd.permissions.decision import Behavior
from agentd.sessions import event_types
from agentd.sessions.session import SessionManager

log = logging.getLogger(__name__)

# How many answered requests are remembered, to tell a late answer who came first.
_REMEMBERED = 1024
# Bounds of an ask timeout a session or a call may set, in seconds.
MIN_TIMEOUT = 1.0
MAX_TIMEOUT = 86400.0


def checked_timeout(seconds: float, what: str) -> float:
    """`seconds` if it is a valid ask timeout (0 meaning "not set"); InvalidRequest
    saying the bounds otherwise."""
    if seconds == 0:
        return 0.0
    if not MIN_TIMEOUT <= seconds <= MAX_TIMEOUT:  # NaN fails this too
        raise InvalidRequest(
            f"{what} {seconds:g}s is out of range: give 1s to 24h (e.g. 90s, 10m), "
            "or 0 for the daemon's default"
        )
    return float(seconds)


@dataclass(frozen=True, slots=True)
class Answer:
    decision: Behavior  # ALLOW or DENY
    scope: str  # "once" or "always"
    decided_by: str  # "alice@devbox on /dev/pts/3", "timeout", "cancelled"
    rule: str = ""  # the rule an "always" answer chose (one of the offered choices)


@dataclass
class _Pending:
    session_id: str
    future: asyncio.Future[Answer]
    expires_ms: int = 0
    rule_choices: tuple[str, ...] = ()


def waiting(ctx: Any, message: str) -> Callable[[str, int], Awaitable[None]]:
    """An `announce` for an ask made during a tool call: a progress update on the call's
    stream (and to attached clients) naming the request and how many may answer it."""

    async def announce(request_id: str, attached_clients: int) -> None:
        await ctx.progress(
            message=message,
            permission_request_id=request_id,
            attached_clients=attached_clients,
        )

    return announce


class Asker:
    """Pending requests keyed by request id; the API answers them (ResolvePermission)."""

    def __init__(self, sessions: SessionManager, timeout_seconds: float) -> None:
        self.sessions = sessions
        self.timeout_seconds = timeout_seconds
        self._pending: dict[str, _Pending] = {}
        self._answered: OrderedDict[str, tuple[str, Answer]] = OrderedDict()

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def pending_ids(self, session_id: str) -> list[str]:
        return [rid for rid, p in self._pending.items() if p.session_id == session_id]

    def timeout_for(self, session_id: str, call_timeout: float = 0.0) -> float:
        """How long an ask waits: the call's, the session's, or the daemon's."""
        if call_timeout:
            return call_timeout
        try:
            session = self.sessions.get(session_id)
        except SessionNotFound:
            return self.timeout_seconds
        return session.ask_timeout_seconds or self.timeout_seconds

    def has_listeners(self, session_id: str) -> bool:
        return self.sessions.log(session_id).subscriber_count > 0

    async def ask(
        self,
        session_id: str,
        *,
        tool_use_id: str,
        tool_name: str,
        tool_input: dict[str, Any],
        reasons: list[str],
        rule_choices: tuple[str, ...] = (),
        cancelled: asyncio.Event | None = None,
        announce: Callable[[str, int], Awaitable[None]] | None = None,
        timeout: float = 0.0,
    ) -> Answer:
        """Publish a request and wait for the first answer, the timeout, or cancellation.
        `rule_choices`: what an "always" answer may add, the suggested rule first.
        `announce(request_id, attached_clients)` tells the caller once it is published
        (its RunTool stream says so: `agentctl call` shows the request's code)."""
        if cancelled is not None and cancelled.is_set():
            return Answer(Behavior.DENY, "once", "cancelled")  # never shown: nobody waits for it
        request_id = f"perm_{uuid.uuid4().hex[:20]}"
        loop = asyncio.get_running_loop()
        timeout = self.timeout_for(session_id, timeout)
        expires_ms = int((time.time() + timeout) * 1000)
        choices = tuple(rule_choices)
        events = self.sessions.log(session_id)
        if announce is not None:
            # Before the event, as the progress always came: a client replaying the journal
            # knows it has caught up when it reaches the request (progress is not journaled).
            await announce(request_id, events.subscriber_count)
        pending = _Pending(session_id, loop.create_future(), expires_ms, choices)
        self._pending[request_id] = pending
        events.emit(
            event_types.PermissionRequested(
                request_id=request_id,
                tool_use_id=tool_use_id,
                tool_name=tool_name,
                input=tool_input,
                reasons=list(reasons),
                suggested_rule=choices[0] if choices else "",
                expires_ms=expires_ms,
                rule_choices=list(choices),
            )
        )
        log.info(
            "session %s: permission request %s for %s (%s)",
            session_id,
            request_id,
            tool_name,
            tool_use_id,
        )
        waiters: set[asyncio.Future[Any]] = {pending.future}
        stop: asyncio.Future[Any] | None = None
        if cancelled is not None:
            stop = asyncio.ensure_future(cancelled.wait())
            waiters.add(stop)
        try:
            done, _ = await asyncio.wait(
                waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if stop is not None:
                stop.cancel()
            if request_id in self._pending and not pending.future.done():
                # Timed out, cancelled, or our caller went away: close the request for all.
                who = "timeout" if not (stop is not None and stop.done()) else "cancelled"
                self._finish(request_id, Answer(Behavior.DENY, "once", who))
        return pending.future.result()

    def resolve(
        self,
        session_id: str,
        request_id: str,
        decision: str,
        scope: str,
        *,
        decided_by: str = "person",
        rule: str = "",
    ) -> tuple[bool, str]:
        """An answer from a client: (accepted, message). The first answer wins."""
        pending = self._pending.get(request_id)
        if pending is None or pending.session_id != session_id:
            earlier = self._answered.get(request_id)
            if earlier is not None and earlier[0] == session_id:
                first = earlier[1]
                return False, (
                    f"permission request {request_id} was already resolved: "
                    f"{first.decision} ({first.scope}) by {first.decided_by}"
                )
            return False, f"no pending permission request {request_id} in session {session_id}"
        if decision not in ("allow", "deny") or scope not in ("once", "always"):
            return False, "decision must be allow or deny, scope once or always"
        if rule and (scope != "always" or rule not in pending.rule_choices):
            offered = ", ".join(pending.rule_choices) or "none"
            return False, f"rule {rule!r} is not one this request offers ({offered})"
        if scope == "always" and not rule and pending.rule_choices:
            rule = pending.rule_choices[0]
        self._finish(request_id, Answer(Behavior(decision), scope, decided_by, rule))
        return True, f"permission request {request_id}: {decision} ({scope})"

    def _finish(self, request_id: str, answer: Answer) -> None:
        pending = self._pending.pop(request_id)
        if not pending.future.done():
            pending.future.set_result(answer)
        self._answered[request_id] = (pending.session_id, answer)
        metrics.ask_answered(answer.decision, answer.decided_by)
        while len(self._answered) > _REMEMBERED:
            self._answered.popitem(last=False)
        self.sessions.log(pending.session_id).emit(
            event_types.PermissionResolved(
                request_id=request_id,
                decision=answer.decision,
                scope=answer.scope,
                decided_by=answer.decided_by,
                rule=answer.rule or "",
            )
        )
        log.info(
            "session %s: permission request %s resolved: %s (%s) by %s",
            pending.session_id,
            request_id,
            answer.decision,
            answer.scope,
            answer.decided_by,
        )
