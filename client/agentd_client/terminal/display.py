"""How agentctl shows things to a person: events as safe lines, JSON for machines."""

from __future__ import annotations

import json
import time
from typing import Any

from google.protobuf.message import Message

from agentd_client.core import structs
from agentd_client.terminal import sanitize
from agentd_client.terminal.jsonout import print_json as print_json
from agentd_client.terminal.jsonout import print_json_line as print_json_line
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
    from google.protobuf.json_format import MessageToDict  # what only --json prints needs

    return _whole(MessageToDict(message, preserving_proto_field_name=True))


def input_of(x: Any) -> dict[str, Any]:
    """The `input` Struct of a CallStarted or PermissionRequested, as a dict."""
    return structs.from_struct(x.input, "input")


def push_sentence(inp: dict[str, Any]) -> str:
    """A GitPush ask's input as a person reads it: "push to REPO: main: abc123 ->
    def456 (fast-forward)"; "" when it is not one."""
    updates = inp.get("updates")
    if not isinstance(inp.get("repository"), str) or not isinstance(updates, list):
        return ""
    parts = []
    for u in updates:
        if not isinstance(u, dict):
            return ""
        ref = str(u.get("ref", "")).removeprefix("refs/heads/")
        old, new = (str(u.get(k, ""))[:12] for k in ("old", "new"))
        kind = str(u.get("kind", "")) + (", protected" if u.get("protected") else "")
        parts.append(f"{ref}: {old} -> {new} ({kind})")
    return f"push to {inp['repository']}: " + "; ".join(parts)


def input_text(x: Any, limit: int = 200) -> str:
    """A call's input as one safe line (a push as a sentence, else JSON), cut at
    `limit` characters."""
    inp = input_of(x)
    text = push_sentence(inp) or json.dumps(inp, ensure_ascii=False)
    return sanitize.line(text[:limit])


def _first_line(text: str, limit: int = 160) -> str:
    stripped = text.strip()
    return sanitize.line(stripped.splitlines()[0][:limit]) if stripped else ""


def outcome(name: str, result: pb.ToolResult) -> str:
    """How a call ended, in a few words: a command's exit status (or that it was
    interrupted, or went to the background), an error's first line, else the size of
    what it answered. Not its first line of output: that says nothing of the end."""
    data = structs.from_value(result.data, "data") if result.HasField("data") else None
    data = data if isinstance(data, dict) else {}
    text = "".join(b.text for b in result.content if b.type == "text")
    if task := data.get("backgroundTaskId"):
        if data.get("timedOutAfterMs"):
            return sanitize.line(f"timed out, still running as task {task}")
        return sanitize.line(f"running in the background as task {task}")
    if isinstance(code := data.get("exitCode"), int):
        if data.get("interrupted"):
            return "interrupted" if code == 0 else f"interrupted, exit {code}"
        note = data.get("returnCodeInterpretation")
        return f"exit {code}" + (f" ({sanitize.line(note)})" if note else "")
    if result.is_error:
        return _first_line(text)
    lines = text.count("\n") + 1 if text.strip() else 0
    return _first_line(text) if lines == 1 else f"{lines} lines" if lines else "no output"


def event_head(e: pb.Event) -> str:
    """`[  seq hh:mm:ss]`, how every event line starts. Progress is live only and has no
    number of its own (it carries the one before it): its column is blank, so the
    numbers a person reads are the journal's, without holes."""
    stamp = time.strftime("%H:%M:%S", time.localtime(e.time_ms / 1000))
    if e.WhichOneof("kind") == "progress":
        return f"[{'':>5} {stamp}]"
    return f"[{e.seq:>5} {stamp}]"


