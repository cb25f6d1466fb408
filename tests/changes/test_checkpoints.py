"""Checkpoints through the real daemon: each writing call's exact change set, Bash
included, and restores byte-exact with modes (agentd/changes/checkpoints.py,
restore.py, putback.py; the RPCs in agentd/api/handlers/checkpoints.py)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentd_client import Client
from agentd_client.v1 import agentd_pb2 as pb


def bash(client: Client, sid: str, command: str, call: str) -> str:
    return client.run_tool(sid, "Bash", {"command": command}, call).text


def files(client: Client, sid: str, call: str) -> dict[str, tuple[str, pb.FileImage, pb.FileImage]]:
    diff = client.diff_checkpoint(sid, call, fmt="names")
    return {f.path: (f.change, f.before, f.after) for f in diff.files}


def changes(client: Client, sid: str, call: str) -> dict[str, str]:
    return {p: c for p, (c, _, _) in files(client, sid, call).items()}


def snapshot(root: Path) -> dict[str, Any]:
    """Every entry below `root`: kind, mode and content (a walk: the test's, not agentd's)."""
    out: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), p.read_bytes())
    return out


def test_sed_in_place_is_one_changed_file_and_restores(
    client: Client, session_id: str, workspace: Path
) -> None:
    bash(client, session_id, "printf 'one\\ntwo\\n' > a.txt; chmod 640 a.txt", "t-make")
    assert changes(client, session_id, "t-make") == {"a.txt": "added"}
    before = snapshot(workspace)
    bash(client, session_id, "sed -i s/one/ONE/ a.txt", "t-sed")
    assert changes(client, session_id, "t-sed") == {"a.txt": "changed"}
    unified = client.diff_checkpoint(session_id, "t-sed", fmt="unified").text
    assert "-one" in unified and "+ONE" in unified
    done = client.restore_checkpoint(session_id, "t-sed")
    assert done.applied, done.message
    assert snapshot(workspace) == before


def test_a_generator_of_a_thousand_files(client: Client, session_id: str, workspace: Path) -> None:
    bash(
        client, session_id, "mkdir gen && for i in $(seq 1000); do echo $i > gen/f$i; done", "t-gen"
    )
    got = changes(client, session_id, "t-gen")
    assert len(got) == 1001 and got["gen"] == "added" and got["gen/f1000"] == "added"
    client.rewind_to_call(session_id, "t-gen")
    assert not (workspace / "gen").exists()


def test_rm_rf_of_a_tree_comes_back(client: Client, session_id: str, workspace: Path) -> None:
    bash(
        client,
        session_id,
        "mkdir -p t/d/e && echo x > t/d/e/f && echo y > t/g && chmod 700 t/d && chmod 755 t/g",
        "t-tree",
    )
    before = snapshot(workspace)
    bash(client, session_id, "rm -rf t", "t-rm")
    got = changes(client, session_id, "t-rm")
    assert got == {
        "t": "deleted",
        "t/d": "deleted",
        "t/d/e": "deleted",
        "t/d/e/f": "deleted",
        "t/g": "deleted",
    }
    done = client.restore_checkpoint(session_id, "t-rm")
    assert done.applied, done.message
    assert snapshot(workspace) == before


def test_truncating_redirect_chmod_and_kind_changes(
    client: Client, session_id: str, workspace: Path
) -> None:
    bash(
        client,
        session_id,
        "echo long-content > r.txt; echo m > m.sh; ln -s r.txt l; echo f > fd; mkdir -p keep",
        "t-set",
    )
    before = snapshot(workspace)
    bash(
        client,
        session_id,
        ": > r.txt; chmod 755 m.sh; rm l; echo plain > l; rm fd; mkdir fd; echo in > fd/x",
        "t-mix",
    )
    got = files(client, session_id, "t-mix")
    assert {p: c for p, (c, _, _) in got.items()} == {
        "r.txt": "changed",
        "m.sh": "changed",
        "l": "changed",
        "fd": "changed",
        "fd/x": "added",
    }
    assert got["l"][1].kind == "link" and got["l"][2].kind == "file"
    assert got["fd"][1].kind == "file" and got["fd"][2].kind == "dir"
    assert got["m.sh"][2].mode == 0o755
    done = client.restore_checkpoint(session_id, "t-mix")
    assert done.applied, done.message
    assert snapshot(workspace) == before


def test_file_tools_save_what_they_overwrite(
    client: Client, session_id: str, workspace: Path
) -> None:
    (workspace / "w.txt").write_text("original\n")
    os.chown(workspace / "w.txt", workspace.stat().st_uid, workspace.stat().st_gid)
    client.run_tool(session_id, "Read", {"file_path": str(workspace / "w.txt")}, "t-read")
    client.run_tool(
        session_id, "Write", {"file_path": str(workspace / "w.txt"), "content": "new\n"}, "t-write"
    )
    got = files(client, session_id, "t-write")
    assert got["w.txt"][0] == "changed" and got["w.txt"][1].sha256
    client.run_tool(
        session_id,
        "Edit",
        {"file_path": str(workspace / "w.txt"), "old_string": "new", "new_string": "edited"},
        "t-edit",
    )
    assert changes(client, session_id, "t-edit") == {"w.txt": "changed"}
    client.run_tool(
        session_id,
        "MultiEdit",
        {
            "file_path": str(workspace / "w.txt"),
            "edits": [{"old_string": "edited", "new_string": "multi"}],
        },
        "t-multi",
    )
    nb = workspace / "n.ipynb"
    nb.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n')
    os.chown(nb, workspace.stat().st_uid, workspace.stat().st_gid)
    client.run_tool(session_id, "Read", {"file_path": str(nb)}, "t-nb-read")
    edit = {"notebook_path": str(nb), "new_source": "1 + 1", "cell_type": "code"}
    result = client.run_tool(session_id, "NotebookEdit", {**edit, "edit_mode": "insert"}, "t-nb")
    assert not result.is_error, result.text
    calls = [c.tool_use_id for c in client.list_checkpoints(session_id)]
    assert calls == ["t-write", "t-edit", "t-multi", "t-nb"]
    assert changes(client, session_id, "t-nb") == {"n.ipynb": "changed"}
    assert "multi" in client.diff_checkpoint(session_id, "t-multi", fmt="unified").text
    done = client.rewind_to_call(session_id, "t-write")
    assert done.applied, done.message
    assert (workspace / "w.txt").read_text() == "original\n"


def test_a_read_only_call_makes_no_checkpoint(client: Client, session_id: str) -> None:
    bash(client, session_id, "ls -la", "t-ls")
    assert client.list_checkpoints(session_id) == []


def test_git_tracked_file_gets_its_pre_image_from_git(
    client: Client, session_id: str, workspace: Path
) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(workspace)}
    owner = workspace.stat()
    (workspace / "g.txt").write_text("from git\n")
    for argv in (["git", "init", "-q"], ["git", "-c", "safe.directory=*", "add", "g.txt"]):
        subprocess.run(argv, cwd=workspace, env=env, check=True)
    for dirpath, _, names in os.walk(workspace):
        for name in [*names, "."]:
            os.lchown(os.path.join(dirpath, name), owner.st_uid, owner.st_gid)
    bash(client, session_id, "echo changed > g.txt", "t-git")
    got = files(client, session_id, "t-git")
    assert got["g.txt"][1].sha256, got["g.txt"][1]
    done = client.restore_checkpoint(session_id, "t-git")
    assert done.applied, done.message
    assert (workspace / "g.txt").read_text() == "from git\n"


def test_untracked_overwritten_file_comes_back_from_the_capture(
    client: Client, session_id: str, workspace: Path
) -> None:
    (workspace / "u.txt").write_text("made outside\n")
    os.chmod(workspace / "u.txt", 0o640)
    os.chown(workspace / "u.txt", workspace.stat().st_uid, workspace.stat().st_gid)
    bash(client, session_id, "echo over > u.txt", "t-over")
    got = files(client, session_id, "t-over")
    assert got["u.txt"][1].sha256, got["u.txt"][1]
    done = client.restore_checkpoint(session_id, "t-over")
    assert done.applied, done.message
    assert (workspace / "u.txt").read_bytes() == b"made outside\n"
    assert stat.S_IMODE((workspace / "u.txt").stat().st_mode) == 0o640


@pytest.mark.parametrize("fmt", ["stat", "names", "unified"])
def test_diff_since_a_call_to_now(
    client: Client, session_id: str, workspace: Path, fmt: str
) -> None:
    bash(client, session_id, "echo 1 > s.txt", "t-s1")
    bash(client, session_id, "echo 2 >> s.txt", "t-s2")
    (workspace / "s.txt").write_text("1\n2\n3\n")  # outside the agent
    diff = client.diff_checkpoint(session_id, "t-s1", since=True, fmt=fmt)
    assert [f.path for f in diff.files] == ["s.txt"]
    if fmt == "unified":
        assert "+3" in diff.text


def test_hostile_names_reach_no_terminal_raw_and_break_nothing(
    client: Client, session_id: str, workspace: Path
) -> None:
    made = "printf 1 > $'\\xff\\xfe'; printf 2 > $'a\\n+b'; printf 3 > $'\\e[2Jc'"
    bash(client, session_id, made, "t-names")
    names = client.diff_checkpoint(session_id, "t-names", fmt="names").text
    assert sorted(names.splitlines()) == ['A "\\x1b[2Jc"', 'A "\\xff\\xfe"', 'A "a\\n+b"']
    unified = client.diff_checkpoint(session_id, "t-names", fmt="unified").text
    assert "\n+b" not in unified.replace("\n+1", "").replace("\n+2", "").replace("\n+3", "")
    event = [c for c in client.list_checkpoints(session_id) if c.tool_use_id == "t-names"]
    assert event and event[0].added == 3
    done = client.rewind_to_call(session_id, "t-names")
    assert done.applied, done.message
    assert os.listdir(workspace) == []


def test_a_write_through_a_link_records_its_target(
    client: Client, session_id: str, workspace: Path
) -> None:
    bash(client, session_id, "echo first > real.txt; ln -s real.txt via", "t-link")
    client.run_tool(session_id, "Read", {"file_path": str(workspace / "via")}, "t-link-read")
    client.run_tool(
        session_id, "Write", {"file_path": str(workspace / "via"), "content": "second\n"}, "t-via"
    )
    assert changes(client, session_id, "t-via") == {"real.txt": "changed"}
    done = client.restore_checkpoint(session_id, "t-via")
    assert done.applied, done.message
    assert (workspace / "via").is_symlink() and (workspace / "real.txt").read_text() == "first\n"


def test_a_change_held_and_reverted_is_no_change(
    client: Client, session_id: str, workspace: Path
) -> None:
    text = bash(client, session_id, "echo 'export X=1' > .envrc; echo kept > kept.txt", "t-held")
    assert "reverted" in text or "stay" in text, text
    assert not (workspace / ".envrc").exists()
    assert changes(client, session_id, "t-held") == {"kept.txt": "added"}
    [held] = [c for c in client.list_checkpoints(session_id) if c.tool_use_id == "t-held"]
    assert (held.added, held.changed, held.deleted) == (1, 0, 0)
