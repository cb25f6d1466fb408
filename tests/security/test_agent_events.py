"""AppendAgentEvent is a door for any client into the session's journal, which every
attached terminal shows and `agentctl agent --resume` reads back: each malformed or
oversized event is refused with INVALID_ARGUMENT (no traceback in the daemon's log),
streamed text is never journaled, and what a model wrote cannot drive a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd_client import Client
from agentd_client.core import errors
from agentd_client.integrations import conversation as conv
from agentd_client.terminal.display import describe_event
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.daemon import DaemonProcess

CID = "conv_test"


def _message(*blocks: pb.AgentContentBlock) -> pb.AgentEvent:
    return pb.AgentEvent(conversation_id=CID, message=pb.AgentMessage(turn=1, content=blocks))


def _nan_input() -> pb.AgentEvent:
    event = _message(pb.AgentContentBlock(type="tool_use", id="toolu_1", name="Read"))
    event.message.content[0].input.update({"offset": float("nan")})
    return event


BAD = {
    "empty": pb.AgentEvent(conversation_id=CID),
    "no conversation": pb.AgentEvent(prompt=pb.AgentPrompt(text="hi")),
    "control characters in the id": pb.AgentEvent(
        conversation_id="conv\x1b[2J", prompt=pb.AgentPrompt(text="hi")
    ),
    "unknown block type": _message(pb.AgentContentBlock(type="image", text="x")),
    "tool_use without an id": _message(pb.AgentContentBlock(type="tool_use", name="Bash")),
    "tool_use id too long": _message(
        pb.AgentContentBlock(type="tool_use", id="t" * 500, name="Bash")
    ),
    "too many blocks": _message(*[pb.AgentContentBlock(type="text", text="x")] * 300),
    "too big": pb.AgentEvent(conversation_id=CID, prompt=pb.AgentPrompt(text="x" * (3 << 20))),
    "NaN in a tool input": _nan_input(),
}


@pytest.mark.parametrize("what", list(BAD))
def test_malformed_agent_events_are_refused(
    daemon: DaemonProcess, client: Client, session_id: str, what: str
) -> None:
    before = client.get_session(session_id).last_seq
    with pytest.raises(errors.InvalidRequest):
        client.append_agent_event(session_id, BAD[what])
    assert client.get_session(session_id).last_seq == before
    assert "Traceback" not in daemon.log


def test_a_closed_session_takes_no_agent_events(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace)).id
    client.close_session(sid)
    with pytest.raises(errors.SessionClosed):
        client.append_agent_event(sid, conv.prompt_event(CID, "hi", "m"))


def test_streamed_text_is_live_only_and_the_rest_is_journaled(
    client: Client, session_id: str
) -> None:
    client.append_agent_event(session_id, conv.prompt_event(CID, "hi", "m"))
    client.append_agent_event(session_id, conv.delta_event(CID, 1, "streamed"))
    journal = conv.session_events(client, session_id)
    kinds = [e.agent.WhichOneof("kind") for e in journal if e.HasField("agent")]
    assert kinds[-1] == "prompt" and "text_delta" not in kinds


def test_a_models_escape_sequences_do_not_reach_a_terminal(client: Client, session_id: str) -> None:
    hostile = "ok\x1b]0;owned\x07\x1b[2J\rdone\x9b31m"
    block = pb.AgentContentBlock(type="text", text=hostile)
    event = _message(block)
    seq = client.append_agent_event(session_id, event)
    (stored,) = [e for e in conv.session_events(client, session_id) if e.seq == seq]
    assert stored.agent.message.content[0].text == hostile  # kept as sent ...
    shown = describe_event(stored)
    assert "ok" in shown and "done" in shown  # ... and shown without what drives a terminal
    assert not any(ch in shown for ch in "\x1b\x07\r\x9b")
