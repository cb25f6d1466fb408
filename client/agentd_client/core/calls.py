"""Every call of the client, written once: the request it sends and how its reply is read.

`Client` and `AsyncClient` are two thin faces over these specs; neither builds a
request or parses a reply itself, so the two cannot drift apart.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from agentd_client.core import structs
from agentd_client.core.errors import InvalidRequest
from agentd_client.v1 import agentd_pb2 as pb

Session = pb.Session
Event = pb.Event
Task = pb.Task
Progress = pb.Progress


def _same(reply: Any) -> Any:
    return reply


@dataclass(frozen=True, slots=True)
class Call:
    """One RPC: its name on the stub, the request, and how the answer is read.

    `safe` calls change nothing, so gRPC may repeat them (the retry policy on
    UNAVAILABLE, and wait_for_ready). `tool` calls run for as long as the tool does
    and take the client's tool deadline. `finish` reads a stream's updates whole.
    """

    rpc: str
    request: Message
    parse: Callable[[Any], Any] = _same
    safe: bool = False
    tool: bool = False
    finish: Callable[[list[Any]], Any] | None = None


# Attach's initial metadata carries this key (with the session's last seq then) once the
# daemon counts the attach: from then on it misses no event, and asks reach it.
ATTACHED_KEY = "agentd-attached"

# The calls gRPC may repeat: they only read.
SAFE_RPCS = (
    "GetStatus",
    "GetSession",
    "ListSessions",
    "ListTools",
    "Classify",
    "ListTasks",
    "ListTrust",
)


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str


@dataclass(frozen=True, slots=True)
class ImageBlock:
    media_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class DocumentBlock:
    """A document for the model (Read of a PDF sends the PDF itself: application/pdf)."""

    media_type: str
    data: bytes


Block = TextBlock | ImageBlock | DocumentBlock


@dataclass(frozen=True, slots=True)
class ToolResult:
    tool_use_id: str
    content: list[Block]
    is_error: bool
    data: Any

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @classmethod
    def from_pb(cls, r: pb.ToolResult) -> ToolResult:
        blocks: list[Block] = []
        for b in r.content:
            if b.type == "image":
                blocks.append(ImageBlock(b.source.media_type, b.source.data))
            elif b.type == "document":
                blocks.append(DocumentBlock(b.source.media_type, b.source.data))
            else:
                blocks.append(TextBlock(b.text))
        data = structs.from_value(r.data, "data") if r.HasField("data") else None
        return cls(r.tool_use_id, blocks, r.is_error, data)

    def content_blocks(self) -> list[dict[str, Any]]:
        """The content as Messages API blocks: text, and base64 images and documents."""
        out: list[dict[str, Any]] = []
        for b in self.content:
            if isinstance(b, TextBlock):
                out.append({"type": "text", "text": b.text})
            else:
                source = {
                    "type": "base64",
                    "media_type": b.media_type,
                    "data": base64.b64encode(b.data).decode(),
                }
                kind = "image" if isinstance(b, ImageBlock) else "document"
                out.append({"type": kind, "source": source})
        return out

    def to_dict(self) -> dict[str, Any]:
        """The tool_result as plain data: content blocks in the Anthropic format."""
        return {"content": self.content_blocks(), "is_error": self.is_error, "data": self.data}

    def to_tool_result_block(self) -> dict[str, Any]:
        """The `tool_result` block that answers the model's `tool_use` in the next user
        message. The API refuses empty text blocks, so they are left out."""
        content = [b for b in self.content_blocks() if b["type"] != "text" or b["text"]]
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": self.tool_use_id}
        if content:
            block["content"] = content
        if self.is_error:
            block["is_error"] = True
        return block


def new_tool_use_id() -> str:
    """24 random hex digits, as many as the uuid4 it was cut from."""
    return f"toolu_{os.urandom(12).hex()}"


def _input(name: str, input: Mapping[str, Any] | str) -> Mapping[str, Any]:
    """A call's input as a mapping; JSON text (as a command line gives it) is parsed."""
    if not isinstance(input, str):
        return input
    if not input.strip():
        return {}
    try:
        value = json.loads(input)
    except (ValueError, RecursionError) as exc:
        raise InvalidRequest(
            f"{name} input is not valid JSON ({exc}); send the input as a JSON object"
        ) from None
    if not isinstance(value, dict):
        raise InvalidRequest(f"{name} input must be a JSON object, not {type(value).__name__}")
    return value


def tool_use(name: str, input: Mapping[str, Any] | str, tool_use_id: str | None) -> pb.ToolUse:
    use = pb.ToolUse(tool_use_id=tool_use_id or new_tool_use_id(), name=name)
    try:
        structs.fill(use.input, _input(name, input))
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"{name} input cannot be sent as JSON: {exc}") from None
    return use


def _field(block: Any, key: str, default: Any = None) -> Any:
    if isinstance(block, Mapping):
        return block.get(key, default)
    return getattr(block, key, default)


