"""The gRPC servicer: proto <-> domain objects, nothing else (the messages are built in
wire.py).

Each RPC validates what it is sent, calls the domain, and maps the answer back.
AgentdError ends the RPC with its status (errors.py); anything else is a bug,
logged, and answered INTERNAL, so one bad request never takes the daemon down.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from agentd import __version__
from agentd.api.wire import (
    event_to_pb,
    result_to_pb,
    session_to_pb,
    struct_or_none,
    task_to_pb,
    trust_to_pb,
    update_to_pb,
)
from agentd.bashsec import classify
from agentd.calls.executor import Executor, ToolUse, new_tool_use_id, result_payload
from agentd.foundation import metrics
from agentd.foundation.errors import AgentdError, InvalidRequest
from agentd.permissions import Asker, parse_rule
from agentd.permissions.approvals import Approvals
from agentd.runs.output.serving import EncodedChunks
from agentd.sessions import agent_events
from agentd.sessions.retention import Reaper
from agentd.sessions.session import PERMISSION_MODES, SessionManager
from agentd.tools.services import Services
from agentd_client import structs
from agentd_client._calls import ATTACHED_KEY
from agentd_client.v1 import agentd_pb2 as pb
from agentd_client.v1 import agentd_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

MAX_BATCH = 64
# Sequence numbers are SQLite integers.
MAX_SEQ = 2**63 - 1
# Progress updates a slow caller may have queued before newer ones are dropped.
MAX_QUEUED_PROGRESS = 256


def _unary(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def wrapper(self: Servicer, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await method(self, request, context)
        except AgentdError as exc:
            await context.abort(exc.status, str(exc))
        except asyncio.CancelledError:
            raise
        except grpc.aio.AbortError:
            raise
        except Exception:
            log.exception("%s failed", method.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error; see the daemon's log")

    return wrapper


def _stream(method: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    @functools.wraps(method)
    async def wrapper(
        self: Servicer, request: Any, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        try:
            async for item in method(self, request, context):
                yield item
        except AgentdError as exc:
            await context.abort(exc.status, str(exc))
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception:
            log.exception("%s failed", method.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error; see the daemon's log")

    return wrapper


_IDENTITY = re.compile(r"agentd-client \(([^()]{1,300})\)")


def client_identity(context: Any) -> str:
    """Who a client says it is (user@host on terminal, sent as its user agent when it
    connects), for the record of what a person decided; else its transport peer."""
    for key, value in context.invocation_metadata() or ():
        if key == "user-agent" and (m := _IDENTITY.search(value)):
            fields = dict(
                part.strip().partition("=")[::2] for part in m.group(1).split(";") if "=" in part
            )
            who = f"{fields.get('user') or '?'}@{fields.get('host') or '?'}"
            if tty := fields.get("tty"):
                who += f" on {tty}"
            return who
    return f"person via {context.peer()}"


def _require(value: str, what: str) -> str:
    if not value:
        raise InvalidRequest(f"{what} is required")
    return value


async def _ignore_updates(kind: str, payload: dict[str, Any]) -> None:
    """A unary caller takes no progress; the session's attached clients still get it."""


