"""The root daemon deletes what sandboxed commands wrote: its temp dir at close, its
output dir at reaping. A command that plants symlinks (to a directory and a file of
the host's), a FIFO and a deep tree there must lose only its own files: the deletion
never follows a link, so the host's files survive it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from tests.support.daemon import DaemonProcess
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

PLANT = """
set -e
printf %s "$TMPDIR"
cd "$TMPDIR"
ln -s {victim} dirlink
ln -s {victim}/precious filelink
mkdir -p deep/a/b/c && ln -s {victim} deep/a/b/c/up
mkfifo fifo
touch plain
"""


@pytest.fixture
def victim() -> Iterator[Path]:
    """A host directory the sandbox cannot see, with a file that must survive."""
    root = Path(tempfile.mkdtemp(prefix="agentd-victim-"))
    (root / "precious").write_text("keep me")
    yield root
    shutil.rmtree(root)


def test_closing_deletes_no_file_a_symlink_points_at(
    client: Client, daemon: DaemonProcess, workspace: Path, victim: Path
) -> None:
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    planted = client.run_tool(sid, "Bash", {"command": PLANT.format(victim=victim)})
    assert not planted.is_error, planted.text
    tmp = Path(planted.text.splitlines()[0])
    assert os.path.islink(tmp / "dirlink") and os.path.islink(tmp / "filelink")
    client.close_session(sid)
    wait_until(lambda: not (tmp.exists() or tmp.is_symlink()), what="the temp dir removed at close")
    assert (victim / "precious").read_text() == "keep me"
    assert sorted(os.listdir(victim)) == ["precious"]


def test_a_temp_dir_replaced_by_a_symlink_is_not_followed(
    client: Client, daemon: DaemonProcess, workspace: Path, victim: Path
) -> None:
    # Between two calls the session's temp dir itself becomes a symlink (as a process
    # of the sandbox's uid outside any sandbox could make it): closing removes the
    # link, never what it points at.
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    tmp = Path(client.run_tool(sid, "Bash", {"command": 'printf %s "$TMPDIR"'}).text)
    if os.path.ismount(tmp):  # a tmpfs of its own: only root could take it away
        subprocess.run(["umount", str(tmp)], check=True)
    shutil.rmtree(tmp)
    os.symlink(victim, tmp)
    client.close_session(sid)
    wait_until(lambda: not tmp.is_symlink(), what="the planted link removed")
    assert (victim / "precious").read_text() == "keep me"
