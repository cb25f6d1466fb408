"""An overlay's upper directory read as a change set (agentd/changes/upper.py): each
kind of entry as the image its path gets, and nothing but regular files and links ever
opened. The upper is made here as the kernel and a hostile command would leave it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agentd.changes import images, upper

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="whiteouts and xattrs need root")


def _made(root: Path) -> Path:
    up = root / "upper"
    up.mkdir()
    (up / "f").write_bytes(b"\x00data\xff")
    os.chmod(up / "f", 0o751)
    os.symlink("/etc/passwd", up / "out")
    os.symlink("../..", up / "up")
    os.mknod(up / "gone", stat.S_IFCHR | 0o000, os.makedev(0, 0))  # a whiteout
    os.mkfifo(up / "fifo")  # opened for reading, the scan would block here
    os.mknod(up / "dev", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    (up / "d").mkdir(mode=0o705)
    os.chmod(up / "d", 0o705)
    os.setxattr(up / "d", upper.OPAQUE_XATTR, b"y")
    (up / "d" / "inner").write_text("inner")
    (up / "plain").mkdir()
    return up


def test_each_entry_becomes_the_image_its_path_gets(tmp_path: Path) -> None:
    found = upper.scan(str(_made(tmp_path)), cap=1 << 20, limit=100)
    by = {e.rel: e for e in found.entries}
    assert set(by) == {"f", "out", "up", "gone", "fifo", "dev", "d", "d/inner", "plain"}
    assert by["f"].image == {"kind": "file", "mode": 0o751, "size": 6}
    assert by["f"].data == b"\x00data\xff"
    assert by["out"].image == {"kind": "link", "target": "/etc/passwd"}
    assert by["up"].image == {"kind": "link", "target": "../.."}
    assert by["gone"].image == images.none()
    assert by["fifo"].image["why"] == upper.NOT_APPLICABLE
    assert by["dev"].image["why"] == upper.NOT_APPLICABLE
    assert by["d"].image == {"kind": "dir", "mode": 0o705}
    assert by["d/inner"].data == b"inner"
    assert found.opaque == ["d"] and not found.truncated


def test_a_file_past_the_cap_is_named_without_its_content(tmp_path: Path) -> None:
    up = tmp_path / "upper"
    up.mkdir()
    (up / "big").write_bytes(b"x" * 100)
    (entry,) = upper.scan(str(up), cap=10, limit=100).entries
    assert entry.image["why"] == images.TOO_LARGE and entry.data is None


def test_past_the_limit_the_scan_stops_and_says_so(tmp_path: Path) -> None:
    up = tmp_path / "upper"
    up.mkdir()
    for i in range(5):
        (up / str(i)).write_text("x")
    found = upper.scan(str(up), cap=10, limit=3)
    assert len(found.entries) == 3 and found.truncated


def test_an_upper_that_is_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "upper")
    with pytest.raises(OSError):
        upper.scan(str(tmp_path / "upper"), cap=10, limit=10)