class Servicer(pb_grpc.AgentdServicer):
    def __init__(
        self,
        sessions: SessionManager,
        executor: Executor,
        *,
        socket_path: str,
        state_dir: str,
        services: Services,
        asker: Asker,
        approvals: Approvals,
        reaper: Reaper,
        sandbox_report: dict[str, Any],
    ) -> None:
        self.sessions = sessions
        self.executor = executor
        self.socket_path = socket_path
        self.state_dir = state_dir
        self.services = services
        self.asker = asker
        self.approvals = approvals
        self.reaper = reaper
        self.sandbox_report = sandbox_report
        self.started = time.monotonic()
        self._encoded_chunks = EncodedChunks()

    @_unary
    async def GetStatus(self, request: pb.GetStatusRequest, context: Any) -> pb.Status:
        return pb.Status(
            version=__version__,
            pid=os.getpid(),
            uptime_seconds=time.monotonic() - self.started,
            open_sessions=len(self.sessions.list()),
            running_calls=self.executor.running_count,
            running_tasks=self.services.tasks.running_count(),
            socket_path=self.socket_path,
            state_dir=self.state_dir,
            sandbox=structs.to_struct(self.sandbox_report),
            calls_served=metrics.calls_served(),
            pending_asks=self.asker.pending_count,
            state=pb.StateUsage(**self.reaper.usage()),
            tasks_readopted=metrics.tasks_readopted(),
        )

    @_unary
    async def CreateSession(self, request: pb.CreateSessionRequest, context: Any) -> pb.Session:
        session = self.sessions.create(
            list(request.workspace_roots),
            cwd=request.cwd,
            env=dict(request.env),
            name=request.name,
            labels=dict(request.labels),
            permission_mode=request.permission_mode,
            allow_network=request.allow_network,
            allow_unsandboxed=request.allow_unsandboxed,
        )
        return session_to_pb(session)

    @_unary
    async def GetSession(self, request: pb.GetSessionRequest, context: Any) -> pb.Session:
        session = self.sessions.get(_require(request.session_id, "session_id"))
        out = session_to_pb(session, self.sessions.log(session.id))
        if not session.closed:
            for path, sha, widens, reason in await self.approvals.ignored(session):
                out.ignored_settings.add(
                    path=path, sha256=sha, widens=struct_or_none(widens or None), reason=reason
                )
        return out

    @_unary
    async def ListSessions(
        self, request: pb.ListSessionsRequest, context: Any
    ) -> pb.ListSessionsResponse:
        sessions = self.sessions.list(include_closed=request.include_closed)
        # Closed sessions go without their event logs: loading one per closed session
        # would cost a query each and keep it in memory for good.
        return pb.ListSessionsResponse(
            sessions=[
                session_to_pb(s, None if s.closed else self.sessions.log(s.id)) for s in sessions
            ]
        )

    @_unary
    async def CloseSession(self, request: pb.CloseSessionRequest, context: Any) -> pb.Session:
        return session_to_pb(await self.sessions.close(_require(request.session_id, "session_id")))

    @_unary
    async def CollectSessions(
        self, request: pb.CollectSessionsRequest, context: Any
    ) -> pb.CollectSessionsResponse:
        reaper = self.reaper
        idle: float | None = reaper.config.session_idle_seconds or None
        reap_after: float | None = reaper.config.retention_seconds
        for name in ("idle_seconds", "reap_after_seconds"):
            if request.HasField(name) and not 0 <= getattr(request, name) <= 10**9:
                raise InvalidRequest(f"{name} must be between 0 and 1e9")
        if request.HasField("idle_seconds"):
            idle = request.idle_seconds
        if request.HasField("reap_after_seconds"):
            reap_after = request.reap_after_seconds
        done = await reaper.collect(idle, reap_after, dry_run=request.dry_run)
        return pb.CollectSessionsResponse(
            sessions=[
                pb.CollectedSession(
                    id=c.id,
                    name=c.name,
                    action=c.action,
                    idle_seconds=c.idle_seconds,
                    reason=c.reason,
                )
                for c in done
            ]
        )

    @_unary
    async def UpdatePermissions(
        self, request: pb.UpdatePermissionsRequest, context: Any
    ) -> pb.Session:
        session = self.sessions.get(_require(request.session_id, "session_id"), open_only=True)
        if request.permission_mode and request.permission_mode not in PERMISSION_MODES:
            raise InvalidRequest(
                f"unknown permission mode {request.permission_mode!r}; "
                f"use one of {', '.join(PERMISSION_MODES)}"
            )
        rules = [*request.add_allow, *request.add_deny, *request.add_ask]
        for rule in rules:
            parse_rule(rule)  # raises InvalidRequest with what is wrong
        if request.permission_mode:
            session.permission_mode = request.permission_mode
        session.allow_rules.extend(r for r in request.add_allow if r not in session.allow_rules)
        session.deny_rules.extend(r for r in request.add_deny if r not in session.deny_rules)
        session.ask_rules.extend(r for r in request.add_ask if r not in session.ask_rules)
        self.sessions.save(session)
        return session_to_pb(session)

    @_unary
    async def ListTools(self, request: pb.ListToolsRequest, context: Any) -> pb.ListToolsResponse:
        return pb.ListToolsResponse(
            tools=[
                pb.ToolSpec(
                    name=t.name,
                    description=t.description,
                    input_schema=structs.to_struct(t.input_schema),
                )
                for t in self.executor.registry.tools
            ]
        )

    def _tool_use(self, call: pb.ToolUse, where: str = "call") -> ToolUse:
        name = _require(call.name, f"{where}.name")
        try:
            args = structs.from_struct(call.input, f"{where}.input")
        except ValueError as exc:
            raise InvalidRequest(f"{exc}; a tool's input must be a JSON object") from None
        return ToolUse(call.tool_use_id or new_tool_use_id(), name, args)

    async def _stream_calls(self, run: Callable[..., Any]) -> AsyncIterator[pb.ToolCallUpdate]:
        queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()

        async def sink(kind: str, payload: dict[str, Any]) -> None:
            if kind == "progress" and queue.qsize() > MAX_QUEUED_PROGRESS:
                return  # a slow caller loses progress, never a result
            queue.put_nowait((kind, payload))

        task = asyncio.ensure_future(run(sink))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        while (item := await queue.get()) is not None:
            yield update_to_pb(*item)
        task.result()

    @_stream
    async def RunTool(
        self, request: pb.RunToolRequest, context: Any
    ) -> AsyncIterator[pb.ToolCallUpdate]:
        session = self.sessions.get(_require(request.session_id, "session_id"), open_only=True)
        call = self._tool_use(request.call)

        async def run(sink: Any) -> None:
            result = await self.executor.run_one(session, call, sink)
            await sink("result", result_payload(call.tool_use_id, result))

        async for update in self._stream_calls(run):
            yield update

    @_unary
    async def CallTool(self, request: pb.RunToolRequest, context: Any) -> pb.ToolResult:
        session = self.sessions.get(_require(request.session_id, "session_id"), open_only=True)
        call = self._tool_use(request.call)
        result = await self.executor.run_one(session, call, _ignore_updates)
        return result_to_pb(result_payload(call.tool_use_id, result))

    @_stream
    async def RunTools(
        self, request: pb.RunToolsRequest, context: Any
    ) -> AsyncIterator[pb.ToolCallUpdate]:
        session = self.sessions.get(_require(request.session_id, "session_id"), open_only=True)
        if not request.calls:
            raise InvalidRequest("calls is empty: send at least one tool_use")
        if len(request.calls) > MAX_BATCH:
            raise InvalidRequest(f"at most {MAX_BATCH} calls in one batch")
        calls = [self._tool_use(c, f"calls[{i}]") for i, c in enumerate(request.calls)]
        ids = [c.tool_use_id for c in calls]
        if len(set(ids)) != len(ids):
            raise InvalidRequest("tool_use_id values in a batch must be distinct")
        async for update in self._stream_calls(
            lambda sink: self.executor.run_batch(session, calls, sink)
        ):
            yield update

    @_unary
    async def CancelCall(
        self, request: pb.CancelCallRequest, context: Any
    ) -> pb.CancelCallResponse:
        self.sessions.get(_require(request.session_id, "session_id"))
        cancelled = self.executor.cancel(
            request.session_id, _require(request.tool_use_id, "tool_use_id")
        )
        return pb.CancelCallResponse(cancelled=cancelled)

    @_stream
    async def Attach(self, request: pb.AttachRequest, context: Any) -> AsyncIterator[pb.Event]:
        log_ = self.sessions.log(_require(request.session_id, "session_id"))
        if request.after_seq > MAX_SEQ:
            raise InvalidRequest(f"after_seq {request.after_seq} is out of range (0 to {MAX_SEQ})")
        log.info(
            "session %s: %s attached (after seq %d)",
            request.session_id,
            client_identity(context),
            request.after_seq,
        )

        async def registered() -> None:
            # The attach counts from here (asks reach it): say so before any event, so a
            # client can wait for it (an approver must be in place before the first ask).
            await context.send_initial_metadata(((ATTACHED_KEY, str(log_.last_seq)),))

        # Closed here, not whenever it is collected, when the caller goes away.
        if request.no_follow:
            subscription = log_.replay(request.after_seq)
        else:
            subscription = log_.subscribe(request.after_seq, registered)
        async with contextlib.aclosing(subscription) as events:
            async for event in events:
                yield event_to_pb(event)

    @_unary
    async def ResolvePermission(
        self, request: pb.ResolvePermissionRequest, context: Any
    ) -> pb.ResolvePermissionResponse:
        self.sessions.get(_require(request.session_id, "session_id"))
        _require(request.request_id, "request_id")
        if request.decision not in ("allow", "deny"):
            raise InvalidRequest("decision must be 'allow' or 'deny'")
        scope = request.scope or "once"
        if scope not in ("once", "always"):
            raise InvalidRequest("scope must be 'once' or 'always'")
        accepted, message = self.asker.resolve(
            request.session_id,
            request.request_id,
            request.decision,
            scope,
            decided_by=client_identity(context),
            rule=request.rule,
        )
        return pb.ResolvePermissionResponse(accepted=accepted, message=message)

    @_unary
    async def AppendAgentEvent(
        self, request: pb.AppendAgentEventRequest, context: Any
    ) -> pb.AppendAgentEventResponse:
        session = self.sessions.get(_require(request.session_id, "session_id"), open_only=True)
        kind = agent_events.check(request.event)
        event = self.sessions.log(session.id).emit(kind, **agent_events.to_payload(request.event))
        return pb.AppendAgentEventResponse(seq=event.seq)

    @_unary
    async def ListTasks(self, request: pb.ListTasksRequest, context: Any) -> pb.ListTasksResponse:
        self.sessions.get(_require(request.session_id, "session_id"))
        found = self.services.tasks.list(request.session_id, request.include_finished)
        return pb.ListTasksResponse(tasks=[task_to_pb(t) for t in found])

    @_stream
    async def ReadOutput(
        self, request: pb.ReadOutputRequest, context: Any
    ) -> AsyncIterator[pb.OutputChunk | bytes]:
        # bytes: a chunk encoded once for all its followers (the serializer passes it on).
        self.sessions.get(_require(request.session_id, "session_id"))
        async for chunk in self.services.outputs.read(
            request.session_id, _require(request.id, "id"), request.offset, request.follow
        ):
            yield self._encoded_chunks.get(request.session_id, chunk)

    @_unary
    async def Classify(self, request: pb.ClassifyRequest, context: Any) -> pb.ClassifyResponse:
        result = classify(request.command).to_dict()
        return pb.ClassifyResponse(classification=structs.to_struct(result))

    @_unary
    async def ListTrust(self, request: pb.ListTrustRequest, context: Any) -> pb.ListTrustResponse:
        roots = [r for s in self.sessions.list() for r in s.workspace_roots]
        entries = await self.approvals.trust_entries(request.path, roots)
        return pb.ListTrustResponse(entries=[trust_to_pb(e) for e in entries])

    @_unary
    async def ApproveTrust(self, request: pb.ApproveTrustRequest, context: Any) -> pb.TrustEntry:
        entry = await self.approvals.approve(
            _require(request.path, "path"),
            _require(request.sha256, "sha256"),
            client_identity(context),
        )
        return trust_to_pb(entry)

    @_unary
    async def RevokeTrust(
        self, request: pb.RevokeTrustRequest, context: Any
    ) -> pb.RevokeTrustResponse:
        gone = self.approvals.revoke(_require(request.path, "path"), request.sha256)
        return pb.RevokeTrustResponse(revoked=[trust_to_pb(e) for e in gone])
