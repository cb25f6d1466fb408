"""Daemon data as the API's messages: sessions, results, tasks, events, trust entries.

The journal's payloads are plain JSON (see executor.result_payload and events.py);
these turn them into protobuf messages, reading journals written before the typed API
too (`<key>_json` text).
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

from agentd.sessions import agent_events
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
        network=network_mode(s),
        last_seq=log_.last_seq if log_ else 0,
        last_activity_ms=max(log_.last_time_ms, s.created_ms) if log_ else s.created_ms,
    )


def struct_or_none(value: dict[str, Any] | None) -> structs.Struct | None:
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


def _legacy_json(payload: dict[str, Any], key: str, default: Any = None) -> Any:
    """`payload[key]`, or what a journal written before the typed API holds for it
    (`<key>_json`, JSON text; empty for none)."""
    if key in payload:
        return payload[key]
    text = payload.get(f"{key}_json")
    return json.loads(text) if text else default


def result_to_pb(payload: dict[str, Any]) -> pb.ToolResult:
    out = pb.ToolResult(tool_use_id=payload["tool_use_id"], is_error=payload["is_error"])
    for block in payload["content"]:
        if block["type"] == "text":
            out.content.add(type="text", text=block["text"])
        else:
            # base64 since the wire form is built once; older journals hold hex.
            b64 = block.get("base64")
            data = base64.b64decode(b64) if b64 is not None else bytes.fromhex(block["data"])
            source = pb.ImageSource(type="base64", media_type=block["media_type"], data=data)
            out.content.add(type=block["type"], source=source)  # image or document
    data = _legacy_json(payload, "data")
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


def result_bytes(payload: dict[str, Any]) -> bytes:
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


def _with_struct(p: dict[str, Any], key: str, default: Any = None) -> dict[str, Any]:
    """The payload with `key` (or its legacy `<key>_json`) as a Struct (left out if none)."""
    value = _legacy_json(p, key, default)
    out = {k: v for k, v in p.items() if k not in (key, f"{key}_json")}
    if value is not None:
        out[key] = structs.to_struct(value)
    return out


def task_to_pb(task: dict[str, Any]) -> pb.Task:
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


def task_controlled_to_pb(p: dict[str, Any]) -> pb.TaskControlled:
    size = p.get("size")
    return pb.TaskControlled(
        task_id=p.get("task_id", ""),
        action=p.get("action", ""),
        by=p.get("by", ""),
        bytes=p.get("bytes", 0),
        reason=p.get("reason", ""),
        signal=p.get("signal", ""),
        size=pb.TerminalSize(rows=size[0], cols=size[1]) if size else None,
        stdin=bool(p.get("stdin")),
    )


def event_to_pb(event: Event) -> pb.Event:
    p = event.payload
    out = pb.Event(seq=event.seq, session_id=event.session_id, time_ms=event.time_ms)
    match event.kind:
        case "call_started":
            out.call_started.CopyFrom(pb.CallStarted(**_with_struct(p, "input", {})))
        case "progress":
            out.progress.CopyFrom(pb.Progress(**p))
        case "call_finished":
            out.call_finished.CopyFrom(
                pb.CallFinished(
                    name=p["name"], duration_ms=p["duration_ms"], result=result_to_pb(p["result"])
                )
            )
        case "todos_changed":
            todos = [
                pb.Todo(
                    content=t.get("content", ""),
                    status=t.get("status", ""),
                    active_form=t.get("activeForm", ""),
                )
                for t in p["todos"]
            ]
            out.todos_changed.CopyFrom(pb.TodosChanged(todos=todos))
        case "task_started":
            out.task_started.CopyFrom(pb.TaskStarted(task=task_to_pb(p["task"])))
        case "task_finished":
            out.task_finished.CopyFrom(pb.TaskFinished(task=task_to_pb(p["task"])))
        case "permission_requested":
            out.permission_requested.CopyFrom(
                pb.PermissionRequested(**_with_struct(p, "input", {}))
            )
        case "permission_resolved":
            out.permission_resolved.CopyFrom(pb.PermissionResolved(**p))
        case "permission_decided":
            out.permission_decided.CopyFrom(pb.PermissionDecided(**p))
        case "cwd_changed":
            out.cwd_changed.CopyFrom(pb.CwdChanged(**p))
        case "settings_ignored":
            out.settings_ignored.CopyFrom(pb.SettingsIgnored(**_with_struct(p, "widens")))
        case "session_closed":
            out.session_closed.SetInParent()
        case "gap":
            out.gap.CopyFrom(pb.Gap(**p))
        case "git_push":
            refs = [pb.GitPushRef(**u) for u in p["updates"]]
            out.git_push.CopyFrom(pb.GitPush(**{**p, "updates": refs}))
        case "agent" | "agent_live":
            out.agent.CopyFrom(agent_events.from_payload(p))
        case "task_controlled":
            out.task_controlled.CopyFrom(task_controlled_to_pb(p))
        case "port_forward":
            out.port_forward.CopyFrom(pb.PortForward(**p))
        case _:
            log.warning("event kind %s has no proto form", event.kind)
    return out


def update_to_pb(kind: str, payload: dict[str, Any]) -> pb.ToolCallUpdate | bytes:
    """A streamed update; a result as bytes (result_bytes), which the server sends as
    they are (api/decoding.py)."""
    if kind == "progress":
        return pb.ToolCallUpdate(progress=pb.Progress(**payload))
    return _field(_RESULT, result_bytes(payload))
