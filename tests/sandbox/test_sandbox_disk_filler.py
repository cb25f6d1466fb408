"""A session that fills the disk its workspace shares with the daemon's state never
stops the journal, another session's Bash, or the daemon (issue 17 "Limits per
session": the state keeps working).

The choice (docs/security.md, "The sandbox"): room is reserved, by the filesystem: ext2/3/4 keep
blocks only root (or CAP_SYS_RESOURCE) may fill. Sandboxed commands are never root and
hold no capability; what the daemon itself writes for a session (a large result saved
for it, a Write) is written without the right to them (agentd/fs/reserve.py), so only
the daemon's own state uses them.

The disk is a small ext4 image this test makes, loop-mounted on a directory it made,
unmounted in a finally; the state dir and session A's workspace are on it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from tests.sandbox._sandbox_attack import bash, guarded_sh
from tests.sandbox.conftest import sandbox_dir
from tests.support.daemon import DaemonProcess, start_daemon

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mkfs.ext4") is None,
    reason="mounting an ext4 image needs root and e2fsprogs",
)

MiB = 1024 * 1024
DISK = 320 * MiB
RESERVED_PERCENT = 25  # 80 MiB only root may fill


@contextlib.contextmanager
def small_ext4() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="agentd-disk-", dir="/var/tmp"))
    base.chmod(0o755)  # the sandbox identity reaches its workspace through it
    image = base / "disk.img"
    with open(image, "wb") as f:
        f.truncate(DISK)
    subprocess.run(
        ["mkfs.ext4", "-q", "-F", "-m", str(RESERVED_PERCENT), str(image)],
        check=True,
        capture_output=True,
    )
    mnt = base / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True)
    mnt.chmod(0o755)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)
        shutil.rmtree(base)


@pytest.fixture
def on_small_disk() -> Iterator[tuple[DaemonProcess, Path]]:
    with small_ext4() as mnt:
        ws = mnt / "ws-a"
        ws.mkdir()
        os.chown(ws, 65534, 65534)
        daemon = start_daemon(mnt)
        try:
            yield daemon, ws
        finally:
            assert daemon.stop() == 0, daemon.log


def test_a_disk_filler_never_stops_the_journal(on_small_disk) -> None:
    daemon, ws_a = on_small_disk
    ws_b = sandbox_dir("agentd-disk-b-")
    try:
        with Client(daemon.socket, timeout=120) as c:
            assert dict(c.status().sandbox["session_limits"])["state_reserve_bytes"] > 0
            a = c.create_session(str(ws_a), permission_mode="bypassPermissions").id
            b = c.create_session(ws_b, permission_mode="bypassPermissions").id
            made = bash(c, a, "seq 1 400000 > lines.txt && echo MADE")
            assert "MADE" in made.text, made.text
            filled = bash(c, a, guarded_sh("head -c 1G /dev/zero > fill || echo DISK' 'FULL"))
            assert "DISK FULL" in filled.text, filled.text

            # A large result is saved in the state dir for the session to read: as much
            # as A asks for, the reserve is not its to fill (main: it was, as root).
            for _ in range(16):
                grep = c.run_tool(
                    a,
                    "Grep",
                    {"pattern": ".", "path": str(ws_a), "output_mode": "content", "head_limit": 0},
                )
                if grep.is_error:
                    break
            assert grep.is_error and "disk is full" in grep.text, grep.text
            # Nor by writing files through the daemon (a root daemon's thread keeps
            # CAP_SYS_RESOURCE through setfsuid unless it gives it up).
            for i in range(8):
                wrote = c.run_tool(
                    a, "Write", {"file_path": f"{ws_a}/w{i}.txt", "content": "x" * (4 * MiB)}
                )
                if wrote.is_error:
                    break
            assert wrote.is_error and "No space left" in wrote.text, wrote.text

            # Another session's writing Bash runs (its start must be journaled), and the
            # journal lost nothing.
            r = bash(c, b, "echo other-session-ok > ok.txt && cat ok.txt")
            assert not r.is_error and "other-session-ok" in r.text, r.text
            state = c.status().state
            assert not state.disk_full and state.events_unjournaled == 0, state
            assert c.create_session(ws_b).id
        assert "state disk full" not in daemon.log, daemon.log
        assert "only agentd" not in daemon.log  # the reserve was found, no warning
    finally:
        shutil.rmtree(ws_b, ignore_errors=True)
