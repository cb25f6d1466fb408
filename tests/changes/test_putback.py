"""Making a path what an image says, beneath the root, never through a link
(agentd/changes/putback.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentd.changes import putback

FILE = {"kind": "file", "mode": 0o640}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim").write_text("keep\n")
    return r


def test_a_file_with_its_exact_mode_and_its_directories_made(root: Path) -> None:
    putback.put(str(root), "a/b/c.txt", FILE, b"data", None, None)
    assert (root / "a/b/c.txt").read_bytes() == b"data"
    assert (root / "a/b/c.txt").stat().st_mode & 0o7777 == 0o640
    assert not [n for n in os.listdir(root / "a/b") if n != "c.txt"]  # no temp file left


def test_a_link_at_the_name_is_replaced_not_followed(root: Path) -> None:
    os.symlink(root.parent / "outside" / "victim", root / "x")
    putback.put(str(root), "x", FILE, b"mine", None, None)
    assert not (root / "x").is_symlink() and (root / "x").read_bytes() == b"mine"
    assert (root.parent / "outside" / "victim").read_text() == "keep\n"


def test_a_link_on_the_way_is_refused(root: Path) -> None:
    os.symlink(root.parent / "outside", root / "d")
    os.symlink("real", root / "rel")
    (root / "real").mkdir()
    for rel in ("d/victim", "rel/new"):
        with pytest.raises(putback.Refused, match="is a link"):
            putback.put(str(root), rel, FILE, b"x", None, None)
    assert (root.parent / "outside" / "victim").read_text() == "keep\n"
    assert not (root / "real" / "new").exists()


def test_kinds_replace_each_other(root: Path) -> None:
    (root / "t").mkdir()
    (root / "t" / "inner").write_text("i")
    putback.put(str(root), "t", FILE, b"now a file", None, None)
    assert (root / "t").read_bytes() == b"now a file"
    putback.put(str(root), "t", {"kind": "dir", "mode": 0o711}, None, None, None)
    assert (root / "t").is_dir() and (root / "t").stat().st_mode & 0o7777 == 0o711
    putback.put(str(root), "t", {"kind": "link", "target": "../elsewhere"}, None, None, None)
    assert os.readlink(root / "t") == "../elsewhere"
    putback.put(str(root), "t", {"kind": "none"}, None, None, None)
    assert not os.path.lexists(root / "t")
    putback.put(str(root), "gone/deeper", {"kind": "none"}, None, None, None)  # nothing there


def test_a_tree_in_the_way_is_removed_without_following_its_links(root: Path) -> None:
    (root / "tree" / "sub").mkdir(parents=True)
    os.symlink(root.parent / "outside", root / "tree" / "sub" / "out")
    putback.put(str(root), "tree", {"kind": "none"}, None, None, None)
    assert not (root / "tree").exists()
    assert (root.parent / "outside" / "victim").read_text() == "keep\n"


def test_a_file_without_its_content_is_refused(root: Path) -> None:
    with pytest.raises(putback.Refused, match="stored copy is missing"):
        putback.put(str(root), "f", FILE, None, None, None)
    assert os.listdir(root) == []
    with pytest.raises(putback.Refused, match="too large"):
        putback.put(
            str(root),
            "f",
            {"kind": "unknown", "why": "not restorable: too large"},
            None,
            None,
            None,
        )
