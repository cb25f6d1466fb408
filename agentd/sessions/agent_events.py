"""The events of an agent loop (agentctl agent) in a session's journal.

The loop runs in a client; the daemon only keeps its conversation with the session,
so every attached terminal watches it and any process can resume it. What a client
sends here is free text and tool inputs the model chose: it is checked for shape and
size, stored as data, and never acted on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf.json_format import Error as JsonFormatError
from google.protobuf.json_format import MessageToDict, ParseDict

from agentd.foundation.errors import InvalidRequest
from agentd_client.v1 import agentd_pb2 as pb

MAX_EVENT_BYTES = 2 * 1024 * 1024
MAX_BLOCKS = 256
MAX_ID_CHARS = 128
BLOCK_TYPES = ("text", "tool_use")


def _short(value: str, what: str) -> None:
    if len(value) > MAX_ID_CHARS or not value.isprintable():
        raise InvalidRequest(f"{what} must be at most {MAX_ID_CHARS} printable characters")


def _check_blocks(blocks: Any) -> None:
    if len(blocks) > MAX_BLOCKS:
        raise InvalidRequest(f"an agent message has at most {MAX_BLOCKS} content blocks")
    for i, block in enumerate(blocks):
        if block.type not in BLOCK_TYPES:
            raise InvalidRequest(
                f"content[{i}].type {block.type!r}: use one of {', '.join(BLOCK_TYPES)}"
            )
        if block.type == "tool_use":
            if not block.id or not block.name:
                raise InvalidRequest(f"content[{i}]: a tool_use block needs an id and a name")
            _short(block.id, f"content[{i}].id")
            _short(block.name, f"content[{i}].name")


def check(event: pb.AgentEvent) -> bool:
    """Whether a valid event is live only (a text delta: the whole message is journaled
    after it); InvalidRequest says what is wrong with another."""
    kind = event.WhichOneof("kind")
    if kind is None:
        raise InvalidRequest("event is empty: set prompt, text_delta, message or stopped")
    if not event.conversation_id:
        raise InvalidRequest("event.conversation_id is required")
    _short(event.conversation_id, "event.conversation_id")
    if event.ByteSize() > MAX_EVENT_BYTES:
        raise InvalidRequest(f"an agent event is at most {MAX_EVENT_BYTES} bytes")
    if kind == "message":
        _check_blocks(event.message.content)
    return kind == "text_delta"


def to_payload(event: pb.AgentEvent) -> dict[str, Any]:
    """The event as the journal keeps it (JSON). A tool input JSON cannot hold (NaN,
    Infinity) is refused here, not found later by every reader."""
    try:
        return MessageToDict(event, preserving_proto_field_name=True)
    except (ValueError, JsonFormatError) as exc:
        raise InvalidRequest(f"the event cannot be kept as JSON: {exc}") from None


def from_payload(payload: Mapping[str, Any]) -> pb.AgentEvent:
    return ParseDict(dict(payload), pb.AgentEvent(), ignore_unknown_fields=True)
