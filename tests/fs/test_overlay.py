"""A review view (agentd/fs/overlay.py): writes land in the upper, the root is left as
it was, and a root named through a link is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentd.fs import overlay
from agentd_sandbox import mounts

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting an overlay needs root")


def test_writes_through_the_view_land_in_the_upper(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir(mode=0o750)
    os.chmod(root, 0o750)
    (root / "a").write_text("a")
    view = overlay.mount(str(root), str(tmp_path / "view"), 1 << 20)
    try:
        merged = Path(view.merged)
        assert (merged / "a").read_text() == "a"
        assert os.stat(merged).st_mode & 0o7777 == 0o750  # the root's own mode
        (merged / "a").write_text("changed")
        (merged / "b").write_text("new")
        fd = os.open(merged, os.O_PATH)
        try:
            assert mounts.is_overlay(fd)
        finally:
            os.close(fd)
        with pytest.raises(OSError, match="space"):  # the layers hold 1 MiB at most
            (merged / "big").write_bytes(b"x" * (2 << 20))
    finally:
        overlay.unmount(view)
    assert (root / "a").read_text() == "a" and not (root / "b").exists()
    assert sorted(os.listdir(view.upper)) == ["a", "b", "big"]
    assert os.stat(os.path.dirname(view.upper)).st_mode & 0o777 == 0o700
    overlay.remove(view)
    assert not os.path.exists(view.dir)


def test_a_root_named_through_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(OSError):
        overlay.mount(str(tmp_path / "link"), str(tmp_path / "view"), 1 << 20)
    assert not os.path.exists(tmp_path / "view")
