"""The workspace check (agentd/fs/workspace_access.py): the kernel's answer for the
session's identity, mount options included, and the one line that says what to do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.fs import workspace_access
from agentd.fs.identity import FsIdentity

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="acts as another identity")
NOBODY = FsIdentity(65534, 65534)


@pytest.fixture
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="agentd-wsa-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_every_parent_that_stops_the_identity_is_named(base: Path) -> None:
    ws = base / "a" / "b" / "ws"
    ws.mkdir(parents=True)
    (base / "a").chmod(0o700)
    (base / "a" / "b").chmod(0o700)
    refusal = workspace_access.examine(str(ws), NOBODY)
    assert refusal is not None
    assert refusal.blocked == [str(base / "a"), str(base / "a" / "b")]
    assert refusal.missing == ["write"]  # 0755 root's: read and search, no write
    line = workspace_access.refusal_message(refusal, (65534, 65534), "sandbox_uid", True)
    assert "\n" not in line
    assert f"Fix: chmod o+x {base}/a {base}/a/b && chown -R 65534:65534 {ws}" in line


def test_a_read_only_mount_is_named_and_not_fixed_by_chown(base: Path) -> None:
    """The mount's read-only flag counts, as it does for the session's commands: checked
    in a mount namespace of its own where the workspace is bound read-only."""
    ws = base / "ws"
    ws.mkdir()
    os.chown(ws, 65534, 65534)
    probe = (
        "from agentd.fs import workspace_access as w\n"
        f"r = w.examine({str(ws)!r}, w.FsIdentity(65534, 65534))\n"
        'print(w.refusal_message(r, (65534, 65534), "the workspace\'s owner", True))\n'
    )
    script = f'mount --bind {ws} {ws} && mount -o remount,bind,ro {ws} && exec "$@"'
    out = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh",
         sys.executable, "-c", probe],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert out == (
        f"workspace {ws} cannot be used by uid 65534 (nobody), the identity this root daemon "
        "runs the session's commands and file tools as (the workspace's owner): it needs "
        f"write on {ws}, which is on a read-only mount. Remount it read-write, or choose a "
        "workspace on a writable file system"
    )
    # Outside that namespace the same directory is fine.
    assert workspace_access.examine(str(ws), NOBODY) is None


def test_a_non_root_daemon_is_told_to_choose_another_workspace(base: Path) -> None:
    ws = base / "ws"
    ws.mkdir(mode=0o555)
    os.chown(ws, 65534, 65534)
    refusal = workspace_access.examine(str(ws), NOBODY)
    assert refusal is not None and refusal.missing == ["write"]
    line = workspace_access.refusal_message(refusal, (65534, 65534), "", False)
    assert "uid 65534 (nobody), the user this daemon runs as" in line
    assert line.endswith(f"Fix: chmod u+rwx {ws}, or choose a workspace uid 65534 (nobody) can use")
