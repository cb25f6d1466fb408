"""The daemon's own file work for a session runs with the session's sandbox identity.

A root daemon must not read, list or write on a session's behalf what that session's
sandboxed commands could not: a root-only file planted in the workspace stays closed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentd_client import Client
from tests.conftest import SANDBOX_UID

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="root-only files need a root daemon")

TOKEN = "ROOTONLY-7c1e2a"
# The name of the file inside the root-only directory: listing it is a leak too.
NAME = "hidden-name-91b3"


@pytest.fixture
def root_only_file(workspace: Path) -> Path:
    path = workspace / "root-only.txt"
    path.write_text(f"{TOKEN}\n")
    os.chown(path, 0, 0)
    path.chmod(0o600)
    return path


@pytest.fixture
def root_only_dir(workspace: Path) -> Path:
    path = workspace / "root-only-dir"
    path.mkdir(mode=0o700)
    os.chown(path, 0, 0)
    (path / f"{NAME}.txt").write_text(f"{TOKEN}\n")
    return path


def test_read_of_a_root_only_file_is_refused(
    client: Client, session_id: str, root_only_file: Path
) -> None:
    result = client.run_tool(session_id, "Read", {"file_path": str(root_only_file)})
    assert result.is_error
    assert TOKEN not in result.text
    assert "Permission denied" in result.text


def test_write_over_a_root_only_file_is_refused_and_leaves_it(
    client: Client, session_id: str, root_only_file: Path
) -> None:
    # The model reads first, as it must before a write: neither the read nor the write
    # may go through, as they would for a root daemon acting as itself.
    client.run_tool(session_id, "Read", {"file_path": str(root_only_file)})
    result = client.run_tool(
        session_id, "Write", {"file_path": str(root_only_file), "content": "overwritten\n"}
    )
    assert result.is_error
    assert root_only_file.read_text() == f"{TOKEN}\n"
    assert root_only_file.stat().st_uid == 0


def test_write_into_a_root_only_directory_is_refused(
    client: Client, session_id: str, root_only_dir: Path
) -> None:
    target = root_only_dir / "planted.txt"
    result = client.run_tool(session_id, "Write", {"file_path": str(target), "content": "x\n"})
    assert result.is_error, result.text
    assert "Permission denied" in result.text
    assert not target.exists()


def test_ls_grep_glob_do_not_see_into_a_root_only_directory(
    client: Client, session_id: str, root_only_dir: Path
) -> None:
    for name, args in [
        ("LS", {}),
        ("LS", {"path": str(root_only_dir)}),
        ("Glob", {"pattern": "**/*"}),
        ("Grep", {"pattern": TOKEN, "output_mode": "content"}),
    ]:
        result = client.run_tool(session_id, name, args)
        assert TOKEN not in result.text, (name, args, result.text)
        assert NAME not in result.text, (name, args, result.text)
    result = client.run_tool(session_id, "Read", {"file_path": str(root_only_dir / f"{NAME}.txt")})
    assert result.is_error
    assert TOKEN not in result.text


def test_files_the_daemon_writes_belong_to_the_session_identity(
    client: Client, session_id: str, workspace: Path
) -> None:
    result = client.run_tool(
        session_id, "Write", {"file_path": "made/by/write.txt", "content": "hello\n"}
    )
    assert not result.is_error, result.text
    for path in (workspace / "made", workspace / "made/by", workspace / "made/by/write.txt"):
        st = path.stat()
        assert (st.st_uid, st.st_gid) == (SANDBOX_UID, SANDBOX_UID), path
    # And the session's own commands can change them.
    bash = client.run_tool(session_id, "Bash", {"command": "echo more >> made/by/write.txt"})
    assert not bash.is_error, bash.text
    assert (workspace / "made/by/write.txt").read_text() == "hello\nmore\n"


def test_saved_large_results_in_the_state_dir_stay_readable(
    client: Client, session_id: str, workspace: Path
) -> None:
    # A Bash output too large to show is kept in the session's state dir (the daemon's
    # own, root-only): Read must still reach it.
    bash = client.run_tool(session_id, "Bash", {"command": "seq 1 40000"})
    assert "Full output saved to: " in bash.text, bash.text
    saved = bash.text.split("Full output saved to: ")[1].split("\n")[0]
    assert not os.access(saved, os.R_OK, effective_ids=True) or os.stat(saved).st_uid == 0
    result = client.run_tool(session_id, "Read", {"file_path": saved, "offset": 1, "limit": 3})
    assert not result.is_error, result.text
    assert "1\t1" in result.text.replace(" ", "").replace("→", "\t")


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("Edit", {"old_string": "", "new_string": "planted\n"}),
        ("MultiEdit", {"edits": [{"old_string": "", "new_string": "planted\n"}]}),
    ],
)
def test_edits_that_create_a_file_in_a_root_only_directory_are_refused(
    client: Client, session_id: str, root_only_dir: Path, tool: str, args: dict
) -> None:
    target = root_only_dir / "planted.txt"
    result = client.run_tool(session_id, tool, {"file_path": str(target), **args})
    assert result.is_error, result.text
    assert not target.exists()


def test_edit_of_a_root_only_file_is_refused(
    client: Client, session_id: str, root_only_file: Path
) -> None:
    client.run_tool(session_id, "Read", {"file_path": str(root_only_file)})
    result = client.run_tool(
        session_id,
        "Edit",
        {"file_path": str(root_only_file), "old_string": TOKEN, "new_string": "changed"},
    )
    assert result.is_error
    assert TOKEN not in result.text
    assert root_only_file.read_text() == f"{TOKEN}\n"
