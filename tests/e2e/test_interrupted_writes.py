"""The temp file of a Write that a crash interrupted is removed at the next start, and
nothing else is: not a file a workspace planted under such a name, not a file that
replaced ours, not what a symlink put in its place points at."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from agentd.fs.identity import FsIdentity
from agentd.fs.temp_ledger import TempLedger
from agentd_client import AgentdError, Client
from tests.conftest import SANDBOX_UID
from tests.support.daemon import start_daemon
from tests.support.waiting import wait_until

IDENTITY = FsIdentity(SANDBOX_UID, SANDBOX_UID) if os.geteuid() == 0 else None


def _temp(workspace: Path, name: str) -> Path:
    path = workspace / name
    path.write_bytes(b"half a write")
    if IDENTITY:
        os.chown(path, SANDBOX_UID, SANDBOX_UID)
    return path


def test_only_our_own_left_temp_files_go(tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "d" / "state"
    state.mkdir(parents=True, mode=0o700)
    ledger = TempLedger(str(state / "pending-writes"))
    (workspace / "sub").mkdir()
    os.chown(workspace / "sub", SANDBOX_UID, SANDBOX_UID)
    outside = tmp_path / "outside.agentd-1-00000000.tmp"
    outside.write_text("not ours to delete")

    tokens: dict[str, str] = {}

    def left(rel_dir: str, name: str) -> Path:
        """As a write that died after making its temp file."""
        path = _temp(workspace / rel_dir, name)
        tokens[name] = ledger.begin(str(workspace), rel_dir, name, IDENTITY)
        ledger.made(tokens[name], os.stat(path))
        return path

    ours = left("", ".a.txt.agentd-7-0000abcd.tmp")
    ours_deep = left("sub", ".b.txt.agentd-7-0000abce.tmp")
    # Ours once, then replaced by another file under the same name: not ours any more.
    # (Renamed over it, so the two exist at once and the inode cannot be reused.)
    replaced = left("", ".c.txt.agentd-7-0000abcf.tmp")
    os.replace(_temp(workspace, "other"), replaced)
    # Ours once, then replaced by a symlink to a file outside: the link is not ours.
    linked = left("", ".d.txt.agentd-7-0000abd0.tmp")
    linked.unlink()
    linked.symlink_to(outside)
    # A directory of ours swapped for a symlink that leads out of the workspace.
    (workspace / "sub2").mkdir()
    escaped = left("sub2", outside.name)
    escaped.unlink()
    (workspace / "sub2").rmdir()
    (workspace / "sub2").symlink_to(tmp_path)
    # Planted by the workspace with our naming, never recorded.
    planted = _temp(workspace, ".e.txt.agentd-7-0000abd1.tmp")
    # A write that finished (marked done), and a file under its temp name since.
    finished = left("", ".f.txt.agentd-7-0000abd2.tmp")
    ledger.done(tokens[finished.name])
    # Killed between making the file and recording its inode: ours if one link, owned
    # by the identity; a name with a second link (a workspace's hard link) is not.
    unrecorded = _temp(workspace, ".g.txt.agentd-7-0000abd3.tmp")
    ledger.begin(str(workspace), "", unrecorded.name, IDENTITY)
    linked_twice = _temp(workspace, ".h.txt.agentd-7-0000abd4.tmp")
    os.link(linked_twice, workspace / "second-link")
    ledger.begin(str(workspace), "", linked_twice.name, IDENTITY)
    ledger.close()

    daemon = start_daemon(tmp_path / "d")
    try:
        assert not ours.exists() and not ours_deep.exists()
        # ours, ours_deep, unrecorded
        assert "removed 3 temp files" in daemon.log, daemon.log
        assert not unrecorded.exists() and linked_twice.exists()
        assert replaced.read_bytes() == b"half a write"
        assert linked.is_symlink() and outside.read_text() == "not ours to delete"
        assert planted.exists()
        assert finished.exists()
        assert os.path.getsize(state / "pending-writes") == 0
    finally:
        assert daemon.stop() == 0, daemon.log


@pytest.mark.parametrize("round_", range(2))
def test_a_daemon_killed_mid_write_leaves_no_temp_file(
    tmp_path: Path, workspace: Path, round_: int
) -> None:
    daemon = start_daemon(tmp_path / "d")
    target = workspace / "big.bin"
    content = "x" * (12 * 1024 * 1024)
    with Client(daemon.socket, timeout=30) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id

        def write_forever() -> None:
            try:
                while True:
                    c.run_tool(sid, "Write", {"file_path": str(target), "content": content})
                    target.unlink()
            except (AgentdError, OSError):
                return

        writer = threading.Thread(target=write_forever)
        writer.start()
        # Kill it while a temp file is there: it is there for an instant, so look
        # without a pause.
        wait_until(
            lambda: [n for n in os.listdir(workspace) if n.endswith(".tmp")],
            20,
            "a write under way",
            interval=0,
        )
        daemon.stop(signal.SIGKILL)
        writer.join()
    left = [n for n in os.listdir(workspace) if n.endswith(".tmp")]
    if not left:  # the write ended between the look and the kill: nothing to test
        daemon.stop()
        pytest.skip("the kill came after the write")
    again = start_daemon(tmp_path / "d")
    try:
        assert [n for n in os.listdir(workspace) if n.endswith(".tmp")] == [], (left, again.log)
    finally:
        assert again.stop() == 0, again.log
