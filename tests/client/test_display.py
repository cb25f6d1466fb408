"""What `agentctl attach` prints for an event (agentd_client/terminal/display.py)."""

from __future__ import annotations

from agentd_client.terminal.display import describe_event
from agentd_client.v1 import agentd_pb2 as pb


def test_files_changed_names_the_call_the_counts_and_the_first_paths() -> None:
    event = pb.Event(
        seq=7,
        files_changed=pb.FilesChanged(
            tool_use_id="toolu_1",
            tool_name="Bash",
            checkpoint=3,
            added=1,
            changed=11,
            deleted=0,
            paths=["+new.txt", *[f"~f{i}" for i in range(10)], "~\x1b[31mred"],
            not_restorable=1,
        ),
    )
    text = describe_event(event)
    assert "files changed by call toolu_1 (Bash): +1 ~11 -0, 1 not restorable, checkpoint 3" in text
    assert "    +new.txt" in text and "... 2 more (agentctl diff)" in text
    assert "\x1b" not in text


def test_a_restore_says_who_asked_for_it() -> None:
    event = pb.Event(
        files_changed=pb.FilesChanged(
            tool_use_id="rewind-ab", tool_name="RewindToCall", action="rewind", by="\x1b]0;ann@box"
        )
    )
    text = describe_event(event)
    assert "files changed by rewind rewind-ab (RewindToCall) by " in text and "\x1b" not in text


def test_review_mode_says_the_changes_wait_then_who_applied_or_discarded_them() -> None:
    def shown(action: str, by: str = "") -> str:
        f = pb.FilesChanged(tool_use_id="t-1", tool_name="Bash", added=2, action=action, by=by)
        return describe_event(pb.Event(seq=1, files_changed=f))

    assert "changes of call t-1 (Bash) wait for review: +2 ~0 -0" in shown("pending review")
    applied = shown("applied", "ann@box")
    assert "files changed by call t-1 (Bash) by ann@box (review applied)" in applied
    discarded = shown("discarded", "\x1b]0;bob")
    assert "changes of call t-1 (Bash) discarded by" in discarded and "\x1b" not in discarded