def tool_uses(calls: Iterable[Any]) -> list[pb.ToolUse]:
    """The calls as ToolUse messages, each keeping the id it came with.

    A call is a `(name, input)` or `(name, input, id)` tuple, a `tool_use` dict, or a
    `tool_use` block of the anthropic SDK (anything with type, id, name and input).
    Blocks of other types are skipped, so an assistant message's whole `content`
    may be passed as it is.
    """
    uses = []
    for call in calls:
        if isinstance(call, tuple):
            name, input, *rest = call
            uses.append(tool_use(name, input, rest[0] if rest else None))
            continue
        kind = _field(call, "type", "tool_use")
        if kind != "tool_use":
            continue
        name = _field(call, "name")
        if not isinstance(name, str):
            raise TypeError(f"a tool call needs a name: {call!r}")
        ident = _field(call, "id") or _field(call, "tool_use_id")
        uses.append(tool_use(name, _field(call, "input") or {}, ident))
    return uses


def _results(updates: list[pb.ToolCallUpdate]) -> list[ToolResult]:
    return [ToolResult.from_pb(u.result) for u in updates if u.HasField("result")]


def _spec(t: pb.ToolSpec, hints: bool) -> dict[str, Any]:
    spec = {
        "name": t.name,
        "description": t.description,
        "input_schema": structs.ordered_schema(structs.from_struct(t.input_schema)),
    }
    if hints:  # not in the Anthropic format: asked for by name
        h = t.hints
        spec["hints"] = {
            "read_only": h.read_only,
            "destructive": h.destructive,
            "idempotent": h.idempotent,
            "open_world": h.open_world,
        }
    return spec


# ---- the calls, in the order of the service ----


def status() -> Call:
    from agentd_client.core.status import Status

    return Call("GetStatus", pb.GetStatusRequest(), Status.from_pb, safe=True)


def create_session(
    workspace: str | Sequence[str],
    cwd: str,
    env: Mapping[str, str] | None,
    name: str,
    labels: Mapping[str, str] | None,
    permission_mode: str,
    allow_network: bool,
    network: str = "",
    ask_timeout: float = 0,
    review: bool = False,
) -> Call:
    roots = [workspace] if isinstance(workspace, str) else list(workspace)
    request = pb.CreateSessionRequest(
        workspace_roots=[os.path.abspath(r) for r in roots],
        cwd=cwd,
        env=dict(env or {}),
        name=name,
        labels=dict(labels or {}),
        permission_mode=permission_mode,
        allow_network=allow_network,
        network=network,
        review=review,
    )
    if ask_timeout:
        request.ask_timeout_seconds = ask_timeout
    return Call("CreateSession", request)


def get_session(session_id: str) -> Call:
    return Call("GetSession", pb.GetSessionRequest(session_id=session_id), safe=True)


def list_sessions(include_closed: bool) -> Call:
    request = pb.ListSessionsRequest(include_closed=include_closed)
    return Call("ListSessions", request, lambda r: list(r.sessions), safe=True)


def close_session(session_id: str) -> Call:
    return Call("CloseSession", pb.CloseSessionRequest(session_id=session_id))


def collect_sessions(
    idle_seconds: float | None, reap_after_seconds: float | None, dry_run: bool
) -> Call:
    request = pb.CollectSessionsRequest(dry_run=dry_run)
    if idle_seconds is not None:
        request.idle_seconds = idle_seconds
    if reap_after_seconds is not None:
        request.reap_after_seconds = reap_after_seconds
    return Call("CollectSessions", request, lambda r: list(r.sessions))


def update_permissions(
    session_id: str,
    mode: str,
    allow: Sequence[str],
    deny: Sequence[str],
    ask: Sequence[str],
    ask_timeout: float | None = None,
) -> Call:
    request = pb.UpdatePermissionsRequest(
        session_id=session_id,
        permission_mode=mode,
        add_allow=list(allow),
        add_deny=list(deny),
        add_ask=list(ask),
    )
    if ask_timeout is not None:
        request.ask_timeout_seconds = ask_timeout
    return Call("UpdatePermissions", request)


def list_tools(hints: bool = False) -> Call:
    return Call(
        "ListTools",
        pb.ListToolsRequest(),
        lambda r: [_spec(t, hints) for t in r.tools],
        safe=True,
    )


def stream_tool(
    session_id: str,
    name: str,
    input: Mapping[str, Any] | str,
    tool_use_id: str | None,
    ask_timeout: float = 0,
) -> Call:
    request = _run_tool_request(session_id, name, input, tool_use_id, ask_timeout)
    return Call("RunTool", request, tool=True)


def _run_tool_request(
    session_id: str,
    name: str,
    input: Mapping[str, Any] | str,
    tool_use_id: str | None,
    ask_timeout: float,
) -> pb.RunToolRequest:
    request = pb.RunToolRequest(session_id=session_id, call=tool_use(name, input, tool_use_id))
    if ask_timeout:
        request.ask_timeout_seconds = ask_timeout
    return request


