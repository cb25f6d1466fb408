"""LS: tree format, what is left out, ignore globs, the cap, and path checks."""

from __future__ import annotations

from pathlib import Path

from agentd.tools.ls import LS


def touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")


async def test_tree_format(call, ws: Path) -> None:
    touch(ws / "b.txt")
    touch(ws / "a/z.py")
    touch(ws / "a/deep/x.py")
    (ws / "empty").mkdir()
    r = await call("LS", {})
    assert not r.is_error
    assert r.text == (
        f"- {ws}/\n  - a/\n    - deep/\n      - x.py\n    - z.py\n  - b.txt\n  - empty/"
    )
    assert r.data["entries"] == ["a/", "b.txt", "empty/", "a/deep/", "a/z.py", "a/deep/x.py"]
    assert r.data["truncated"] is False and r.data["path"] == str(ws)

    r = await call("LS", {"path": "a"})
    assert r.text == f"- {ws}/a/\n  - deep/\n    - x.py\n  - z.py"


async def test_skips_hidden_pycache_and_node_modules_contents(call, ws: Path) -> None:
    touch(ws / ".env")
    touch(ws / ".git/config")
    touch(ws / "pkg/__pycache__/m.pyc")
    touch(ws / "pkg/m.py")
    touch(ws / "node_modules/left/index.js")
    r = await call("LS", {})
    assert r.text == f"- {ws}/\n  - node_modules/\n  - pkg/\n    - m.py"


async def test_ignore_globs(call, ws: Path) -> None:
    touch(ws / "app.log")
    touch(ws / "src/x.log")
    touch(ws / "src/keep.py")
    touch(ws / "build/out.o")
    touch(ws / "src/gen/g.py")
    r = await call("LS", {"ignore": ["*.log", "build", "src/gen"]})
    assert r.text == f"- {ws}/\n  - src/\n    - keep.py"


async def test_symlinks_listed_not_followed(call, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    touch(outside / "secret.txt")
    (ws / "link").symlink_to(outside)
    r = await call("LS", {})
    assert r.text == f"- {ws}/\n  - link"

    r = await call("LS", {"path": "link"})
    assert r.is_error and "outside" in r.text and "secret" not in r.text


async def test_cap_with_note_shallow_first(call, ws: Path) -> None:
    for i in range(600):
        touch(ws / f"top{i:03}.txt")
    for i in range(600):
        touch(ws / f"sub/f{i:03}.txt")
    r = await call("LS", {})
    assert r.data["truncated"] is True and r.data["numEntries"] == 1000
    assert "1000" in r.text.split("\n")[0] and "Glob" in r.text.split("\n")[0]
    assert "  - top599.txt" in r.text  # breadth-first: every top-level entry is kept
    assert "    - f398.txt" in r.text and "f399.txt" not in r.text


async def test_path_errors(call, ws: Path) -> None:
    r = await call("LS", {"path": "nope"})
    assert r.is_error and str(ws / "nope") in r.text and f"directory is {ws}" in r.text
    touch(ws / "f.txt")
    r = await call("LS", {"path": "f.txt"})
    assert r.is_error and "not a directory" in r.text
    r = await call("LS", {"path": "/etc"})
    assert r.is_error and "outside" in r.text
    r = await call("LS", {"ignore": "*.log"})
    assert r.is_error and "ignore" in r.text


async def test_read_only_and_concurrency_safe() -> None:
    assert LS().is_read_only({}) and LS().is_concurrency_safe({})
