"""agentd/runs/plans.py: a workspace root's protected paths kept between a session's plans,
and walked again whenever what they rest on changed: a protected name made at the root
or in its git dir, .git replaced, the root replaced at its path, a directory mounted
over .git, the code-bearing rules replaced, a change racing the walk."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentd.runs import plans
from agentd.runs.plans import PlanCache
from agentd.sandboxing.protected import sandbox_protection

ROOT = Path(__file__).resolve().parents[2]


def _repo(path: Path) -> Path:
    (path / ".git" / "hooks").mkdir(parents=True)
    (path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (path / ".git" / "config").write_text("[core]\n")
    (path / "src").mkdir()
    (path / ".cargo").mkdir()  # there before: a name made in it changes only its times
    return path


def _cache() -> PlanCache:
    # No racy margin: these tests change the tree right after a walk on purpose.
    return PlanCache(racy_seconds=0)


def test_an_unchanged_root_is_walked_once(tmp_path: Path) -> None:
    root = str(_repo(tmp_path))
    cache = _cache()
    first = cache.protection("s", root, None)
    again = cache.protection("s", root, None)
    assert (cache.walked, cache.reused) == (1, 1)
    assert again.read_only == first.read_only == sandbox_protection(root).read_only
    assert again.pinned == [f"{root}/.git"]
    again.read_only.clear()  # a caller's copy: what is kept stays whole
    assert cache.protection("s", root, None).read_only == first.read_only
    (tmp_path / "src" / "main.py").write_text("print()\n")  # nothing protected: kept
    assert cache.protection("s", root, None).read_only == first.read_only
    assert cache.walked == 1


@pytest.mark.parametrize(
    "change",
    [".envrc", ".cargo/config.toml", ".git/info/attributes", ".git/config.worktree"],
)
def test_a_protected_name_made_is_seen_at_once(tmp_path: Path, change: str) -> None:
    root = str(_repo(tmp_path))
    cache = _cache()
    assert f"{root}/{change}" not in cache.protection("s", root, None).read_only
    target = tmp_path / change
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("x\n")
    assert f"{root}/{change}" in cache.protection("s", root, None).read_only
    assert cache.walked == 2


def test_a_git_dir_replaced_is_seen(tmp_path: Path) -> None:
    root = str(_repo(tmp_path / "ws"))
    cache = _cache()
    assert cache.protection("s", root, None).pinned == [f"{root}/.git"]
    # Moved away, and a worktree's "gitdir:" file put in its place.
    os.rename(f"{root}/.git", tmp_path / "elsewhere")
    Path(f"{root}/.git").write_text("gitdir: /tmp/other\n")
    found = cache.protection("s", root, None)
    assert found.pinned == [] and f"{root}/.git" in found.read_only
    # A link in a git dir's code-bearing place: the whole git dir goes read-only.
    os.unlink(f"{root}/.git")
    os.rename(tmp_path / "elsewhere", f"{root}/.git")
    assert cache.protection("s", root, None).pinned == [f"{root}/.git"]
    os.unlink(f"{root}/.git/config")
    os.symlink("/etc/passwd", f"{root}/.git/config")
    found = cache.protection("s", root, None)
    assert found.pinned == [] and found.read_only == [f"{root}/.git"]
    assert cache.walked == 4 and cache.reused == 0


def test_a_root_replaced_at_its_path_is_a_new_root(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _repo(root)
    cache = _cache()
    assert cache.protection("s", str(root), None).pinned == [f"{root}/.git"]
    os.rename(root, tmp_path / "old")
    root.mkdir()  # a new workspace root at the same path, with no git dir
    (root / ".envrc").write_text("x\n")
    found = cache.protection("s", str(root), None)
    assert found.pinned == [] and found.read_only == [f"{root}/.envrc"]
    # And its link in place of a directory: nothing protected is bound through it.
    shutil.rmtree(root)
    os.symlink(tmp_path / "old", root)
    assert cache.protection("s", str(root), None).pinned == []


def test_other_sessions_and_new_roots_walk_their_own(tmp_path: Path) -> None:
    one, two = str(_repo(tmp_path / "one")), str(_repo(tmp_path / "two"))
    cache = _cache()
    cache.protection("a", one, None)
    cache.protection("b", one, None)
    cache.protection("a", two, None)
    assert cache.walked == 3
    cache.protection("a", one, None)
    assert cache.reused == 1
    cache.forget("a")
    cache.protection("a", one, None)
    assert cache.walked == 4


def test_new_code_bearing_rules_are_a_new_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(_repo(tmp_path))
    cache = _cache()
    cache.protection("s", root, None)
    rules = plans.table()
    monkeypatch.setattr(plans, "table", lambda: type(rules).__new__(type(rules)))
    cache.protection("s", root, None)
    assert cache.walked == 2


def test_a_change_racing_the_walk_is_not_kept(tmp_path: Path) -> None:
    root = str(_repo(tmp_path))
    cache = PlanCache()  # the tree was made just now: within the racy margin
    cache.protection("s", root, None)
    cache.protection("s", root, None)
    assert (cache.walked, cache.reused) == (2, 0)
    # A walk 10 s after the tree's last change: outside the margin, kept.
    later = PlanCache(clock=lambda: time.time_ns() + 10 * 10**9)
    later.protection("s", root, None)
    later.protection("s", root, None)
    assert (later.walked, later.reused) == (1, 1)


_MOUNTED = """
import os, subprocess, sys
from agentd.runs.plans import PlanCache
root, other = sys.argv[1], sys.argv[2]
cache = PlanCache(racy_seconds=0)
assert cache.protection("s", root, None).pinned == [root + "/.git"]
subprocess.run(["mount", "--bind", other, root + "/.git"], check=True)
found = cache.protection("s", root, None)
assert cache.walked == 2, cache.walked
assert root + "/.git/hooks" not in found.read_only, found
print("ok")
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount needs root")
def test_a_directory_mounted_over_the_git_dir_is_seen(tmp_path: Path) -> None:
    root = _repo(tmp_path / "ws")
    other = tmp_path / "other"
    other.mkdir()
    (other / "HEAD").write_text("ref: refs/heads/x\n")
    # In a mount namespace of its own, so the host's mounts are never touched.
    out = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", _MOUNTED]
        + [str(root), str(other)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
