"""Glob: the reference's glob_py case, ordering, caps, what is searched, and path checks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentd.tools.glob import Glob
from tests.support.data import TOOL_SCHEMAS

REFERENCE_SCHEMAS = TOOL_SCHEMAS


def write(path: Path, text: str = "", mtime: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


@pytest.fixture
def glob_py(ws: Path) -> Path:
    write(ws / "top.py", "a=1\n", mtime=1_000)
    write(ws / "pkg/b.py", "b=2\n", mtime=2_000)
    write(ws / "pkg/sub/c.py", "c=3\n", mtime=3_000)
    write(ws / "docs/readme.md", "doc\n", mtime=4_000)
    return ws


async def test_reference_glob_py(call, glob_py: Path) -> None:
    r = await call("Glob", {"pattern": "**/*.py"})
    assert not r.is_error
    assert r.text == "top.py\npkg/b.py\npkg/sub/c.py"
    assert r.data["filenames"] == ["top.py", "pkg/b.py", "pkg/sub/c.py"]
    assert r.data["numFiles"] == 3
    assert r.data["truncated"] is False
    assert r.data["totalMatches"] == 3
    assert isinstance(r.data["durationMs"], int)

    r = await call("Glob", {"pattern": "**/*.rs"})
    assert (r.text, r.is_error) == ("No files found", False)
    assert r.data["filenames"] == [] and r.data["numFiles"] == 0

    # A pattern without a slash matches at any depth; paths stay relative to the cwd.
    r = await call("Glob", {"pattern": "*.py", "path": str(glob_py / "pkg")})
    assert r.text == "pkg/b.py\npkg/sub/c.py"


async def test_oldest_first(call, ws: Path) -> None:
    write(ws / "new.py", mtime=3_000)
    write(ws / "old.py", mtime=1_000)
    write(ws / "mid.py", mtime=2_000)
    r = await call("Glob", {"pattern": "*.py"})
    assert r.text == "old.py\nmid.py\nnew.py"


async def test_slash_pattern_is_relative_to_searched_dir(call, glob_py: Path) -> None:
    r = await call("Glob", {"pattern": "sub/*.py", "path": "pkg"})
    assert r.text == "pkg/sub/c.py"
    r = await call("Glob", {"pattern": "pkg/**/*.py"})
    assert r.text == "pkg/b.py\npkg/sub/c.py"
    r = await call("Glob", {"pattern": "*.{md,py}", "path": "docs"})
    assert r.text == "docs/readme.md"


async def test_hidden_gitignored_and_vcs_files_are_found(call, ws: Path) -> None:
    # .git too, as the reference lists it (Grep leaves it out).
    (ws / ".git").mkdir()
    write(ws / ".git/config.py", mtime=500)
    write(ws / ".gitignore", "ignored.py\n")
    write(ws / "ignored.py", mtime=1_000)
    write(ws / ".hidden.py", mtime=2_000)
    write(ws / "node_modules/m/n.py", mtime=3_000)
    r = await call("Glob", {"pattern": "**/*.py"})
    assert r.text == ".git/config.py\nignored.py\n.hidden.py\nnode_modules/m/n.py"


async def test_equal_mtimes_keep_the_walk_order_with_older_directories_first(
    call, ws: Path
) -> None:
    # The reference's order: by mtime, ties in a walk where siblings go oldest first
    # (here b/, then top.txt, then a/), whatever their names.
    for name in ("a/f.txt", "b/f.txt", "top.txt"):
        write(ws / name, mtime=1_000)
    os.utime(ws / "a", (5_000, 5_000))
    os.utime(ws / "b", (500, 500))
    r = await call("Glob", {"pattern": "**/*.txt"})
    assert r.text == "b/f.txt\ntop.txt\na/f.txt"


async def test_empty_and_absolute_patterns(call, ws: Path) -> None:
    write(ws / "d/e/b.txt", mtime=1_000)
    write(ws / "d/a.txt", mtime=2_000)
    write(ws / "top.txt", mtime=3_000)
    assert (await call("Glob", {"pattern": ""})).text == "d/e/b.txt\nd/a.txt\ntop.txt"
    # An absolute pattern searches from its directory part, whatever path says.
    r = await call("Glob", {"pattern": f"{ws}/d/*.txt", "path": str(ws / "d/e")})
    assert r.text == "d/e/b.txt\nd/a.txt"
    r = await call("Glob", {"pattern": f"{ws}/missing/*.txt"})
    assert not r.is_error and r.text == "No files found"


async def test_symlinks_are_not_followed(call, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside / "secret.py")
    (ws / "link").symlink_to(outside)
    (ws / "file_link.py").symlink_to(outside / "secret.py")
    write(ws / "real.py")
    r = await call("Glob", {"pattern": "**/*.py"})
    assert r.text == "real.py"


async def test_capped_at_100_oldest_with_note(call, ws: Path) -> None:
    for i in range(105):
        write(ws / f"d/f{i:03}.txt", mtime=10_000 + i)
    r = await call("Glob", {"pattern": "**/*.txt"})
    lines = r.text.split("\n")
    assert lines[:100] == [f"d/f{i:03}.txt" for i in range(100)]
    assert "100" in lines[100] and "5 more" in lines[100]
    assert r.data["truncated"] is True
    assert r.data["numFiles"] == 100
    assert r.data["totalMatches"] == 105


async def test_cap_keeps_every_tie_at_the_cut_in_walk_order(call, ws: Path) -> None:
    # 98 old files, then 6 sharing the 99th-oldest mtime in several directories: the
    # two shown are the first two of the ties in the reference's order (as Glob lists
    # the ties alone), whichever order rg listed them in.
    for i in range(98):
        write(ws / f"a/f{i:03}.txt", mtime=1_000 + i)
    for name in ("z/y.txt", "b/x.txt", "m/k.txt", "b/a.txt", "c/c.txt", "top.txt"):
        write(ws / name, mtime=5_000)
    write(ws / "late.txt", mtime=9_000)
    ties = await call("Glob", {"pattern": "{z/y,b/x,m/k,b/a,c/c,top}.txt"})
    assert sorted(ties.data["filenames"]) == sorted(
        ["z/y.txt", "b/x.txt", "m/k.txt", "b/a.txt", "c/c.txt", "top.txt"]
    )
    r = await call("Glob", {"pattern": "**/*.txt"})
    assert r.data["filenames"][98:] == ties.data["filenames"][:2]
    assert r.data["totalMatches"] == 105 and r.data["numFiles"] == 100


async def test_path_errors(call, ws: Path, tmp_path: Path) -> None:
    r = await call("Glob", {"pattern": "*", "path": "nope"})
    assert r.is_error and str(ws / "nope") in r.text and f"directory is {ws}" in r.text

    write(ws / "f.py")
    r = await call("Glob", {"pattern": "*", "path": "f.py"})
    assert r.is_error and "not a directory" in r.text

    r = await call("Glob", {"pattern": "*", "path": "/etc"})
    assert r.is_error and "outside" in r.text

    r = await call("Glob", {"pattern": "*", "path": "../"})
    assert r.is_error and "outside" in r.text

    outside = tmp_path / "outside"
    write(outside / "secret.py")
    (ws / "escape").symlink_to(outside)
    r = await call("Glob", {"pattern": "*.py", "path": "escape"})
    assert r.is_error and "outside" in r.text and "secret" not in r.text


async def test_read_only_and_concurrency_safe() -> None:
    tool = Glob()
    assert tool.is_read_only({"pattern": "*"}) and tool.is_concurrency_safe({"pattern": "*"})


@pytest.mark.skipif(not REFERENCE_SCHEMAS.exists(), reason="reference schemas not present")
def test_schema_matches_reference() -> None:
    tools = {t["name"]: t for t in json.loads(REFERENCE_SCHEMAS.read_text())["tools"]}
    assert Glob.input_schema == tools["Glob"]["input_schema"]


def test_mtimes_never_follow_a_directory_swapped_for_a_symlink(ws: Path, tmp_path: Path) -> None:
    """A path rg listed whose directory is a symlink by the time of the stat (swapped
    meanwhile) gets no mtime: the stat never leaves the searched tree through it."""
    from agentd.fs import access as fsaccess
    from agentd.tools import glob
    from agentd.tools.search import ripgrep

    outside = tmp_path / "outside"
    write(outside / "secret.txt", mtime=1)
    write(ws / "real/kept.txt", mtime=2)
    (ws / "swapped").symlink_to(outside)
    root = ripgrep.SearchRoot(str(ws), True, fsaccess.Located(str(ws), str(ws), ".", None))
    listed = [b"real/kept.txt", b"swapped/secret.txt", b"gone/x.txt", b""]
    assert glob._mtimes(root, listed) == [2 * 10**9, None, None, None]
