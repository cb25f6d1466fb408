"""An automated approver: a callback that answers a session's permission asks.

The daemon asks only clients that are attached when an ask comes (with nobody
attached, an ask is an immediate deny), so an approver is useful only once the
daemon counts it. Attach says when that is: its initial metadata (`agentd-attached`)
comes once the daemon has registered the subscriber, before any event. Starting an
approver returns only then: no sleeps, no races, and no event of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentd_client.core import structs
from agentd_client.core.errors import AgentdError, Cancelled, SessionClosed

if TYPE_CHECKING:
    from agentd_client.core.aio import AsyncClient
    from agentd_client.core.client import Client

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PermissionAsk:
    """What the daemon asks about: a tool call, why it needs approval, and the rule an
    `always` answer would add."""

    request_id: str
    tool_use_id: str
    tool_name: str
    input: dict[str, Any]
    reasons: list[str]
    suggested_rule: str

    @classmethod
    def from_pb(cls, x: Any) -> PermissionAsk:
        return cls(
            x.request_id,
            x.tool_use_id,
            x.tool_name,
            structs.from_struct(x.input, "input"),
            list(x.reasons),
            x.suggested_rule,
        )


# The callback's answer: True/"allow" (once), "always" (allow, and add the suggested
# rule), False/"deny". An exception or anything else is a deny.
Answer = bool | str
Decide = Callable[[PermissionAsk], Answer]
AsyncDecide = Callable[[PermissionAsk], Answer | Awaitable[Answer]]


def decision(answer: Any) -> tuple[str, str]:
    """(decision, scope) for ResolvePermission."""
    if answer is True or answer == "allow":
        return "allow", "once"
    if answer == "always":
        return "allow", "always"
    return "deny", "once"


def _open(session: Any) -> int:
    """Where an approver of `session` attaches from; a closed session asks nothing."""
    if session.closed:
        raise SessionClosed(f"session {session.id} is closed: nothing will ask its approver")
    return int(session.last_seq)


class Approver:
    """`with client.approver(session_id, decide):` -- asks answered by `decide` in a
    background thread until the block ends."""

    def __init__(self, client: Client, session_id: str, decide: Decide) -> None:
        self.client = client
        self.session_id = session_id
        self.decide = decide
        self.answered: list[tuple[PermissionAsk, str, str]] = []
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._attached = False
        self._stream: Any = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Approver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> Approver:
        after = _open(self.client.get_session(self.session_id))
        self._stream = self.client.attach(self.session_id, after)
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()
        self._ready.wait(self.client.timeout)
        if self._error is not None or not self._attached:
            self.close()
            raise self._error or AgentdError("the daemon did not confirm the approver's attach")
        return self

    def close(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _follow(self) -> None:
        try:
            self._attached = self._stream.wait_attached()
            if self._attached:  # else the stream's error comes next, for start() to raise
                self._ready.set()
            for event in self._stream:
                if event.HasField("permission_requested"):
                    self._answer(PermissionAsk.from_pb(event.permission_requested))
        except Cancelled:
            pass
        except BaseException as exc:  # reported to start() if it is still waiting
            self._error = exc
        finally:
            self._ready.set()

    def _answer(self, ask: PermissionAsk) -> None:
        try:
            chosen = decision(self.decide(ask))
        except Exception:
            log.exception("the approver's callback failed on %s; denied", ask.request_id)
            chosen = ("deny", "once")
        self.answered.append((ask, *chosen))
        try:
            self.client.resolve_permission(self.session_id, ask.request_id, *chosen)
        except AgentdError as exc:
            log.warning("could not answer %s: %s", ask.request_id, exc)


class AsyncApprover:
    """`async with client.approver(session_id, decide):` -- the asyncio twin; `decide`
    may be a coroutine function."""

    def __init__(self, client: AsyncClient, session_id: str, decide: AsyncDecide) -> None:
        self.client = client
        self.session_id = session_id
        self.decide = decide
        self.answered: list[tuple[PermissionAsk, str, str]] = []
        self._ready = asyncio.Event()
        self._error: BaseException | None = None
        self._attached = False
        self._stream: Any = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AsyncApprover:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> AsyncApprover:
        after = _open(await self.client.get_session(self.session_id))
        self._stream = self.client.attach(self.session_id, after)
        self._task = asyncio.ensure_future(self._follow())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), self.client.timeout)
        if self._error is not None or not self._attached:
            await self.close()
            raise self._error or AgentdError("the daemon did not confirm the approver's attach")
        return self

    async def close(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _follow(self) -> None:
        try:
            self._attached = await self._stream.wait_attached()
            if self._attached:  # else the stream's error comes next, for start() to raise
                self._ready.set()
            async for event in self._stream:
                if event.HasField("permission_requested"):
                    await self._answer(PermissionAsk.from_pb(event.permission_requested))
        except (Cancelled, asyncio.CancelledError):
            pass
        except Exception as exc:
            self._error = exc
        finally:
            self._ready.set()

    async def _answer(self, ask: PermissionAsk) -> None:
        try:
            answer = self.decide(ask)
            if asyncio.iscoroutine(answer) or isinstance(answer, Awaitable):
                answer = await answer
            chosen = decision(answer)
        except Exception:
            log.exception("the approver's callback failed on %s; denied", ask.request_id)
            chosen = ("deny", "once")
        self.answered.append((ask, *chosen))
        try:
            await self.client.resolve_permission(self.session_id, ask.request_id, *chosen)
        except AgentdError as exc:
            log.warning("could not answer %s: %s", ask.request_id, exc)
