"""The capture of a workspace's untracked files (agentd/changes/capture.py) never goes
through a link the sandbox planted: a link to a file or a directory elsewhere is not a
file of the workspace, and nothing behind it becomes a pre-image that a restore could
write into the workspace. The planting runs inside the sandbox, behind the guard; a
second session (another identity: its own capture) then walks the planted tree."""

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
    """A directory outside the workspace that the sandbox identity may read."""
    root = reachable_workspace("agentd-elsewhere-")
    (root / "precious").write_text("keep me\n")
    os.chown(root / "precious", root.stat().st_uid, root.stat().st_gid)
    yield root
    shutil.rmtree(root)


def test_the_capture_copies_nothing_behind_a_planted_link(
    client: Client, session_id: str, workspace: Path, elsewhere: Path
) -> None:
    planted = bash(
        client,
        session_id,
        guarded_sh(
            f"mkdir sub && ln -s {elsewhere} sub/d && ln -s {elsewhere}/precious sub/a.txt "
            "&& echo planted"
        ),
    )
    assert "planted" in planted.text, planted.text
    # A session on sub/: its checkpoints know nothing of the planting call's (another
    # root); its capture, at its first writing command, walks the planted links.
    other = client.create_session(str(workspace / "sub"), permission_mode="bypassPermissions").id
    command = "rm a.txt && echo over > a.txt"
    done = client.run_tool(other, "Bash", {"command": command}, "c-over")
    assert not done.is_error, done.text
    diff = client.diff_checkpoint(other, "c-over", fmt="names")
    got = {f.path: (f.change, f.before) for f in diff.files}
    assert got["a.txt"][1].kind == "unknown" and not got["a.txt"][1].sha256, got["a.txt"]
    rewound = client.rewind_to_call(other, "c-over", on_conflict="overwrite")
    assert (workspace / "sub" / "a.txt").read_text() == "over\n", rewound.message
    assert os.readlink(workspace / "sub" / "d") == str(elsewhere)
    assert sorted(os.listdir(elsewhere)) == ["precious"]
    assert (elsewhere / "precious").read_text() == "keep me\n"
