"""Pre-images from git's index (agentd/changes/gitblobs.py): read-only, and nothing the
repository configures runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from agentd.changes import gitblobs


def git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root)}
    subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=root, env=env, check=True)


def test_index_content_and_modes_and_nothing_configured_runs(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.txt").write_text("from the index\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "run.sh", 0o755)
    os.symlink("a.txt", root / "l")
    git(root, "add", "a.txt", "run.sh", "l")
    marker = tmp_path / "ran"
    git(root, "config", "core.fsmonitor", f"touch {marker}; false")
    (root / "a.txt").write_text("changed since\n")
    index = root / ".git" / "index"
    before = index.stat().st_mtime_ns
    found = gitblobs.blobs(str(root), None, ["a.txt", "run.sh", "l", "untracked", "-x"])
    assert found == {
        "a.txt": (0o100644, b"from the index\n"),
        "run.sh": (0o100755, b"#!/bin/sh\n"),
        "l": (0o120000, b"a.txt"),
    }
    assert not marker.exists() and index.stat().st_mtime_ns == before


def test_not_a_repository_is_nothing(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x")
    assert gitblobs.blobs(str(tmp_path), None, ["a"]) == {}
    assert gitblobs.blobs(str(tmp_path), None, []) == {}


def test_git_supplies_no_pre_image_of_a_code_bearing_file(tmp_path: Path) -> None:
    """The index is the sandbox's to write: its copy of a code-bearing file (a planted
    .envrc staged, then the file changed) must not become what a rewind puts back."""
    from agentd.changes import images
    from agentd.changes.checkpoints import Checkpoints, Pending
    from agentd.sessions.session import SessionManager
    from agentd.sessions.store import Store
    from tests.support.services import config_under

    root = tmp_path / "ws"
    root.mkdir()
    git(root, "init", "-q")
    (root / ".envrc").write_text("planted\n")
    (root / "a.txt").write_text("plain\n")
    git(root, "add", ".envrc", "a.txt")
    config = config_under(tmp_path)
    store = Store(str(tmp_path / "state" / "agentd.db"))
    try:
        checkpoints = Checkpoints(config, SessionManager(store, config))
        items = [
            Pending(str(root), rel, "changed", images.unknown(images.NOT_CAPTURED))
            for rel in (".envrc", "a.txt")
        ]
        checkpoints._images(items, None, checkpoints.budget("s"))
    finally:
        store.close()
    envrc, plain = items
    assert envrc.before == {"kind": "unknown", "why": images.NOT_CAPTURED}
    assert plain.before["from"] == "git" and plain.before["blob"]
