"""A path's image, read beneath the root without following links
(agentd/changes/images.py), and the content-addressed store (blobs.py)."""

from __future__ import annotations

import os
from pathlib import Path

from agentd.changes import images
from agentd.changes.blobs import Blobs


def test_each_kind_of_entry(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    os.chmod(tmp_path / "f", 0o751)
    os.symlink("/etc/passwd", tmp_path / "l")
    (tmp_path / "d").mkdir(mode=0o700)
    os.mkfifo(tmp_path / "fifo")
    assert images.look(str(tmp_path), "f", None, 10) == (
        {"kind": "file", "mode": 0o751, "size": 3},
        b"abc",
    )
    assert images.look(str(tmp_path), "l", None, 10) == (
        {"kind": "link", "target": "/etc/passwd"},
        None,
    )
    assert images.look(str(tmp_path), "d", None, 10)[0] == {"kind": "dir", "mode": 0o700}
    assert images.look(str(tmp_path), "missing", None, 10)[0] == {"kind": "none"}
    # A FIFO is never opened (it could block): not restorable, and why.
    assert images.look(str(tmp_path), "fifo", None, 10)[0] == {
        "kind": "unknown",
        "why": "not restorable: not a regular file",
    }
    assert images.look(str(tmp_path), "/dev/null", None, 10)[0]["kind"] == "unknown"


def test_a_root_that_is_gone_is_said_not_raised(tmp_path: Path) -> None:
    """A task whose workspace was removed before its end: its checkpoint says so."""
    image, content = images.look(str(tmp_path / "gone"), "f", None, 10)
    assert image["kind"] == "unknown" and "workspace root is gone" in image["why"]
    assert content is None


def test_a_device_is_not_restorable_and_not_opened(tmp_path: Path) -> None:
    os.mknod(tmp_path / "zero", 0o600 | 0o020000, os.makedev(1, 5))  # /dev/zero's numbers
    assert images.look(str(tmp_path), "zero", None, 10)[0]["why"] == images.NOT_REGULAR


def test_too_large_says_so_and_keeps_no_content(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 11)
    image, data = images.look(str(tmp_path), "big", None, 10)
    assert image["why"] == images.TOO_LARGE and data is None and not images.restorable(image)


def test_a_link_on_the_way_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "d")
    os.symlink("inner", root / "rel")
    (root / "inner").mkdir()
    (root / "inner" / "x").write_text("x")
    assert images.look(str(root), "d/secret", None, 10) == ({"kind": "none"}, None)
    assert images.look(str(root), "rel/x", None, 10) == ({"kind": "none"}, None)


def test_blobs_are_stored_once_and_checked_on_read(tmp_path: Path) -> None:
    blobs = Blobs(str(tmp_path / "store"))
    sha, added = blobs.put("/ws", b"hello " * 100)
    assert added > 0 and blobs.put("/ws", b"hello " * 100) == (sha, 0)
    assert blobs.get("/ws", sha) == b"hello " * 100
    tiny, _ = blobs.put("/ws", b"a")  # stored raw: zlib would make it larger
    assert blobs.get("/ws", tiny) == b"a"
    path = tmp_path / "store" / os.listdir(tmp_path / "store")[0] / sha[:2] / sha[2:]
    path.write_bytes(b"z" + b"garbage")
    assert blobs.get("/ws", sha) is None  # damaged: missing, never wrong
    assert oct(os.stat(tmp_path / "store").st_mode & 0o777) == "0o700"
    assert (
        blobs.keep_only("/ws", {tiny}) == 1 and blobs.has("/ws", tiny) and not blobs.has("/ws", sha)
    )
