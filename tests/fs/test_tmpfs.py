"""The session's temp dir as a sized tmpfs (agentd/fs/tmpfs.py): mounted on
the very directory, never through a link its owner put in its place, and unmounted
before it is removed. Mounts happen only under directories this test made."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.fs import tmpfs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root")
UID = 65534


@pytest.fixture
def mounts() -> tmpfs.TmpMounts:
    return tmpfs.TmpMounts()  # as the daemon's assembly makes it


@pytest.fixture
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="agentd-stmp-"))
    os.chown(path, UID, UID)  # as /tmp/agentd-<uid> is: the sandbox identity's
    yield path
    for entry in path.iterdir():
        tmpfs.unmount(str(entry))
    shutil.rmtree(path)


def _mounted(path: Path) -> bool:
    return path.stat().st_dev != path.parent.stat().st_dev


def test_sized_then_removed(base: Path, mounts: tmpfs.TmpMounts) -> None:
    tmp = base / "s"
    tmp.mkdir(mode=0o700)
    os.chown(tmp, UID, UID)
    assert not mounts.is_sized(str(tmp))
    mounts.size(str(tmp), 8 * 1024 * 1024, (UID, UID))
    assert _mounted(tmp) and mounts.is_sized(str(tmp))
    st = os.statvfs(tmp)
    assert st.f_blocks * st.f_frsize == 8 * 1024 * 1024
    assert (tmp.stat().st_uid, oct(tmp.stat().st_mode & 0o777)) == (UID, "0o700")
    mounts.size(str(tmp), 8 * 1024 * 1024, (UID, UID))  # once: no mount on a mount
    (tmp / "f").write_bytes(b"x")
    assert tmpfs.remove(str(tmp))
    assert not tmp.exists()


def test_never_mounts_through_a_link(base: Path, mounts: tmpfs.TmpMounts) -> None:
    """The temp dir's parent is the sandbox identity's: a link in its place must not
    make a root daemon mount over the link's target."""
    target = base / "target"
    target.mkdir()
    os.chown(target, UID, UID)
    link = base / "s"
    link.symlink_to(target)
    with pytest.raises(OSError):
        mounts.size(str(link), 8 * 1024 * 1024, (UID, UID))
    assert not _mounted(target)


def test_never_mounts_on_a_directory_of_another_owner(base: Path, mounts: tmpfs.TmpMounts) -> None:
    foreign = base / "s"
    foreign.mkdir()  # root's, not the identity's
    with pytest.raises(PermissionError):
        mounts.size(str(foreign), 8 * 1024 * 1024, (UID, UID))
    assert not _mounted(foreign)