def describe_event(e: pb.Event) -> str:
    """Readable lines for an event, as `agentctl attach` prints it. Every field a model, a
    command or a workspace wrote is one safe line (agentd_client.terminal.sanitize)."""
    kind = e.WhichOneof("kind")
    head = event_head(e)
    one = sanitize.line
    match kind:
        case "call_started":
            started = e.call_started
            return (
                f"{head} ▶ {one(started.name)} {input_text(started)} ({one(started.tool_use_id)})"
            )
        case "progress":
            progress = e.progress
            size = f" {progress.output_size} bytes" if progress.output_id else ""
            took = f"{progress.elapsed_ms / 1000:.1f}s"
            return f"{head}   … {one(progress.message or 'running')}{size} {took}"
        case "call_finished":
            finished = e.call_finished
            mark = "✗" if finished.result.is_error else "✓"
            said = outcome(finished.name, finished.result)
            return f"{head} {mark} {one(finished.name)} {finished.duration_ms}ms {said}"
        case "todos_changed":
            lines = [f"{head} todos:"]
            for todo in e.todos_changed.todos:
                box = {"completed": "[x]", "in_progress": "[~]"}.get(todo.status, "[ ]")
                lines.append(f"    {box} {one(todo.content)}")
            return "\n".join(lines)
        case "files_changed":
            return files_changed(head, e.files_changed)
        case "task_started":
            t = e.task_started.task
            return f"{head} task {one(t.id)} started: {one(t.command[:120])}"
        case "task_finished":
            t = e.task_finished.task
            code = f" with exit code {t.exit_code}" if t.has_exit_code else ""
            return f"{head} task {one(t.id)} {one(t.status)}{code}"
        case "permission_requested":
            asked = e.permission_requested
            reasons = one("; ".join(asked.reasons))
            return (
                f"{head} ? permission for {one(asked.tool_name)} {input_text(asked)}"
                f"{' — ' + reasons if reasons else ''} (request {one(asked.request_id)}, "
                f"code {request_code(asked.request_id)})"
            )
        case "permission_resolved":
            resolved = e.permission_resolved
            added = (
                f"; added the {one(resolved.decision)} rule {one(resolved.rule)}"
                if resolved.rule
                else ""
            )
            return (
                f"{head} permission {one(resolved.request_id)}: {one(resolved.decision)} "
                f"({one(resolved.scope)}) by {one(resolved.decided_by)}{added}"
            )
        case "permission_decided":
            decided = e.permission_decided
            return (
                f"{head} {one(decided.behavior)} {one(decided.tool_name)} "
                f"by {one(decided.decided_by)}"
                f"{': ' + one(decided.reason) if decided.reason else ''}"
            )
        case "cwd_changed":
            return f"{head} cwd {one(e.cwd_changed.previous)} -> {one(e.cwd_changed.cwd)}"
        case "settings_ignored":
            return f"{head} ! settings: {one(e.settings_ignored.reason)}"
        case "session_closed":
            return f"{head} session closed"
        case "gap":
            return f"{head} (fell behind: events {e.gap.from_seq}-{e.gap.to_seq} replayed)"
        case "agent":
            return describe_agent(head, e.agent)
        case "git_push":
            pushed = e.git_push
            refs = ", ".join(
                f"{one(u.ref)} {one(u.old[:9])}..{one(u.new[:9])} ({one(u.kind)})"
                for u in pushed.updates
            )
            verb = "pushed" if pushed.allowed else "push refused"
            return f"{head} {verb} to {one(pushed.repository)}: {refs} — {one(pushed.decided_by)}"
        case "task_controlled":
            return f"{head} {task_controlled(e.task_controlled)}"
        case "port_forward":
            return describe_forward(head, e.port_forward)
    return f"{head} {one(kind)}"


def files_changed(head: str, f: pb.FilesChanged) -> str:
    """A checkpoint: what a call (or a restore, and who asked) changed, its first paths."""
    one = sanitize.line
    what = {"restore": "restore", "rewind": "rewind", "task": "task"}.get(f.action, "call")
    who = f" by {one(f.by)}" if f.by else ""
    counts = f"+{f.added} ~{f.changed} -{f.deleted}"
    lost = f", {f.not_restorable} not restorable" if f.not_restorable else ""
    call = f"{one(f.tool_use_id)} ({one(f.tool_name)})"
    if f.action == "pending review":  # review mode: nothing reached the workspace yet
        lines = [f"{head} changes of call {call} wait for review: {counts} (agentctl review)"]
    elif f.action == "discarded":
        return f"{head} changes of call {call} discarded{who}: {counts}"
    else:
        applied = " (review applied)" if f.action == "applied" else ""
        lines = [
            f"{head} files changed by {what} {call}{who}{applied}: "
            f"{counts}{lost}, checkpoint {f.checkpoint}"
        ]
    shown = list(f.paths[:10])
    lines += [f"    {one(p)}" for p in shown]
    total = f.added + f.changed + f.deleted
    if total > len(shown):
        lines.append(f"    ... {total - len(shown)} more (agentctl diff)")
    return "\n".join(lines)


