"""A restore never follows a link the sandbox planted (agentd/changes/putback.py).

The sandbox replaces, after the calls whose checkpoint is restored, a directory and a
file of the workspace with links to a directory the sandbox identity may write
elsewhere (another workspace of the same user). Restoring must put the directory and
the file back inside the workspace, and write nothing through the links: the other
directory keeps exactly what it had. The planting runs inside the sandbox, behind the
guard."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from tests.sandbox._sandbox_attack import bash, guarded_sh
from tests.support.workspaces import reachable_workspace

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")


@pytest.fixture
def elsewhere() -> Iterator[Path]:
    """A directory outside the workspace that the sandbox identity may write."""
    root = reachable_workspace("agentd-elsewhere-")
    (root / "precious").write_text("keep me\n")
    os.chown(root / "precious", root.stat().st_uid, root.stat().st_gid)
    yield root
    shutil.rmtree(root)


def test_restore_replaces_planted_links_and_writes_nothing_through_them(
    client: Client, session_id: str, workspace: Path, elsewhere: Path
) -> None:
    client.run_tool(
        session_id, "Bash", {"command": "mkdir d && echo f > d/f; echo a > a.txt"}, "k-1"
    )
    client.run_tool(session_id, "Bash", {"command": "rm -r d; echo b > a.txt"}, "k-2")
    planted = bash(
        client,
        session_id,
        guarded_sh(
            f"ln -s {elsewhere} d && rm a.txt && ln -s {elsewhere}/precious a.txt && echo planted"
        ),
    )
    assert "planted" in planted.text, planted.text
    before = sorted(os.listdir(elsewhere))
    done = client.rewind_to_call(session_id, "k-2", on_conflict="overwrite")
    assert done.applied, done.message
    assert not (workspace / "d").is_symlink() and (workspace / "d" / "f").read_text() == "f\n"
    assert not (workspace / "a.txt").is_symlink() and (workspace / "a.txt").read_text() == "a\n"
    assert sorted(os.listdir(elsewhere)) == before
    assert (elsewhere / "precious").read_text() == "keep me\n"


def test_a_link_planted_on_the_path_to_a_restored_file_is_not_entered(
    client: Client, session_id: str, workspace: Path, elsewhere: Path
) -> None:
    client.run_tool(session_id, "Bash", {"command": "mkdir -p p/q && echo x > p/q/x"}, "k-3")
    client.run_tool(session_id, "Bash", {"command": "echo y > p/q/x"}, "k-4")
    planted = bash(
        client, session_id, guarded_sh(f"rm -r p/q && ln -s {elsewhere} p/q && echo planted")
    )
    assert "planted" in planted.text, planted.text
    done = client.restore_checkpoint(session_id, "k-4", on_conflict="overwrite")
    assert "not restored: p/q/x: a directory on its path (q) is a link" in done.message
    assert not os.path.exists(elsewhere / "x")
    assert (workspace / "p" / "q").is_symlink()
