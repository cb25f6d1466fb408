"""How agentctl shows things to a person: events as lines, JSON for machines."""

from __future__ import annotations

import json
import time
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from agentd_client import structs
from agentd_client.v1 import agentd_pb2 as pb


def _whole(value: Any) -> Any:
    """Numbers of Structs come back from JSON mapping as floats; 3.0 is printed as 3."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value


def as_dict(message: Message) -> dict[str, Any]:
    return _whole(MessageToDict(message, preserving_proto_field_name=True))


def input_of(x: Any) -> dict[str, Any]:
    """The `input` Struct of a CallStarted or PermissionRequested, as a dict."""
    return structs.from_struct(x.input, "input")


def input_text(x: Any, limit: int = 200) -> str:
    """A call's input as one line of JSON, cut at `limit` characters."""
    return json.dumps(input_of(x), ensure_ascii=False)[:limit]


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def print_json_line(value: Any) -> None:
    print(json.dumps(value, sort_keys=True), flush=True)


def event_head(e: pb.Event) -> str:
    """`[  seq hh:mm:ss]`, how every event line starts."""
    stamp = time.strftime("%H:%M:%S", time.localtime(e.time_ms / 1000))
    return f"[{e.seq:>5} {stamp}]"


def describe_event(e: pb.Event) -> str:
    """One readable line per event, as `agentctl attach` prints it."""
    kind = e.WhichOneof("kind")
    head = event_head(e)
    match kind:
        case "call_started":
            x = e.call_started
            return f"{head} ▶ {x.name} {input_text(x)} ({x.tool_use_id})"
        case "progress":
            progress = e.progress
            size = f" {progress.output_size} bytes" if progress.output_id else ""
            running = progress.message or "running"
            return f"{head}   … {running}{size} {progress.elapsed_ms / 1000:.1f}s"
        case "call_finished":
            finished = e.call_finished
            mark = "✗" if finished.result.is_error else "✓"
            text = "".join(b.text for b in finished.result.content if b.type == "text")
            first = text.strip().splitlines()[0][:160] if text.strip() else ""
            return f"{head} {mark} {finished.name} {finished.duration_ms}ms {first}"
        case "todos_changed":
            lines = [f"{head} todos:"]
            for todo in e.todos_changed.todos:
                box = {"completed": "[x]", "in_progress": "[~]"}.get(todo.status, "[ ]")
                lines.append(f"    {box} {todo.content}")
            return "\n".join(lines)
        case "task_started":
            t = e.task_started.task
            return f"{head} task {t.id} started: {t.command[:120]}"
        case "task_finished":
            t = e.task_finished.task
            code = f" with exit code {t.exit_code}" if t.has_exit_code else ""
            return f"{head} task {t.id} {t.status}{code}"
        case "permission_requested":
            asked = e.permission_requested
            reasons = "; ".join(asked.reasons)
            return (
                f"{head} ? permission for {asked.tool_name} {input_text(asked)}"
                f"{' — ' + reasons if reasons else ''} (request {asked.request_id})"
            )
        case "permission_resolved":
            resolved = e.permission_resolved
            return (
                f"{head} permission {resolved.request_id}: {resolved.decision} "
                f"({resolved.scope}) by {resolved.decided_by}"
            )
        case "permission_decided":
            decided = e.permission_decided
            return (
                f"{head} {decided.behavior} {decided.tool_name} by {decided.decided_by}"
                f"{': ' + decided.reason if decided.reason else ''}"
            )
        case "cwd_changed":
            return f"{head} cwd {e.cwd_changed.previous} -> {e.cwd_changed.cwd}"
        case "settings_ignored":
            return f"{head} ! settings: {e.settings_ignored.reason}"
        case "session_closed":
            return f"{head} session closed"
        case "gap":
            return f"{head} (fell behind: events {e.gap.from_seq}-{e.gap.to_seq} replayed)"
        case "agent":
            return describe_agent(head, e.agent)
    return f"{head} {kind}"


def clean(text: str) -> str:
    """Text a model or a workspace wrote, for a terminal: control characters (escape
    sequences) removed, newlines and tabs kept."""
    return "".join(ch for ch in text if ch in "\n\t" or ch.isprintable())


def agent_text(message: pb.AgentMessage) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def describe_agent(head: str, x: pb.AgentEvent) -> str:
    """An agent's conversation (agentctl agent): the prompt, the model's whole text (a
    terminal that watched it stream shows only the tool calls), and the stop."""
    match x.WhichOneof("kind"):
        case "prompt":
            return clean(f"{head} » {x.prompt.text}")
        case "message":
            lines = [f"{head} ◆ {x.message.model} (turn {x.message.turn}):"]
            if text := agent_text(x.message).strip():
                lines.append(clean(text))
            uses = [b for b in x.message.content if b.type == "tool_use"]
            lines += [f"  wants {b.name} ({b.id})" for b in uses]
            return clean("\n".join(lines))
        case "stopped":
            y = x.stopped
            tokens = sum(
                (
                    y.usage.input_tokens,
                    y.usage.output_tokens,
                    y.usage.cache_creation_input_tokens,
                    y.usage.cache_read_input_tokens,
                )
            )
            why = f": {y.message}" if y.message else ""
            return clean(
                f"{head} ■ agent stopped ({y.reason}{why}) after {y.turns} turns, {tokens} tokens"
            )
        case "text_delta":
            return clean(x.text_delta.text)
    return f"{head} agent"