def run_tool(
    session_id: str,
    name: str,
    input: Mapping[str, Any] | str,
    tool_use_id: str | None,
    ask_timeout: float = 0,
) -> Call:
    request = _run_tool_request(session_id, name, input, tool_use_id, ask_timeout)
    return Call("CallTool", request, ToolResult.from_pb, tool=True)


def run_tools(session_id: str, calls: Iterable[Any]) -> Call:
    request = pb.RunToolsRequest(session_id=session_id, calls=tool_uses(calls))
    return Call("RunTools", request, tool=True, finish=_results)


def cancel(session_id: str, tool_use_id: str) -> Call:
    request = pb.CancelCallRequest(session_id=session_id, tool_use_id=tool_use_id)
    return Call("CancelCall", request, lambda r: r.cancelled)


def attach(session_id: str, after_seq: int, follow: bool = True) -> Call:
    request = pb.AttachRequest(session_id=session_id, after_seq=after_seq, no_follow=not follow)
    return Call("Attach", request)


def read_output(session_id: str, id: str, offset: int, follow: bool) -> Call:
    """A Bash call's (tool_use_id) or task's output from `offset` (negative: from the end)."""
    request = pb.ReadOutputRequest(session_id=session_id, id=id, offset=offset, follow=follow)
    return Call("ReadOutput", request)


def resolve_permission(
    session_id: str, request_id: str, decision: str, scope: str, rule: str = ""
) -> Call:
    request = pb.ResolvePermissionRequest(
        session_id=session_id, request_id=request_id, decision=decision, scope=scope, rule=rule
    )
    return Call("ResolvePermission", request)


def append_agent_event(session_id: str, event: pb.AgentEvent) -> Call:
    """One event of an agent loop's conversation, kept in the session (a text delta is
    shown live only); the reply is its seq."""
    request = pb.AppendAgentEventRequest(session_id=session_id, event=event)
    return Call("AppendAgentEvent", request, lambda r: r.seq)


def list_tasks(session_id: str, include_finished: bool) -> Call:
    request = pb.ListTasksRequest(session_id=session_id, include_finished=include_finished)
    return Call("ListTasks", request, lambda r: list(r.tasks), safe=True)


def classify(command: str) -> Call:
    request = pb.ClassifyRequest(command=command)
    return Call("Classify", request, lambda r: structs.from_struct(r.classification), safe=True)


# workspace trust


def list_trust(path: str) -> Call:
    """Trusted settings contents, and the settings files of open sessions (or `path`)."""
    return Call("ListTrust", pb.ListTrustRequest(path=path), lambda r: list(r.entries), safe=True)


def approve_trust(path: str, sha256: str) -> Call:
    """Trust exactly this content of a settings file; refused if the file holds other."""
    return Call("ApproveTrust", pb.ApproveTrustRequest(path=path, sha256=sha256))


def revoke_trust(path: str, sha256: str) -> Call:
    request = pb.RevokeTrustRequest(path=path, sha256=sha256)
    return Call("RevokeTrust", request, lambda r: list(r.revoked))


def list_credentials() -> Call:
    """Credential sources and routes, and which sessions used them (never a secret)."""
    return Call("ListCredentials", pb.ListCredentialsRequest(), lambda r: r, safe=True)


# checkpoints: what each writing call changed; diff, restore, rewind


def list_checkpoints(session_id: str) -> Call:
    request = pb.ListCheckpointsRequest(session_id=session_id)
    return Call("ListCheckpoints", request, lambda r: list(r.checkpoints), safe=True)


def diff_checkpoint(
    session_id: str, tool_use_id: str, since: bool, to: str, fmt: str, paths: list[str]
) -> Call:
    request = pb.DiffCheckpointRequest(
        session_id=session_id,
        tool_use_id=tool_use_id,
        since=since,
        to_tool_use_id=to,
        format=fmt,
        paths=paths,
    )
    return Call("DiffCheckpoint", request, safe=True)


def restore_checkpoint(
    session_id: str, tool_use_id: str, paths: list[str], dry_run: bool, on_conflict: str
) -> Call:
    request = pb.RestoreCheckpointRequest(
        session_id=session_id,
        tool_use_id=tool_use_id,
        paths=paths,
        dry_run=dry_run,
        on_conflict=on_conflict,
    )
    return Call("RestoreCheckpoint", request, safe=dry_run)


def list_pending_changes(session_id: str, fmt: str) -> Call:
    request = pb.ListPendingChangesRequest(session_id=session_id, format=fmt)
    return Call("ListPendingChanges", request, safe=True)


def resolve_pending_changes(
    session_id: str, pending_id: int, action: str, force: bool, by: str
) -> Call:
    request = pb.ResolvePendingChangesRequest(
        session_id=session_id, id=pending_id, action=action, force=force, by=by
    )
    return Call("ResolvePendingChanges", request)


def rewind_to_call(session_id: str, tool_use_id: str, dry_run: bool, on_conflict: str) -> Call:
    request = pb.RewindToCallRequest(
        session_id=session_id, tool_use_id=tool_use_id, dry_run=dry_run, on_conflict=on_conflict
    )
    return Call("RewindToCall", request, safe=dry_run)
