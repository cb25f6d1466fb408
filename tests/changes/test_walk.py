"""A root's baseline (agentd/changes/walk.py): its code-bearing files found by one walk,
without following links, and refreshed by stat."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.changes import walk
from agentd.sandboxing.codebearing import table


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="agentd-walk-"))
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def git(*args: str) -> None:
    subprocess.run(["git", "-c", "safe.directory=*", *args], check=True, capture_output=True)


def test_a_walk_finds_them_at_any_depth_and_follows_no_link(root: Path) -> None:
    git("init", "-q", str(root))
    git("-C", str(root), "config", "core.hooksPath", "tools/hooks")
    git("-C", str(root), "config", "core.fsmonitor", "./tools/fsmon.sh --fast")
    git("-C", str(root), "config", "include.path", "../included.gitconfig")
    git("init", "-q", str(root / "vendor" / "lib"))
    git("init", "-q", "--bare", str(root / "mirror.git"))
    (root / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    (root / "tools" / "hooks").mkdir(parents=True)
    (root / "tools" / "hooks" / "pre-push").write_text("#!/bin/sh\n")
    (root / "tools" / "fsmon.sh").write_text("#!/bin/sh\n")
    (root / "included.gitconfig").write_text("[core]\n")
    (root / "app" / ".vscode").mkdir(parents=True)
    (root / "app" / ".vscode" / "launch.json").write_text("{}")
    (root / "pkg").mkdir()
    (root / "pkg" / ".npmrc").write_text("registry=x\n")
    (root / "sub").mkdir()
    (root / "sub" / ".git").write_text("gitdir: ../.git/modules/sub\n")
    outside = Path(tempfile.mkdtemp(prefix="agentd-walk-out-"))
    (outside / ".bashrc").write_text("x\n")
    os.symlink(outside, root / "link")
    try:
        b = walk.scan(str(root), table())
    finally:
        subprocess.run(["rm", "-rf", str(outside)], check=False)
    found = set(b.entries)
    for rel in (
        ".git/config",
        ".git/hooks/pre-commit",
        "vendor/lib/.git/config",
        "mirror.git/config",
        "tools/hooks/pre-push",
        "tools/fsmon.sh",
        "included.gitconfig",
        "app/.vscode/launch.json",
        "pkg/.npmrc",
        "sub/.git",
    ):
        assert rel in found, rel
    assert not any(r.startswith("link/") for r in found)
    assert not any(r.endswith(("HEAD", "description", "index", ".sample")) for r in found)
    assert {".git", "vendor/lib/.git", "mirror.git"} <= b.git_dirs


def test_a_rescan_sees_a_persons_edit_and_keeps_what_a_running_command_touched(
    root: Path,
) -> None:
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text("one")
    (root / "a").mkdir()
    (root / "a" / ".npmrc").write_text("one")
    old = walk.scan(str(root), table())
    (root / ".claude" / "settings.json").write_text("two")
    (root / ".claude" / "settings.local.json").write_text("new")
    (root / "a" / ".npmrc").write_text("two")
    fresh = walk.rescan(old, table(), skip={"a/.npmrc"})
    assert fresh.entries[".claude/settings.json"].content == b"two"
    assert fresh.entries[".claude/settings.local.json"].content == b"new"
    assert fresh.entries["a/.npmrc"].content == b"one"
