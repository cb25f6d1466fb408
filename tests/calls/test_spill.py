"""A result over its tool's size budget goes to a file; the model gets a preview and the path."""

from __future__ import annotations

import re
from pathlib import Path

from agentd_client import Client


def test_large_result_is_saved_and_readable(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), permission_mode="default").id
    line = "needle " + "y" * 440
    (workspace / "wide.txt").write_text("".join(f"{i} {line}\n" for i in range(300)))
    r = client.run_tool(sid, "Grep", {"pattern": "needle", "output_mode": "content"})
    assert not r.is_error, r.text
    assert r.text.startswith("<persisted-output>\nOutput too large (")
    assert len(r.text) < 5000
    path = re.search(r"Full output saved to: (\S+)", r.text).group(1)
    assert "wide.txt:1:0 needle" in r.text  # the preview is the start of the result
    # The session's own saved results are readable, even in default mode.
    full = client.run_tool(sid, "Read", {"file_path": path, "offset": 250, "limit": 1})
    assert not full.is_error, full.text
    assert full.text.startswith("250\twide.txt:250:249 needle")


PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63646060f80f0000040201005e5b2d9a0000000049454e44ae426082"
)


def test_image_reply_and_journal_carry_the_same_bytes(client: Client, workspace: Path) -> None:
    """The wire form is built once (base64 in the journal); the reply and a replay from
    the journal give back the file's bytes."""
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    (workspace / "dot.png").write_bytes(PNG_1X1)
    r = client.run_tool(sid, "Read", {"file_path": str(workspace / "dot.png")})
    assert not r.is_error, r.text
    images = [b for b in r.content if not hasattr(b, "text")]
    assert [(b.media_type, b.data) for b in images] == [("image/png", PNG_1X1)]
    stream = client.attach(sid, timeout=10)
    replayed = None
    try:
        for event in stream:
            if event.HasField("call_finished"):
                replayed = [b.source.data for b in event.call_finished.result.content]
                break
    finally:
        stream.cancel()
    assert replayed == [PNG_1X1]


def test_journal_rows_with_hex_images_still_replay() -> None:
    from agentd.api.wire import result_to_pb
    from agentd.sessions import journal
    from agentd.sessions.event_types import CallFinished

    legacy = {
        "tool_use_id": "toolu_1",
        "content": [{"type": "image", "media_type": "image/png", "data": PNG_1X1.hex()}],
        "is_error": False,
        "data_json": "",
    }
    row = {"name": "Read", "duration_ms": 1, "result": legacy}
    body = journal.decode("call_finished", row, journal.UNVERSIONED)
    assert isinstance(body, CallFinished)
    block = result_to_pb(body.result).content[0]
    assert (block.type, block.source.media_type, block.source.data) == (
        "image",
        "image/png",
        PNG_1X1,
    )
