"""One tool call's lifecycle, and batches of calls.

resolve name -> parse, coerce, validate -> tool.validate_input -> permission ->
call (progress events) -> size budget -> journal and CallFinished.
Every failure on the way becomes an `is_error` result; nothing escapes as an
exception, because a failed call is an answer the model must see.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentd.calls import eager, spill, validation
from agentd.foundation import metrics
from agentd.foundation.config import Config
from agentd.foundation.errors import InputError, StorageFull, ToolError
from agentd.permissions.decision import Decision
from agentd.runs.launch import Interactive
from agentd.sessions import event_types as events
from agentd.sessions.session import Session, SessionManager
from agentd.sessions.store_faults import is_full
from agentd.tools import Registry
from agentd.tools.base import (
    DocumentBlock,
    ImageBlock,
    ReadOnlyTool,
    TextBlock,
    Tool,
    ToolContext,
    ToolResult,
)
from agentd.tools.services import Services

log = logging.getLogger(__name__)

# How long a cancelled call may take to end by itself (keeping its partial output)
# before its task is cancelled outright.
CANCEL_GRACE = 1.0


@dataclass(frozen=True, slots=True)
class ToolUse:
    tool_use_id: str
    name: str
    # As the caller sent it; the call works on a copy, so events show what was asked.
    input: dict[str, Any]


class PermissionChecker(Protocol):
    async def decide(
        self, session: Session, tool: Tool, args: dict[str, Any], ctx: ToolContext
    ) -> Decision: ...

    async def after_call(
        self,
        session: Session,
        tool: Tool,
        args: dict[str, Any],
        result: ToolResult,
        ctx: ToolContext,
    ) -> None: ...


# Receives a call's progress and results, for the caller.
Update = events.Progress | events.ResultPayload
UpdateSink = Callable[[Update], Awaitable[None]]


def result_payload(tool_use_id: str, result: ToolResult) -> events.ResultPayload:
    """A result as JSON-able data, the shape events and the journal carry: built once per
    finished call (run_one stores it on the result) and reused by every reply."""
    if result.payload is not None and result.payload["tool_use_id"] == tool_use_id:
        return result.payload
    content: list[events.ContentPayload] = []
    for block in result.content:
        if isinstance(block, TextBlock):
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock | DocumentBlock):
            # base64, as the Messages API takes it (journals before it hold hex "data").
            data = base64.b64encode(block.data).decode("ascii")
            kind = "image" if isinstance(block, ImageBlock) else "document"
            content.append({"type": kind, "media_type": block.media_type, "base64": data})
    return {
        "tool_use_id": tool_use_id,
        "content": content,
        "is_error": result.is_error,
        "data": result.data,
    }


@dataclass
class _Running:
    task: asyncio.Future[ToolResult]
    ctx: ToolContext


@dataclass
class Executor:
    """Runs calls; `permissions` is required: without a checker nothing would decide, and
    an executor that cannot ask must not run anything (it is never "allow everything")."""

    registry: Registry
    sessions: SessionManager
    config: Config
    permissions: PermissionChecker
    services: Services
    _running: dict[tuple[str, str], _Running] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not callable(getattr(self.permissions, "decide", None)):
            raise TypeError("Executor needs a permission checker; none was given")

    @property
    def running_count(self) -> int:
        return len(self._running)

    async def run_batch(
        self, session: Session, calls: list[ToolUse], sink: UpdateSink
    ) -> list[ToolResult]:
        """Consecutive concurrency-safe calls run together; any other call runs alone."""
        results_in_order: list[ToolResult] = []
        group: list[ToolUse] = []

        async def flush() -> None:
            if group:
                # A group's calls each get a Task at once, so they all start (and say so)
                # before any of them ends, as calls run together should.
                together = len(group) > 1
                done = await asyncio.gather(
                    *(self.run_one(session, c, sink, in_place=not together) for c in group)
                )
                for call, result in zip(group, done, strict=True):
                    await sink(result_payload(call.tool_use_id, result))
                results_in_order.extend(done)
                group.clear()

        for call in calls:
            if self._concurrency_safe(call):
                group.append(call)
                continue
            await flush()
            result = await self.run_one(session, call, sink)
            await sink(result_payload(call.tool_use_id, result))
            results_in_order.append(result)
        await flush()
        return results_in_order

    def cancel(self, session_id: str, tool_use_id: str) -> bool:
        running = self._running.get((session_id, tool_use_id))
        if running is None:
            return False
        running.ctx.cancelled.set()
        # A tool that watches ctx.cancelled ends itself and keeps its partial output;
        # one that does not is cancelled outright after a grace period.
        asyncio.get_running_loop().call_later(CANCEL_GRACE, running.task.cancel)
        return True

    async def cancel_all(self, grace: float = 5.0, session_id: str | None = None) -> None:
        """Cancel every running call (of one session, if given) and wait, at most `grace`
        seconds, for them to end."""
        running = [r for (sid, _), r in self._running.items() if session_id in (None, sid)]
        for r in running:
            r.ctx.cancelled.set()
        if running:
            _, pending = await asyncio.wait([r.task for r in running], timeout=grace)
            for task in pending:
                task.cancel()

    def _concurrency_safe(self, call: ToolUse) -> bool:
        tool = self.registry.get(call.name)
        if tool is None:
            return True  # fails at once, touching nothing
        try:
            args = validation.coerce(copy.deepcopy(call.input), tool.input_schema)
            return bool(tool.is_concurrency_safe(args))
        except Exception:
            return False

    async def run_one(
        self,
        session: Session,
        call: ToolUse,
        sink: UpdateSink,
        in_place: bool = True,
        *,
        interactive: Interactive | None = None,
        ask_timeout: float = 0.0,
    ) -> ToolResult:
        """Run a call: progress goes to `sink`; the result is journaled and returned.
        `in_place`: up to its first wait, in the caller's turn of the loop (eager.py);
        `interactive`: a person will drive its command (StartTask, agentd/calls/tasks.py);
        `ask_timeout`: how long its asks wait, as its caller asked (0: the session's)."""
        log_ = self.sessions.log(session.id)
        started = time.monotonic()
        unjournaled = self.sessions.store.unjournaled
        store = self.sessions.store
        log_.emit(
            events.CallStarted(tool_use_id=call.tool_use_id, name=call.name, input=call.input)
        )
        recorded = store.unjournaled == unjournaled
        # Until its end is journaled, a crash leaves it open: the next start ends it as
        # interrupted (sessions/recovery.py).
        with contextlib.suppress(StorageFull):
            store.call_opened(session.id, call.tool_use_id, call.name, int(time.time() * 1000))

        async def progress(output: str = "", message: str = "", **where: Any) -> None:
            update = events.Progress(
                tool_use_id=call.tool_use_id,
                elapsed_ms=int((time.monotonic() - started) * 1000),
                output=output,
                message=message,
                **where,  # output_id, output_size, last_line of a command's output file
            )
            log_.emit(update)
            await sink(update)

        ctx = ToolContext(
            session=session,
            tool_use_id=call.tool_use_id,
            state_dir=self.config.session_dir(session.id),
            progress=progress,
            services=self.services,
            interactive=interactive,
            ask_timeout=ask_timeout,
        )
        key = (session.id, call.tool_use_id)
        # A Task of its own only if the call waits (eager.py): most calls end at once.
        work = self._execute(session, call, ctx, recorded)
        task = eager.start(work) if in_place else asyncio.ensure_future(work)
        self._running[key] = _Running(task, ctx)
        caller_gone = False
        try:
            # Shielded, so the call ends as a cancelled call does (its end journaled, its
            # partial output kept) rather than being torn down mid-step.
            result = await task if task.done() else await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                result = ToolResult.text(
                    "The call was cancelled before it finished.", is_error=True
                )
            else:
                # The caller went away (its process killed, its connection dropped, its
                # deadline past): nobody is left to read the result, so the call is
                # cancelled as CancelCall does, and its ask withdrawn everywhere.
                caller_gone = True
                result = await self._end_abandoned(call, task, ctx)
        finally:
            self._running.pop(key, None)
        if notices := self.services.tasks.take_notices(session.id):
            # The model hears of finished background tasks with its next result.
            result.content.append(TextBlock("\n".join(notices)))
        # On a full disk, what changed is kept in memory and saved with the next save.
        with contextlib.suppress(StorageFull):
            self.sessions.save(session)
        metrics.call_finished(call.name, result.is_error, time.monotonic() - started)
        # The result is final from here on: its wire form is made once, for all.
        result.payload = result_payload(call.tool_use_id, result)
        log_.emit(
            events.CallFinished(
                name=call.name,
                duration_ms=int((time.monotonic() - started) * 1000),
                result=result.payload,
            )
        )
        with contextlib.suppress(StorageFull):
            store.call_closed(session.id, call.tool_use_id)
            if not isinstance(self.registry.get(call.name), ReadOnlyTool):
                # The result of a call that may have changed something is committed
                # before its caller hears it, so a crash never loses a result a client
                # holds (~0.15 ms a call; docs/operations.md, "What survives a crash"). A call that
                # only reads keeps the group commit's window.
                store.flush()
        if caller_gone:
            raise asyncio.CancelledError  # the rest of its batch does not run
        return result

    async def _end_abandoned(
        self, call: ToolUse, task: asyncio.Future[ToolResult], ctx: ToolContext
    ) -> ToolResult:
        log.info("call %s (%s): its caller went away; cancelling it", call.tool_use_id, call.name)
        ctx.cancelled.set()
        hard = asyncio.get_running_loop().call_later(CANCEL_GRACE, task.cancel)
        try:
            return await task
        except asyncio.CancelledError:
            return ToolResult.text(
                "The call was cancelled: its caller went away before it finished.",
                is_error=True,
            )
        finally:
            hard.cancel()

    async def _execute(
        self, session: Session, call: ToolUse, ctx: ToolContext, recorded: bool = True
    ) -> ToolResult:
        """Run the call; `recorded`: its call_started event reached the journal."""
        tool = self.registry.get(call.name)
        if tool is None:
            return ToolResult.error(f"Error: No such tool available: {call.name}", input_error=True)
        try:
            args = tool.lenient_input(
                validation.coerce(copy.deepcopy(call.input), tool.input_schema)
            )
            validation.validate(tool.name, args, tool.input_schema)
            await tool.validate_input(args, ctx)
            if not tool.is_read_only(args) and (problem := self.sessions.store.check()):
                # The journal is gone or replaced: nothing it changes would be kept.
                return ToolResult.error(
                    f"{tool.name} was not run: {problem}. Tools that only read still work."
                )
            if not tool.is_read_only(args) and (not recorded or self.sessions.storage_full()):
                # What it changes could not be journaled: refused, before anyone is asked.
                return ToolResult.error(
                    f"{tool.name} was not run: agentd's state disk is full, so the call "
                    "could not be recorded. Tools that only read still work; ask the "
                    "person running agentd to free space in its state dir."
                )
            decision = await self.permissions.decide(session, tool, args, ctx)
            metrics.permission_decided(decision.behavior)
            if not decision.allowed:
                return ToolResult.error(decision.reason or "Permission denied.")
            ctx.sandbox = decision.sandbox
            if decision.updated_input is not None:
                # A hook rewrote the input: it must be as valid as the model's own.
                args = tool.lenient_input(
                    validation.coerce(decision.updated_input, tool.input_schema)
                )
                validation.validate(tool.name, args, tool.input_schema)
                await tool.validate_input(args, ctx)
            result = await tool.call(args, ctx)
        except InputError as exc:
            return ToolResult.error(str(exc), input_error=True)
        except ToolError as exc:
            return ToolResult.error(str(exc))
        except asyncio.CancelledError:
            return ToolResult.text("The call was cancelled.", is_error=True)
        except OSError as exc:
            # The filesystem said no (a name too long, a loop of links, no permission):
            # a fact about the machine the model can act on, not a bug of the tool.
            log.info("%s on call %s: %s", call.name, call.tool_use_id, exc)
            where = f" ({exc.filename})" if exc.filename else ""
            return ToolResult.error(
                f"{tool.name} could not complete: {exc.strerror or exc}{where}."
            )
        except Exception as exc:
            log.exception("tool %s crashed on call %s", call.name, call.tool_use_id)
            return ToolResult.error(
                f"The {tool.name} tool failed unexpectedly: {type(exc).__name__}: {exc}. "
                "This is a bug in agentd; try another way."
            )
        try:
            await self.permissions.after_call(session, tool, args, result, ctx)
        except Exception:
            log.exception("PostToolUse handling failed for %s", call.tool_use_id)
        try:
            return spill.persist_if_large(
                result, tool.max_result_chars, f"{ctx.state_dir}/tool-results", call.tool_use_id
            )
        except OSError as exc:
            if not is_full(exc):
                raise
            return ToolResult.error(
                f"{tool.name} ran, but its result is too large to return and agentd's state "
                f"disk is full, so it could not be saved for you to read ({exc.strerror}). "
                "Narrow the call (a smaller range or a filter) or ask for space to be freed."
            )


def new_tool_use_id() -> str:
    return f"toolu_{uuid.uuid4().hex[:24]}"
