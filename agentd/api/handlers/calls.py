"""Tool calls: one (streamed or unary), a batch, and cancelling one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from agentd.api.handlers.rpc import require, stream, unary
from agentd.api.wire import result_bytes, update_to_pb
from agentd.calls.executor import (
    Executor,
    ToolUse,
    Update,
    UpdateSink,
    new_tool_use_id,
    result_payload,
)
from agentd.foundation.errors import InvalidRequest
from agentd.permissions import asker
from agentd.sessions.event_types import Progress
from agentd.sessions.session import SessionManager
from agentd_client.core import structs
from agentd_client.v1 import agentd_pb2 as pb

MAX_BATCH = 64
# Progress updates a slow caller may have queued before newer ones are dropped.
MAX_QUEUED_PROGRESS = 256


async def _ignore_updates(update: Update) -> None:
    """A unary caller takes no progress; the session's attached clients still get it."""


def _tool_use(call: pb.ToolUse, where: str = "call") -> ToolUse:
    name = require(call.name, f"{where}.name")
    try:
        args = structs.from_struct(call.input, f"{where}.input")
    except ValueError as exc:
        raise InvalidRequest(f"{exc}; a tool's input must be a JSON object") from None
    return ToolUse(call.tool_use_id or new_tool_use_id(), name, args)


def _ask_timeout(request: pb.RunToolRequest) -> float:
    """The call's own ask timeout (0: none), checked."""
    return asker.checked_timeout(request.ask_timeout_seconds, "ask_timeout_seconds")


async def _stream_calls(
    run: Callable[[UpdateSink], Awaitable[Any]],
) -> AsyncIterator[pb.ToolCallUpdate | bytes]:
    """`run`'s progress and results as updates, in order; a slow caller loses progress,
    never a result."""
    queue: asyncio.Queue[Update | None] = asyncio.Queue()

    async def sink(update: Update) -> None:
        if isinstance(update, Progress) and queue.qsize() > MAX_QUEUED_PROGRESS:
            return
        queue.put_nowait(update)

    task = asyncio.ensure_future(run(sink))
    task.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while (item := await queue.get()) is not None:
            yield update_to_pb(item)
    finally:
        if not task.done():
            # The caller went away: its calls are cancelled (Executor.run_one).
            task.cancel()
    task.result()


class CallHandlers:
    def __init__(self, sessions: SessionManager, executor: Executor) -> None:
        self.sessions = sessions
        self.executor = executor

    @stream
    async def RunTool(
        self, request: pb.RunToolRequest, context: Any
    ) -> AsyncIterator[pb.ToolCallUpdate | bytes]:
        session = self.sessions.get(require(request.session_id, "session_id"), open_only=True)
        call = _tool_use(request.call)
        timeout = _ask_timeout(request)

        async def run(sink: UpdateSink) -> None:
            result = await self.executor.run_one(session, call, sink, ask_timeout=timeout)
            await sink(result_payload(call.tool_use_id, result))

        async for update in _stream_calls(run):
            yield update

    @unary
    async def CallTool(self, request: pb.RunToolRequest, context: Any) -> bytes:
        """The result as a serialized ToolResult (wire.result_bytes), sent as it is."""
        session = self.sessions.get(require(request.session_id, "session_id"), open_only=True)
        call = _tool_use(request.call)
        timeout = _ask_timeout(request)
        result = await self.executor.run_one(session, call, _ignore_updates, ask_timeout=timeout)
        return result_bytes(result_payload(call.tool_use_id, result))

    @stream
    async def RunTools(
        self, request: pb.RunToolsRequest, context: Any
    ) -> AsyncIterator[pb.ToolCallUpdate | bytes]:
        session = self.sessions.get(require(request.session_id, "session_id"), open_only=True)
        if not request.calls:
            raise InvalidRequest("calls is empty: send at least one tool_use")
        if len(request.calls) > MAX_BATCH:
            raise InvalidRequest(f"at most {MAX_BATCH} calls in one batch")
        calls = [_tool_use(c, f"calls[{i}]") for i, c in enumerate(request.calls)]
        ids = [c.tool_use_id for c in calls]
        if len(set(ids)) != len(ids):
            raise InvalidRequest("tool_use_id values in a batch must be distinct")
        async for update in _stream_calls(
            lambda sink: self.executor.run_batch(session, calls, sink)
        ):
            yield update

    @unary
    async def CancelCall(
        self, request: pb.CancelCallRequest, context: Any
    ) -> pb.CancelCallResponse:
        self.sessions.get(require(request.session_id, "session_id"))
        cancelled = self.executor.cancel(
            request.session_id, require(request.tool_use_id, "tool_use_id")
        )
        return pb.CancelCallResponse(cancelled=cancelled)
