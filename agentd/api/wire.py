"""Daemon data as the API's messages: sessions, results, tasks, events, trust entries.

The one encoder of a session's events to the wire: each kind of event
(sessions/event_types.py) to its member of the proto's Event oneof. Old journal rows
are read into the same types by sessions/journal.py first.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from typing import Any, assert_never

from agentd.calls.executor import Update
from agentd.sessions import agent_events
from agentd.sessions import event_types as ev
from agentd.sessions.event_types import ResultPayload, TaskPayload
from agentd.sessions.events import Event, EventLog
from agentd.sessions.session import Session, network_mode
from agentd_client.core import structs
from agentd_client.v1 import agentd_pb2 as pb

log = logging.getLogger(__name__)


def session_to_pb(s: Session, log_: EventLog | None = None) -> pb.Session:
    """The session; with its event log, also where its events are and when it last acted."""
    return pb.Session(
        id=s.id,
        name=s.name,
        labels=s.labels,
        workspace_roots=s.workspace_roots,
        cwd=s.cwd,
        env=s.env,
        owner_uid=s.owner_uid,
        created_ms=s.created_ms,
        closed=s.closed,
        permission_mode=s.permission_mode,
        allow_rules=s.allow_rules,
        deny_rules=s.deny_rules,
        ask_rules=s.ask_rules,
        allow_network=s.allow_network,
        allow_unsandboxed=s.allow_unsandboxed,
        ask_timeout_seconds=s.ask_timeout_seconds,
        review=s.review,
        network=network_mode(s),
        last_seq=log_.last_seq if log_ else 0,
        last_activity_ms=max(log_.last_time_ms, s.created_ms) if log_ else s.created_ms,
    )


def struct_or_none(value: Mapping[str, Any] | None) -> structs.Struct | None:
    return None if value is None else structs.to_struct(value)


def trust_to_pb(e: Any) -> pb.TrustEntry:
    return pb.TrustEntry(
        path=e.path,
        sha256=e.sha256,
        state=e.state,
        source=e.source,
        approved_by=e.approved_by,
        approved_ms=e.approved_ms,
        widens=struct_or_none(e.widens),
        current=e.current,
        error=e.error,
    )


def result_to_pb(payload: ResultPayload) -> pb.ToolResult:
    out = pb.ToolResult(tool_use_id=payload["tool_use_id"], is_error=payload["is_error"])
    for block in payload["content"]:
        if block["type"] == "text":
            out.content.add(type="text", text=block["text"])
        else:
            # base64 since the wire form is built once (the journal reads older hex).
            data = base64.b64decode(block["base64"])
            source = pb.ImageSource(type="base64", media_type=block["media_type"], data=data)
            out.content.add(type=block["type"], source=source)  # image or document
    data = payload.get("data")
    if data is not None:
        out.data.CopyFrom(structs.to_value(data))
    return out


def _field(number: int, body: bytes) -> bytes:
    """A length-delimited field (a message) as protobuf writes it: tag, length, body."""
    return b"".join((_varint((number << 3) | 2), _varint(len(body)), body))


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_DATA = pb.ToolResult.DESCRIPTOR.fields_by_name["data"].number
_RESULT = pb.ToolCallUpdate.DESCRIPTOR.fields_by_name["result"].number


def result_bytes(payload: ResultPayload) -> bytes:
    """result_to_pb's message, serialized. Data whose wire form was made beforehand (an
    EncodedDict, in a worker process: a large Write's) is appended as its field's bytes:
    a copy, where a parse, a deep copy and an encoding took ~8 ms of the event loop for a
    5,000-line Write. Protobuf reads fields in any order; data's number is the highest,
    so the bytes are even those SerializeToString writes."""
    data = payload.get("data")
    if type(data) is not structs.EncodedDict or data.levels > structs.MAX_DEPTH:
        return result_to_pb(payload).SerializeToString()
    head = result_to_pb({**payload, "data": None}).SerializeToString()
    return b"".join((head, _varint((_DATA << 3) | 2), _varint(len(data.wire)), data.wire))


def task_to_pb(task: TaskPayload) -> pb.Task:
    exit_code = task.get("exit_code")
    return pb.Task(
        id=task["id"],
        session_id=task["session_id"],
        command=task.get("command", ""),
        description=task.get("description", ""),
        status=task.get("status", ""),
        exit_code=exit_code or 0,
        has_exit_code=exit_code is not None,
        output_path=task.get("output_path", ""),
        started_ms=task.get("started_ms", 0),
        ended_ms=task.get("ended_ms", 0),
        tool_use_id=task.get("tool_use_id", ""),
    )


def progress_to_pb(p: ev.Progress) -> pb.Progress:
    return pb.Progress(
        tool_use_id=p.tool_use_id,
        elapsed_ms=p.elapsed_ms,
        output=p.output,
        message=p.message,
        output_id=p.output_id,
        output_size=p.output_size,
        last_line=p.last_line,
        permission_request_id=p.permission_request_id,
        attached_clients=p.attached_clients,
    )


def event_to_pb(event: Event) -> pb.Event:
    """The event on the wire: the proto's oneof member for its kind."""
    out = pb.Event(seq=event.seq, session_id=event.session_id, time_ms=event.time_ms)
    match event.body:
        case ev.CallStarted() as b:
            out.call_started.CopyFrom(
                pb.CallStarted(
                    tool_use_id=b.tool_use_id, name=b.name, input=structs.to_struct(b.input)
                )
            )
        case ev.Progress() as b:
            out.progress.CopyFrom(progress_to_pb(b))
        case ev.CallFinished() as b:
            out.call_finished.CopyFrom(
                pb.CallFinished(
                    name=b.name, duration_ms=b.duration_ms, result=result_to_pb(b.result)
                )
            )
        case ev.TodosChanged() as b:
            todos = [
                pb.Todo(
                    content=t.get("content", ""),
                    status=t.get("status", ""),
                    active_form=t.get("activeForm", ""),
                )
                for t in b.todos
            ]
            out.todos_changed.CopyFrom(pb.TodosChanged(todos=todos))
        case ev.FilesChanged() as b:
            out.files_changed.CopyFrom(
                pb.FilesChanged(
                    tool_use_id=b.tool_use_id,
                    tool_name=b.tool_name,
                    checkpoint=b.checkpoint,
                    added=b.added,
                    changed=b.changed,
                    deleted=b.deleted,
                    paths=b.paths,
                    not_restorable=b.not_restorable,
                    action=b.action,
                    by=b.by,
                )
            )
        case ev.TaskStarted() as b:
            out.task_started.CopyFrom(pb.TaskStarted(task=task_to_pb(b.task)))
        case ev.TaskFinished() as b:
            out.task_finished.CopyFrom(pb.TaskFinished(task=task_to_pb(b.task)))
        case ev.PermissionRequested() as b:
            out.permission_requested.CopyFrom(
                pb.PermissionRequested(
                    request_id=b.request_id,
                    tool_use_id=b.tool_use_id,
                    tool_name=b.tool_name,
                    input=structs.to_struct(b.input),
                    reasons=b.reasons,
                    suggested_rule=b.suggested_rule,
                    expires_ms=b.expires_ms,
                    rule_choices=b.rule_choices,
                )
            )
        case ev.PermissionResolved() as b:
            out.permission_resolved.CopyFrom(
                pb.PermissionResolved(
                    request_id=b.request_id,
                    decision=b.decision,
                    scope=b.scope,
                    decided_by=b.decided_by,
                    rule=b.rule,
                )
            )
        case ev.PermissionDecided() as b:
            out.permission_decided.CopyFrom(
                pb.PermissionDecided(
                    tool_use_id=b.tool_use_id,
                    tool_name=b.tool_name,
                    behavior=b.behavior,
                    decided_by=b.decided_by,
                    reason=b.reason,
                )
            )
        case ev.CwdChanged() as b:
            out.cwd_changed.CopyFrom(pb.CwdChanged(cwd=b.cwd, previous=b.previous))
        case ev.SettingsIgnored() as b:
            out.settings_ignored.CopyFrom(
                pb.SettingsIgnored(
                    path=b.path,
                    sha256=b.sha256,
                    widens=struct_or_none(b.widens),
                    reason=b.reason,
                )
            )
        case ev.SessionClosed():
            out.session_closed.SetInParent()
        case ev.Gap() as b:
            out.gap.CopyFrom(pb.Gap(from_seq=b.from_seq, to_seq=b.to_seq))
        case ev.GitPush() as b:
            refs = [
                pb.GitPushRef(
                    ref=u["ref"],
                    old=u["old"],
                    new=u["new"],
                    kind=u["kind"],
                    protected=u["protected"],
                )
                for u in b.updates
            ]
            out.git_push.CopyFrom(
                pb.GitPush(
                    tool_use_id=b.tool_use_id,
                    route=b.route,
                    repository=b.repository,
                    updates=refs,
                    allowed=b.allowed,
                    decided_by=b.decided_by,
                )
            )
        case ev.Agent() as b:
            out.agent.CopyFrom(agent_events.from_payload(b.event))
        case ev.TaskControlled() as b:
            out.task_controlled.CopyFrom(
                pb.TaskControlled(
                    task_id=b.task_id,
                    action=b.action,
                    by=b.by,
                    bytes=b.bytes,
                    reason=b.reason,
                    signal=b.signal,
                    size=pb.TerminalSize(rows=b.size[0], cols=b.size[1]) if b.size else None,
                    stdin=b.stdin,
                )
            )
        case ev.PortForward() as b:
            out.port_forward.CopyFrom(
                pb.PortForward(
                    action=b.action,
                    forward_id=b.forward_id,
                    connection_id=b.connection_id,
                    port=b.port,
                    address=b.address,
                    local=b.local,
                    by=b.by,
                    bytes_in=b.bytes_in,
                    bytes_out=b.bytes_out,
                    how=b.how,
                )
            )
        case _:
            assert_never(event.body)
    return out


def update_to_pb(update: Update) -> pb.ToolCallUpdate | bytes:
    """A streamed update; a result as bytes (result_bytes), which the server sends as
    they are (api/decoding.py)."""
    if isinstance(update, ev.Progress):
        return pb.ToolCallUpdate(progress=progress_to_pb(update))
    return _field(_RESULT, result_bytes(update))
