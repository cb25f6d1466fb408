"""Applying a review-mode change set never follows a link and never writes outside the
workspace (agentd/changes/review.py, putback.py).

What the change set holds is the sandbox's making: links to a directory outside, a
FIFO, relative links climbing out, whiteouts over links. And between the command and
the apply, the workspace itself may be changed under it: another session's sandbox
plants links where the change set writes. The planting and the hostile commands run
inside the sandbox, behind the guard."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from tests.sandbox._sandbox_attack import bash, guarded_sh
from tests.support.workspaces import SANDBOX_UID, reachable_workspace

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
    pytest.mark.skipif(os.geteuid() != 0, reason="review mode needs a root daemon"),
]


@pytest.fixture
def elsewhere() -> Iterator[Path]:
    """A directory outside the workspace that the sandbox identity may write."""
    root = reachable_workspace("agentd-elsewhere-")
    (root / "precious").write_text("keep me\n")
    os.chown(root / "precious", SANDBOX_UID, SANDBOX_UID)
    yield root
    shutil.rmtree(root)


def _review(client: Client, workspace: Path) -> str:
    return client.create_session(
        str(workspace), permission_mode="bypassPermissions", review=True
    ).id


def test_links_planted_where_the_change_set_writes_are_never_followed(
    client: Client, session_id: str, workspace: Path, elsewhere: Path
) -> None:
    # The workspace's files are made by the sandbox (the other session), as its own.
    made = bash(client, session_id, "mkdir d && echo x > d/x && echo a > a.txt && echo ok")
    assert "ok" in made.text, made.text
    sid = _review(client, workspace)
    waits = client.run_tool(sid, "Bash", {"command": "echo new > d/x; echo b > a.txt"}, "rv-1")
    assert not waits.is_error, waits.text
    planted = bash(
        client,
        session_id,
        guarded_sh(
            f"rm -r d && ln -s {elsewhere} d && rm a.txt && ln -s {elsewhere}/precious a.txt "
            "&& echo planted"
        ),
    )
    assert "planted" in planted.text, planted.text
    before = sorted(os.listdir(elsewhere))
    pending = client.list_pending_changes(sid)
    refused = client.resolve_pending_changes(sid, pending.id, "apply")
    assert not refused.applied and "changed in the workspace" in refused.message
    done = client.resolve_pending_changes(sid, pending.id, "apply", force=True)
    assert "d/x: a directory on its path (d) is a link" in done.message
    assert sorted(os.listdir(elsewhere)) == before
    assert (elsewhere / "precious").read_text() == "keep me\n"
    assert not (workspace / "a.txt").is_symlink() and (workspace / "a.txt").read_text() == "b\n"
    assert (workspace / "d").is_symlink()


def test_links_fifos_and_climbing_names_the_command_made_are_kept_as_what_they_are(
    client: Client, workspace: Path, elsewhere: Path
) -> None:
    sid = _review(client, workspace)
    made = bash(
        client,
        sid,
        guarded_sh(
            f"ln -s {elsewhere}/precious out && ln -s ../../.. up && mkfifo fifo "
            "&& mkdir sub && ln -s .. sub/back && echo made"
        ),
    )
    assert "made" in made.text, made.text
    pending = client.list_pending_changes(sid)
    by_path = {f.path: f for f in pending.files}
    assert by_path["fifo"].after.why.startswith("not applicable")
    assert by_path["out"].after.kind == "link" and by_path["out"].after.target.endswith("precious")
    done = client.resolve_pending_changes(sid, pending.id, "apply")
    assert done.applied, done.message
    assert os.readlink(workspace / "out") == f"{elsewhere}/precious"
    assert os.readlink(workspace / "up") == "../../.."
    assert os.readlink(workspace / "sub" / "back") == ".."
    assert not os.path.lexists(workspace / "fifo")  # never made, never opened
    assert (elsewhere / "precious").read_text() == "keep me\n"
    assert sorted(os.listdir(elsewhere)) == ["precious"]


def test_a_whiteout_over_a_link_to_outside_removes_the_link_only(
    client: Client, session_id: str, workspace: Path, elsewhere: Path
) -> None:
    planted = bash(
        client, session_id, guarded_sh(f"ln -s {elsewhere} esc && mkdir o && echo planted")
    )
    assert "planted" in planted.text, planted.text
    sid = _review(client, workspace)
    # `esc` removed (a whiteout), `o` replaced whole (an opaque directory) after the
    # other session made it a link to outside: nothing there is listed or removed.
    client.run_tool(sid, "Bash", {"command": "rm esc; rm -rf o; mkdir o; echo n > o/n"}, "wo-1")
    pending = client.list_pending_changes(sid)
    assert ("esc", "deleted") in {(f.path, f.change) for f in pending.files}
    swapped = bash(
        client, session_id, guarded_sh(f"rmdir o && ln -s {elsewhere} o && echo swapped")
    )
    assert "swapped" in swapped.text, swapped.text
    done = client.resolve_pending_changes(sid, pending.id, "apply", force=True)
    assert done.applied, done.message
    assert not os.path.lexists(workspace / "esc")
    assert "o/n: a directory on its path (o) is a link" in done.message
    assert stat.S_ISLNK((workspace / "o").lstat().st_mode)
    assert sorted(os.listdir(elsewhere)) == ["precious"]
    assert (elsewhere / "precious").read_text() == "keep me\n"
