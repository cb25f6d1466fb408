"""A restore that would write a file that makes code run later asks a person, as a
command's change to one is held and asked about (agentd/changes/restore.py, the
RestoreCheckpoint and RewindToCall handlers): without a yes those paths are left as
they are, the rest is restored."""

from __future__ import annotations

from pathlib import Path

from agentd_client import Client
from agentd_client.core.approver import PermissionAsk


def write(client: Client, sid: str, rel: str, text: str, call: str) -> None:
    with client.approver(sid, lambda ask: True):  # the file tools ask for .envrc
        r = client.run_tool(sid, "Write", {"file_path": rel, "content": text}, call)
    assert not r.is_error, r.text


def two_calls(client: Client, sid: str, workspace: Path) -> None:
    write(client, sid, str(workspace / ".envrc"), "export A=1\n", "w-env")
    write(client, sid, str(workspace / "plain.txt"), "one\n", "w-plain")
    client.run_tool(sid, "Read", {"file_path": str(workspace / ".envrc")})
    client.run_tool(sid, "Read", {"file_path": str(workspace / "plain.txt")})
    write(client, sid, str(workspace / ".envrc"), "export A=2\n", "w-env2")
    write(client, sid, str(workspace / "plain.txt"), "two\n", "w-plain2")


def test_nobody_attached_leaves_the_code_bearing_path_and_restores_the_rest(
    client: Client, session_id: str, workspace: Path
) -> None:
    two_calls(client, session_id, workspace)
    done = client.rewind_to_call(session_id, "w-env2")
    assert (workspace / "plain.txt").read_text() == "one\n"
    assert (workspace / ".envrc").read_text() == "export A=2\n"
    assert "left as they are: it makes code run later (.envrc) and nobody was attached" in (
        done.message
    ), done.message
    [env] = [p for p in done.paths if p.path == ".envrc"]
    assert "nobody was attached" in env.conflict


def test_a_person_who_says_yes_gets_it_restored_and_saw_what(
    client: Client, session_id: str, workspace: Path
) -> None:
    two_calls(client, session_id, workspace)
    asks: list[PermissionAsk] = []

    def decide(ask: PermissionAsk) -> bool:
        asks.append(ask)
        return True

    with client.approver(session_id, decide):
        done = client.restore_checkpoint(session_id, "w-env2")
    assert done.applied, done.message
    assert (workspace / ".envrc").read_text() == "export A=1\n"
    [ask] = asks
    assert ask.tool_name == "RestoreCheckpoint" and ask.tool_use_id == "w-env2"
    assert "+export A=1" in ask.input["diff"], ask.input
    assert ask.input["asked_by"] and ask.input["count"] == 1


def test_a_person_who_says_no_keeps_it(client: Client, session_id: str, workspace: Path) -> None:
    two_calls(client, session_id, workspace)
    with client.approver(session_id, lambda ask: False):
        done = client.rewind_to_call(session_id, "w-env2")
    assert (workspace / ".envrc").read_text() == "export A=2\n"
    assert (workspace / "plain.txt").read_text() == "one\n"
    assert "refused them" in done.message, done.message


def test_a_dry_run_asks_nobody(client: Client, session_id: str, workspace: Path) -> None:
    two_calls(client, session_id, workspace)
    asks: list[PermissionAsk] = []
    with client.approver(session_id, lambda ask: asks.append(ask) or True):
        done = client.rewind_to_call(session_id, "w-env2", dry_run=True)
    assert not done.applied and asks == []
    assert "1 of them make code run later: a person attached" in done.message, done.message
    assert (workspace / ".envrc").read_text() == "export A=2\n"
