"""The notice a Bash result carries about files the model has read, through the real
daemon: it names exactly what this call's change set changed (agentd/changes/readchanged.py),
not what a stat sees move."""

from __future__ import annotations

import os
from pathlib import Path

from agentd_client import Client
from tests.support.daemon import start_daemon

NOTICE = "This command changed files you have read"


def bash(client: Client, sid: str, command: str, **more: object) -> str:
    return client.run_tool(sid, "Bash", {"command": command, **more}).text


def made(workspace: Path, rel: str, text: str) -> Path:
    path = workspace / rel
    path.write_text(text)
    st = workspace.stat()
    os.chown(path, st.st_uid, st.st_gid)
    return path


def read(client: Client, sid: str, path: Path) -> None:
    r = client.run_tool(sid, "Read", {"file_path": str(path)})
    assert not r.is_error, r.text


def named(text: str) -> list[str]:
    """The paths the notice names (none when there is no notice)."""
    line = next((x for x in text.splitlines() if x.startswith(NOTICE)), "")
    if not line:
        return []
    return line[len(NOTICE) + 2 :].split(". Read them again")[0].split(", ")


def test_a_read_file_the_call_changed_is_named(
    client: Client, session_id: str, workspace: Path
) -> None:
    read(client, session_id, made(workspace, "a.txt", "one\n"))
    read(client, session_id, made(workspace, "b.txt", "one\n"))
    text = bash(client, session_id, "echo two >> a.txt; echo x > unread.txt")
    assert named(text) == ["a.txt"], text
    assert f"{NOTICE}: a.txt. Read them again before editing them." in text


def test_an_unread_file_changed_names_nothing(
    client: Client, session_id: str, workspace: Path
) -> None:
    read(client, session_id, made(workspace, "seen.txt", "one\n"))
    made(workspace, "other.txt", "one\n")
    text = bash(client, session_id, "echo two >> other.txt; rm other.txt; echo n > new.txt")
    assert named(text) == [], text


def test_a_deleted_and_a_replaced_read_file_are_named(
    client: Client, session_id: str, workspace: Path
) -> None:
    read(client, session_id, made(workspace, "gone.txt", "one\n"))
    read(client, session_id, made(workspace, "sed.txt", "one\n"))
    text = bash(client, session_id, "rm gone.txt; sed -i s/one/ONE/ sed.txt")
    assert named(text) == ["gone.txt", "sed.txt"], text


def test_a_held_code_bearing_change_is_not_named(
    client: Client, session_id: str, workspace: Path
) -> None:
    # Below the root, .envrc is writable in the sandbox and a change to it held. Nobody
    # is attached: it stays reverted; the held notice tells the model, and the file it
    # read is as it read it.
    (workspace / "sub").mkdir()
    os.chown(workspace / "sub", workspace.stat().st_uid, workspace.stat().st_gid)
    read(client, session_id, made(workspace, "sub/.envrc", "export A=1\n"))
    read(client, session_id, made(workspace, "plain.txt", "one\n"))
    text = bash(client, session_id, "echo 'export B=2' >> sub/.envrc; echo two >> plain.txt")
    assert "stay reverted" in text, text
    assert (workspace / "sub/.envrc").read_text() == "export A=1\n"
    assert named(text) == ["plain.txt"], text


def test_a_touch_or_the_same_bytes_written_again_is_no_change_to_what_was_read(
    client: Client, session_id: str, workspace: Path
) -> None:
    # The reference's note about a changed file is a diff: with the same bytes there is
    # none, and the model's copy is still true.
    read(client, session_id, made(workspace, "t.txt", "same\n"))
    read(client, session_id, made(workspace, "w.txt", "same\n"))
    read(client, session_id, made(workspace, "m.txt", "same\n"))
    text = bash(
        client,
        session_id,
        "touch -d '2001-01-01' t.txt; echo same > w.txt; echo other > m.txt; echo same > m.txt",
    )
    assert named(text) == [], text
    assert NOTICE not in text, text


def test_a_read_file_another_command_changed_meanwhile_is_not_this_calls(
    client: Client, session_id: str, workspace: Path
) -> None:
    read(client, session_id, made(workspace, "r.txt", "one\n"))
    task = bash(
        client,
        session_id,
        "while [ ! -e go ]; do sleep 0.02; done; echo two >> r.txt; touch fin",
        run_in_background=True,
    )
    assert "background" in task.lower(), task
    text = bash(client, session_id, "touch go; while [ ! -e fin ]; do sleep 0.02; done")
    assert (workspace / "r.txt").read_text() == "one\ntwo\n"
    assert named(text) == [], text


def test_without_a_change_set_the_files_are_compared_by_stat(
    tmp_path: Path, workspace: Path
) -> None:
    # A daemon that scans (as one that is not root must) keeps no change set per call.
    config = tmp_path / "config.toml"
    config.write_text('changes_tracking = "scan"\n')
    proc = start_daemon(tmp_path / "d", ["--config", str(config)])
    try:
        with Client(proc.socket, timeout=60) as client:
            sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
            read(client, sid, made(workspace, "s.txt", "one\n"))
            made(workspace, "u.txt", "one\n")
            text = bash(client, sid, "echo two >> s.txt; echo two >> u.txt")
    finally:
        assert proc.stop() == 0, proc.log
    assert named(text) == ["s.txt"], text


def test_without_checkpoints_the_change_set_still_says(tmp_path: Path, workspace: Path) -> None:
    # checkpoints = false keeps no images: what each read file holds now is looked at.
    config = tmp_path / "config.toml"
    config.write_text("checkpoints = false\n")
    proc = start_daemon(tmp_path / "d", ["--config", str(config)])
    try:
        with Client(proc.socket, timeout=60) as client:
            sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
            for rel in ("c.txt", "t.txt"):
                read(client, sid, made(workspace, rel, "one\n"))
            text = bash(client, sid, "echo two >> c.txt; touch -d '2001-01-01' t.txt")
    finally:
        assert proc.stop() == 0, proc.log
    assert named(text) == ["c.txt"], text
