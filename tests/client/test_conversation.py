"""The messages rebuilt from a session's events (agentd_client.integrations.conversation): what a
resume sends is what the loop sent, whatever the journal holds around it."""

from __future__ import annotations

from agentd_client.integrations import conversation as conv
from agentd_client.v1 import agentd_pb2 as pb

USAGE = pb.AgentUsage(input_tokens=1, output_tokens=1)


def _events(*items: pb.AgentEvent | pb.CallFinished) -> list[pb.Event]:
    out = []
    for seq, item in enumerate(items, 1):
        if isinstance(item, pb.AgentEvent):
            out.append(pb.Event(seq=seq, agent=item))
        else:
            out.append(pb.Event(seq=seq, call_finished=item))
    return out


def _finished(tool_use_id: str, text: str, is_error: bool = False) -> pb.CallFinished:
    block = pb.ContentBlock(type="text", text=text)
    result = pb.ToolResult(tool_use_id=tool_use_id, content=[block], is_error=is_error)
    return pb.CallFinished(name="Read", result=result)


def _reads(cid: str, turn: int, *ids: str) -> pb.AgentEvent:
    content = [{"type": "text", "text": "Reading."}] + [
        {"type": "tool_use", "id": i, "name": "Read", "input": {"file_path": "a", "limit": 10}}
        for i in ids
    ]
    return conv.message_event(cid, turn, content, "tool_use", "m", USAGE)


def test_results_follow_the_tool_uses_order_and_the_next_prompt_joins_them() -> None:
    events = _events(
        conv.prompt_event("c1", "go", "m"),
        _reads("c1", 1, "t1", "t2"),
        _finished("t2", "two"),  # finished first, answered second
        _finished("t1", "one"),
        _finished("t1", "again"),  # the same id later: the first result counts
        conv.stopped_event("c1", "max_turns", 1, USAGE),
        conv.prompt_event("c1", "more", "m"),
    )
    rebuilt = conv.rebuild(events)
    assert rebuilt is not None and rebuilt.conversation_id == "c1" and rebuilt.turns == 1
    assert not rebuilt.ended  # the prompt after the stop began a run that did not end
    user, assistant, answer = rebuilt.messages
    assert user == {"role": "user", "content": [{"type": "text", "text": "go"}]}
    # Struct keeps numbers as doubles; the rebuilt input has the model's int.
    assert assistant["content"][1]["input"] == {"file_path": "a", "limit": 10}
    assert isinstance(assistant["content"][1]["input"]["limit"], int)
    assert answer["role"] == "user"
    assert [b.get("tool_use_id") for b in answer["content"]] == ["t1", "t2", None]
    assert answer["content"][0]["content"] == [{"type": "text", "text": "one"}]
    assert answer["content"][2] == {"type": "text", "text": "more"}


def test_a_call_that_never_finished_is_answered_as_interrupted() -> None:
    rebuilt = conv.rebuild(_events(conv.prompt_event("c", "go", "m"), _reads("c", 1, "t9")))
    assert rebuilt is not None
    (block,) = rebuilt.messages[-1]["content"]
    assert block["tool_use_id"] == "t9" and block["is_error"] is True
    assert block["content"][0]["text"] == conv.INTERRUPTED


def test_the_latest_conversation_is_the_one_rebuilt() -> None:
    events = _events(
        conv.prompt_event("old", "first", "m"),
        conv.message_event("old", 1, [{"type": "text", "text": "hi"}], "end_turn", "m", USAGE),
        conv.prompt_event("new", "second", "m"),
    )
    rebuilt = conv.rebuild(events)
    assert rebuilt is not None and rebuilt.conversation_id == "new" and rebuilt.turns == 0
    assert rebuilt.messages == [{"role": "user", "content": [{"type": "text", "text": "second"}]}]


def test_no_agent_events_is_no_conversation() -> None:
    assert conv.rebuild(_events(_finished("t1", "x"))) is None


def test_a_document_result_is_resent_as_a_document_block() -> None:
    """agentctl agent's resume sends a Read PDF's result as it was sent: the text, then the
    PDF as a Messages API document block."""
    pdf = b"%PDF-1.4\n..."
    result = pb.ToolResult(
        tool_use_id="t1",
        content=[
            pb.ContentBlock(type="text", text="PDF file read: /w/d.pdf (11 bytes)"),
            pb.ContentBlock(
                type="document",
                source=pb.ImageSource(type="base64", media_type="application/pdf", data=pdf),
            ),
        ],
    )
    events = _events(
        conv.prompt_event("c1", "go", "m"),
        _reads("c1", 1, "t1"),
        pb.CallFinished(name="Read", result=result),
    )
    rebuilt = conv.rebuild(events)
    assert rebuilt is not None
    (block,) = rebuilt.messages[-1]["content"]
    assert block["content"][1] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQKLi4u"},
    }
