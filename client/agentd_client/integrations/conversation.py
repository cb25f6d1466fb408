"""An agent's conversation kept in its session: the events it is written as, and the
Messages API messages rebuilt from them.

The loop (agent.py) writes what the person asked (`prompt`), the model's streamed text
(`text_delta`, live only), each whole assistant message with its tool_use blocks
(`message`) and why it stopped (`stopped`); the daemon's own `call_finished` events
hold the tool results. From those, any process rebuilds the messages exactly as the
loop sent them, and continues.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from agentd_client.core.calls import ToolResult
from agentd_client.core.structs import from_struct, to_struct
from agentd_client.v1 import agentd_pb2 as pb

INTERRUPTED = "The call did not finish: the agent was stopped before its result came."


def new_conversation_id() -> str:
    return f"conv_{uuid.uuid4().hex[:20]}"


def _field(block: Any, key: str, default: Any = None) -> Any:
    if isinstance(block, dict):
        return block.get(key, default)
    return getattr(block, key, default)


def content_dicts(content: Iterable[Any]) -> list[dict[str, Any]]:
    """An assistant message's text and tool_use blocks as the next request sends them
    back (other kinds, and empty text the API refuses, left out)."""
    out: list[dict[str, Any]] = []
    for block in content:
        kind = _field(block, "type")
        if kind == "text" and _field(block, "text"):
            out.append({"type": "text", "text": _field(block, "text")})
        elif kind == "tool_use":
            name, ident = _field(block, "name"), _field(block, "id")
            out.append({"type": "tool_use", "id": ident, "name": name, "input": _input(block)})
    return out


def _input(block: Any) -> dict[str, Any]:
    """The input as a Struct carries it (keys sorted): the messages sent go on being the
    same text when a resume rebuilds them from the journal, as prompt caching needs."""
    value = _field(block, "input")
    return from_struct(to_struct(value)) if isinstance(value, dict) else {}


def usage_pb(usage: Any) -> pb.AgentUsage:
    return pb.AgentUsage(
        input_tokens=_field(usage, "input_tokens") or 0,
        output_tokens=_field(usage, "output_tokens") or 0,
        cache_creation_input_tokens=_field(usage, "cache_creation_input_tokens") or 0,
        cache_read_input_tokens=_field(usage, "cache_read_input_tokens") or 0,
    )


def total_tokens(usage: pb.AgentUsage) -> int:
    return (
        usage.input_tokens
        + usage.output_tokens
        + usage.cache_creation_input_tokens
        + usage.cache_read_input_tokens
    )


def add_usage(into: pb.AgentUsage, more: pb.AgentUsage) -> None:
    into.input_tokens += more.input_tokens
    into.output_tokens += more.output_tokens
    into.cache_creation_input_tokens += more.cache_creation_input_tokens
    into.cache_read_input_tokens += more.cache_read_input_tokens


def prompt_event(conversation_id: str, text: str, model: str) -> pb.AgentEvent:
    return pb.AgentEvent(
        conversation_id=conversation_id, prompt=pb.AgentPrompt(text=text, model=model)
    )


def delta_event(conversation_id: str, turn: int, text: str) -> pb.AgentEvent:
    delta = pb.AgentTextDelta(turn=turn, text=text)
    return pb.AgentEvent(conversation_id=conversation_id, text_delta=delta)


def message_event(
    conversation_id: str,
    turn: int,
    content: list[dict[str, Any]],
    stop_reason: str,
    model: str,
    usage: pb.AgentUsage,
) -> pb.AgentEvent:
    blocks = []
    for b in content:
        if b["type"] == "text":
            blocks.append(pb.AgentContentBlock(type="text", text=b["text"]))
        else:
            blocks.append(
                pb.AgentContentBlock(
                    type="tool_use", id=b["id"], name=b["name"], input=to_struct(b["input"])
                )
            )
    message = pb.AgentMessage(
        turn=turn, content=blocks, stop_reason=stop_reason, model=model, usage=usage
    )
    return pb.AgentEvent(conversation_id=conversation_id, message=message)


def stopped_event(
    conversation_id: str, reason: str, turns: int, usage: pb.AgentUsage, message: str = ""
) -> pb.AgentEvent:
    stopped = pb.AgentStopped(reason=reason, turns=turns, usage=usage, message=message)
    return pb.AgentEvent(conversation_id=conversation_id, stopped=stopped)


def _blocks_of(message: pb.AgentMessage) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in message.content:
        if b.type == "text":
            out.append({"type": "text", "text": b.text})
        elif b.type == "tool_use":
            data = from_struct(b.input) if b.HasField("input") else {}
            out.append({"type": "tool_use", "id": b.id, "name": b.name, "input": data})
    return out


def _unfinished(tool_use_id: str) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": [{"type": "text", "text": INTERRUPTED}],
        "is_error": True,
    }


def add_user_text(messages: list[dict[str, Any]], text: str) -> None:
    """The person's words as the next user message; after tool results, in the same one
    (the API wants user and assistant turns to alternate)."""
    block = {"type": "text", "text": text}
    if messages and messages[-1]["role"] == "user":
        messages[-1]["content"].append(block)
    else:
        messages.append({"role": "user", "content": [block]})


class Rebuilt:
    """The latest conversation of a session: its id, messages, and turns so far."""

    def __init__(
        self, conversation_id: str, messages: list[dict[str, Any]], turns: int, ended: bool
    ) -> None:
        self.conversation_id = conversation_id
        self.messages = messages
        self.turns = turns
        # Its last run recorded its stop (False: it runs still, or was killed).
        self.ended = ended


def rebuild(events: Iterable[pb.Event]) -> Rebuilt | None:
    """The messages of the session's latest conversation, from its events in seq order:
    the prompts as user text, each assistant message's text and tool_use blocks with
    their ids, then a tool_result for each from the call's `call_finished` (an
    is_error one for a call that never finished). None when there is none."""
    events = list(events)
    ids = [e.agent.conversation_id for e in events if e.HasField("agent")]
    if not ids:
        return None
    conversation = ids[-1]
    messages: list[dict[str, Any]] = []
    waiting: list[str] = []  # tool_use ids of the latest assistant message
    results: dict[str, dict[str, Any]] = {}
    turns = 0
    ended = False

    def answer_tool_uses() -> None:
        if not waiting:
            return
        blocks = [results.get(i) or _unfinished(i) for i in waiting]
        messages.append({"role": "user", "content": blocks})
        waiting.clear()
        results.clear()

    for e in events:
        if e.HasField("call_finished"):
            result = e.call_finished.result
            if result.tool_use_id in waiting and result.tool_use_id not in results:
                results[result.tool_use_id] = ToolResult.from_pb(result).to_tool_result_block()
            continue
        if not e.HasField("agent") or e.agent.conversation_id != conversation:
            continue
        kind = e.agent.WhichOneof("kind")
        ended = kind == "stopped"
        if kind == "prompt":
            answer_tool_uses()
            add_user_text(messages, e.agent.prompt.text)
        elif kind == "message":
            answer_tool_uses()
            blocks = _blocks_of(e.agent.message)
            turns += 1
            if blocks:
                messages.append({"role": "assistant", "content": blocks})
                waiting.extend(b["id"] for b in blocks if b["type"] == "tool_use")
    answer_tool_uses()
    return Rebuilt(conversation, messages, turns, ended)


def session_events(client: Any, session_id: str) -> list[pb.Event]:
    """Every journaled event of the session, up to its latest when asked."""
    return [e for e in client.attach(session_id, 0, follow=False) if e.seq]