def task_controlled(t: pb.TaskControlled) -> str:
    """A person's (or program's) act on a task: what, and who."""
    one = sanitize.line
    size = f" {t.size.rows}x{t.size.cols}" if t.HasField("size") else ""
    what = {
        "opened": f"opened{' on a terminal' + size if size else ''}"
        + (" with stdin" if t.stdin else ""),
        "input": f"got {t.bytes} bytes of input ({one(t.reason)})",
        "input_closed": "had its stdin closed",
        "signalled": f"got SIG{one(t.signal)}",
        "resized": f"resized to{size}",
    }.get(t.action, one(t.action))
    return f"task {one(t.task_id)} {what} by {one(t.by)}"


def describe_forward(head: str, f: pb.PortForward) -> str:
    """A forward of a sandbox port (`agentctl forward`), or one of its connections."""
    one = sanitize.line
    match f.action:
        case "started":
            return f"{head} ⇄ port {f.port} forwarded to {one(f.local)} by {one(f.by)}"
        case "stopped":
            return f"{head} ⇄ forward {one(f.forward_id)} stopped by {one(f.by)}"
        case "connected":
            return f"{head} ⇄ connection to {one(f.address)} by {one(f.by)}"
    return (
        f"{head} ⇄ connection to port {f.port} ended: {one(f.how or f.action)} "
        f"({f.bytes_in} bytes in, {f.bytes_out} out)"
    )


def request_code(request_id: str) -> str:
    """Four characters from sha256(request id): the same on every terminal, for the same
    request, so a prompt that a command's output drew does not match."""
    import hashlib  # only an ask shows a code

    digest = int.from_bytes(hashlib.sha256(request_id.encode()).digest()[:4], "big")
    chars = []
    for _ in range(4):
        digest, i = divmod(digest, len(_CODE_ALPHABET))
        chars.append(_CODE_ALPHABET[i])
    return "".join(chars)


# No 0/O, 1/I/L: a code is compared by eye and read aloud.
_CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"


class AgentStream:
    """An agent's text as it streams, a line at a time under its turn's head; its whole
    message then shows only what the stream did not (its tool calls)."""

    def __init__(self) -> None:
        self.partial = ""  # the line not yet ended
        self.streamed: set[tuple[str, int]] = set()  # turns shown as they streamed

    def lines(self, e: pb.Event) -> list[str]:
        x = e.agent
        out: list[str] = []
        match x.WhichOneof("kind"):
            case "text_delta":
                turn = (x.conversation_id, x.text_delta.turn)
                if turn not in self.streamed:
                    self.streamed.add(turn)
                    out.append(f"{event_head(e)} ◆ turn {x.text_delta.turn}:")
                lines = (self.partial + sanitize.text(x.text_delta.text)).split("\n")
                self.partial = lines.pop()
                out += lines
            case "message" if (x.conversation_id, x.message.turn) in self.streamed:
                if self.partial:
                    out.append(self.partial)
                    self.partial = ""
                for b in x.message.content:
                    if b.type == "tool_use":
                        out.append(f"  wants {sanitize.line(b.name)} ({sanitize.line(b.id)})")
            case _:
                out.append(describe_event(e))
        return out


def agent_text(message: pb.AgentMessage) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def describe_agent(head: str, x: pb.AgentEvent) -> str:
    """An agent's conversation (agentctl agent): the prompt, the model's whole text (a
    terminal that watched it stream shows only the tool calls), and the stop."""
    match x.WhichOneof("kind"):
        case "prompt":
            return f"{head} » {sanitize.text(x.prompt.text)}"
        case "message":
            lines = [f"{head} ◆ {sanitize.line(x.message.model)} (turn {x.message.turn}):"]
            if text := agent_text(x.message).strip():
                lines.append(sanitize.text(text))
            uses = [b for b in x.message.content if b.type == "tool_use"]
            lines += [f"  wants {sanitize.line(b.name)} ({sanitize.line(b.id)})" for b in uses]
            return "\n".join(lines)
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
            return sanitize.line(
                f"{head} ■ agent stopped ({y.reason}{why}) after {y.turns} turns, {tokens} tokens"
            )
        case "text_delta":
            return sanitize.text(x.text_delta.text)
    return f"{head} agent"
