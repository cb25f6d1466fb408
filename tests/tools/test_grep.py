"""Grep: the reference's grep_modes and grep_options cases, then every parameter."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from agentd.foundation.errors import ToolError
from agentd.tools.grep import Grep
from agentd.tools.search import ripgrep
from tests.support.data import TOOL_SCHEMAS

REFERENCE_SCHEMAS = TOOL_SCHEMAS


def write(path: Path, text: str, mtime: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


@pytest.fixture
def modes_ws(ws: Path) -> Path:
    write(ws / "src/app.py", 'import os\n\ndef main():\n    print("hello")\n    return 0\n', 1_000)
    write(ws / "src/util.py", "hello = 1\nworld = 2\nhello_again = 3\n", 2_000)
    write(ws / "notes.txt", "nothing here\n", 3_000)
    return ws


async def test_reference_grep_modes(call, modes_ws: Path) -> None:
    r = await call("Grep", {"pattern": "hello"})
    assert not r.is_error
    assert r.text == "Found 2 files\nsrc/util.py\nsrc/app.py"
    assert r.data == {
        "mode": "files_with_matches",
        "filenames": ["src/util.py", "src/app.py"],
        "numFiles": 2,
        "totalFiles": 2,
    }

    r = await call("Grep", {"pattern": "hello", "output_mode": "content", "-n": True, "-C": 1})
    content = (
        "src/app.py-3-def main():\n"
        'src/app.py:4:    print("hello")\n'
        "src/app.py-5-    return 0\n"
        "--\n"
        "src/util.py:1:hello = 1\n"
        "src/util.py-2-world = 2\n"
        "src/util.py:3:hello_again = 3"
    )
    assert r.text == content
    assert r.data == {
        "mode": "content",
        "numFiles": 0,
        "filenames": [],
        "content": content,
        "numLines": 7,
        "totalLines": 7,
    }

    r = await call("Grep", {"pattern": "hello", "output_mode": "count"})
    assert r.text == "src/app.py:1\nsrc/util.py:2\n\nFound 3 total occurrences across 2 files."
    assert r.data == {
        "mode": "count",
        "numFiles": 2,
        "filenames": [],
        "content": "src/app.py:1\nsrc/util.py:2",
        "numMatches": 3,
    }

    r = await call("Grep", {"pattern": "zzz_no_match"})
    assert (r.text, r.is_error) == ("No files found", False)
    assert r.data["filenames"] == [] and r.data["totalFiles"] == 0


@pytest.fixture
def options_ws(ws: Path) -> Path:
    write(ws / "a/x.py", "Foo\nfoo\nbar\n")
    write(ws / "b/y.js", "FOO\n")
    write(ws / "b/z.txt", "foo\n")
    return ws


async def test_reference_grep_options(call, options_ws: Path) -> None:
    r = await call("Grep", {"pattern": "foo", "-i": True, "output_mode": "content"})
    assert r.text == "a/x.py:1:Foo\na/x.py:2:foo\nb/y.js:1:FOO\nb/z.txt:1:foo"
    assert r.data["numLines"] == 4 and "appliedLimit" not in r.data

    r = await call("Grep", {"pattern": "foo", "glob": "*.txt"})
    assert r.text == "Found 1 file\nb/z.txt"

    r = await call("Grep", {"pattern": "foo", "type": "js", "-i": True})
    assert r.text == "Found 1 file\nb/y.js"

    r = await call(
        "Grep",
        {"pattern": "o", "-i": True, "output_mode": "content", "-n": False, "head_limit": 2},
    )
    assert r.text == "a/x.py:Foo\na/x.py:foo\n\n[Showing results with pagination = limit: 2]"
    assert r.data == {
        "mode": "content",
        "numFiles": 0,
        "filenames": [],
        "content": "a/x.py:Foo\na/x.py:foo",
        "numLines": 2,
        "totalLines": 4,
        "appliedLimit": 2,
    }


async def test_gitignore_honoured_in_git_repo_hidden_searched(call, ws: Path) -> None:
    write(ws / ".gitignore", "ignored.txt\n")
    write(ws / "ignored.txt", "foo\n", 1_000)
    write(ws / ".hidden.txt", "foo\n", 2_000)
    write(ws / "kept.txt", "foo\n", 3_000)
    # Outside a git repository rg (and the reference) do not apply .gitignore.
    r = await call("Grep", {"pattern": "foo"})
    assert r.data["filenames"] == ["kept.txt", ".hidden.txt", "ignored.txt"]
    (ws / ".git").mkdir()
    write(ws / ".git/HEAD", "foo\n", 4_000)
    r = await call("Grep", {"pattern": "foo"})
    assert r.data["filenames"] == ["kept.txt", ".hidden.txt"]


async def test_pagination_in_every_mode(call, ws: Path) -> None:
    for i in range(6):
        write(ws / f"f{i}.txt", "foo\n" * (i + 1), 1_000 + i)
    r = await call("Grep", {"pattern": "foo", "head_limit": 2, "offset": 1})
    assert r.text == "Found 2 files limit: 2, offset: 1\nf4.txt\nf3.txt"
    assert r.data["totalFiles"] == 6
    assert (r.data["appliedLimit"], r.data["appliedOffset"]) == (2, 1)

    r = await call("Grep", {"pattern": "foo", "output_mode": "count", "head_limit": 1})
    assert (
        r.text
        == "f0.txt:1\n\nFound 21 total occurrences across 6 files. with pagination = limit: 1"
    )
    assert r.data["numMatches"] == 21 and r.data["appliedLimit"] == 1

    r = await call("Grep", {"pattern": "foo", "output_mode": "content", "offset": 19})
    assert r.text == "f5.txt:5:foo\nf5.txt:6:foo\n\n[Showing results with pagination = offset: 19]"
    assert r.data["appliedOffset"] == 19 and "appliedLimit" not in r.data
    assert (r.data["numLines"], r.data["totalLines"]) == (2, 21)

    # A limit that cuts nothing is not reported.
    r = await call("Grep", {"pattern": "foo", "head_limit": 10})
    assert r.text.startswith("Found 6 files\n") and "appliedLimit" not in r.data


async def test_default_limit_250_and_zero_means_none(call, ws: Path) -> None:
    write(ws / "many.txt", "".join(f"hit {i}\n" for i in range(1, 301)))
    r = await call("Grep", {"pattern": "hit", "output_mode": "content", "path": "many.txt"})
    assert r.text.endswith("250:hit 250\n\n[Showing results with pagination = limit: 250]")
    assert r.text.startswith("1:hit 1\n")  # one file searched: no file name, as rg prints
    assert (r.data["numLines"], r.data["totalLines"], r.data["appliedLimit"]) == (250, 300, 250)

    r = await call(
        "Grep",
        {"pattern": "hit", "output_mode": "content", "path": "many.txt", "head_limit": 0},
    )
    assert r.data["numLines"] == 300 and "appliedLimit" not in r.data

    r = await call("Grep", {"pattern": "hit", "output_mode": "count", "path": "many.txt"})
    assert r.text == "many.txt:300\n\nFound 300 total occurrences across 1 file."


async def test_no_matches_in_content_and_count(call, ws: Path) -> None:
    write(ws / "a.txt", "x\n")
    r = await call("Grep", {"pattern": "zzz", "output_mode": "content"})
    assert (r.text, r.is_error) == ("No matches found", False)
    r = await call("Grep", {"pattern": "zzz", "output_mode": "count"})
    assert r.text == "No matches found\n\nFound 0 total occurrences across 0 files."


async def test_context_flags(call, ws: Path) -> None:
    write(ws / "f.txt", "a\nb\nhit\nc\nd\n")
    args = {"pattern": "hit", "output_mode": "content", "path": "f.txt"}
    r = await call("Grep", {**args, "-A": 1})
    assert r.text == "3:hit\n4-c"
    r = await call("Grep", {**args, "-B": 2})
    assert r.text == "1-a\n2-b\n3:hit"
    r = await call("Grep", {**args, "context": 1, "-C": 2})  # context wins over -C
    assert r.text == "2-b\n3:hit\n4-c"
    r = await call("Grep", {**args, "-C": 1, "-n": False})
    assert r.text == "b\nhit\nc"
    # Context applies to content mode only.
    r = await call("Grep", {"pattern": "hit", "-C": 3, "output_mode": "count"})
    assert r.text.startswith("f.txt:1\n")


async def test_only_matching_multiline_and_dash_pattern(call, ws: Path) -> None:
    write(ws / "src/dash.txt", "-x foo\nfoo bar foo\n")
    write(ws / "src/ml.txt", "a\nb\nfoo\n")
    r = await call("Grep", {"pattern": "fo+", "-o": True, "output_mode": "content", "path": "src"})
    assert r.text == "src/dash.txt:1:foo\nsrc/dash.txt:2:foo\nsrc/dash.txt:2:foo\nsrc/ml.txt:3:foo"

    r = await call("Grep", {"pattern": "a\\nb", "multiline": True, "output_mode": "content"})
    assert r.text == "src/ml.txt:1:a\nsrc/ml.txt:2:b"
    r = await call("Grep", {"pattern": "a.b", "multiline": True})
    assert r.text == "Found 1 file\nsrc/ml.txt"
    r = await call("Grep", {"pattern": "a.b"})
    assert r.text == "No files found"

    r = await call("Grep", {"pattern": "-x", "output_mode": "content"})
    assert (r.text, r.is_error) == ("src/dash.txt:1:-x foo", False)
    r = await call("Grep", {"pattern": "--files", "output_mode": "content"})
    assert r.text == "No matches found"


async def test_glob_param(call, ws: Path) -> None:
    write(ws / "pkg/sub/c.py", "hit\n", 1_000)
    write(ws / "pkg/b.py", "hit\n", 2_000)
    write(ws / "pkg/d.md", "hit\n", 3_000)
    write(ws / "pkg/e.ts", "hit\n", 4_000)
    # Globs with a slash are relative to the searched directory, as in the reference.
    r = await call("Grep", {"pattern": "hit", "glob": "sub/*.py"})
    assert r.text == "No files found"
    r = await call("Grep", {"pattern": "hit", "glob": "sub/*.py", "path": "pkg"})
    assert r.text == "Found 1 file\npkg/sub/c.py"
    r = await call("Grep", {"pattern": "hit", "glob": "*.py,*.md"})
    assert r.data["filenames"] == ["pkg/d.md", "pkg/b.py", "pkg/sub/c.py"]
    r = await call("Grep", {"pattern": "hit", "glob": "*.{md,ts}"})
    assert r.data["filenames"] == ["pkg/e.ts", "pkg/d.md"]


async def test_long_lines_are_cut(call, ws: Path) -> None:
    write(ws / "long.txt", "x" * 600 + "hit\n")
    r = await call("Grep", {"pattern": "hit", "output_mode": "content"})
    assert r.text.startswith("long.txt:1:[Omitted long")
    assert "xxxxxxxxxx" not in r.text


async def test_rg_rejections_are_errors(call, ws: Path) -> None:
    write(ws / "a.txt", "x\n")
    r = await call("Grep", {"pattern": "(", "output_mode": "content"})
    assert r.is_error and "regex parse error" in r.text and "unclosed group" in r.text
    assert not r.text.startswith("<tool_use_error>")  # ran, and rg said no
    r = await call("Grep", {"pattern": "x", "type": "nosuchtype"})
    assert r.is_error and "nosuchtype" in r.text


async def test_bad_numbers_are_input_errors(call, ws: Path) -> None:
    r = await call("Grep", {"pattern": "x", "head_limit": -1})
    assert r.is_error and r.text.startswith("<tool_use_error>") and "head_limit" in r.text
    r = await call("Grep", {"pattern": "x", "-A": 1.5})
    assert r.is_error and "-A" in r.text
    r = await call("Grep", {"pattern": "x", "output_mode": "lines"})
    assert r.is_error and "output_mode" in r.text


async def test_path_errors(call, ws: Path, tmp_path: Path) -> None:
    r = await call("Grep", {"pattern": "x", "path": "nope"})
    assert r.is_error and str(ws / "nope") in r.text and f"directory is {ws}" in r.text
    r = await call("Grep", {"pattern": "root", "path": "/etc"})
    assert r.is_error and "outside" in r.text

    outside = tmp_path / "outside"
    write(outside / "secret.txt", "password\n")
    (ws / "escape").symlink_to(outside)
    (ws / "escape.txt").symlink_to(outside / "secret.txt")
    for path in ("escape", "escape.txt"):
        r = await call("Grep", {"pattern": "password", "path": path})
        assert r.is_error and "outside" in r.text and "secret" not in r.text
    # Walking the workspace does not follow the links either.
    r = await call("Grep", {"pattern": "password"})
    assert r.text == "No files found"


async def test_paths_relative_to_cwd_from_a_subdirectory(call, session, ws: Path) -> None:
    write(ws / "a/one.txt", "hit\n")
    write(ws / "b/two.txt", "hit\n")
    session.cwd = str(ws / "a")
    r = await call("Grep", {"pattern": "hit", "path": str(ws), "output_mode": "content"})
    assert r.text == f"one.txt:1:hit\n{ws}/b/two.txt:1:hit"


async def test_cancellation_kills_rg(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # rg blocks reading it until killed
    cancelled = asyncio.Event()
    cancelled.set()
    with pytest.raises(ToolError, match="cancelled"):
        await asyncio.wait_for(
            ripgrep.run_rg(["-e", "x", "--", "fifo"], str(tmp_path), cancelled), timeout=10
        )


async def test_output_is_bounded(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("hit line\n" * 10_000)
    out = await ripgrep.run_rg(["-e", "hit"], str(tmp_path), asyncio.Event(), max_bytes=1000)
    assert out.truncated and len(out.stdout) <= 1000
    assert out.stdout.endswith(b"\n")


async def test_read_only_and_concurrency_safe() -> None:
    tool = Grep()
    assert tool.is_read_only({"pattern": "x"}) and tool.is_concurrency_safe({"pattern": "x"})


@pytest.mark.skipif(not REFERENCE_SCHEMAS.exists(), reason="reference schemas not present")
def test_schema_matches_reference() -> None:
    tools = {t["name"]: t for t in json.loads(REFERENCE_SCHEMAS.read_text())["tools"]}
    assert Grep.input_schema == tools["Grep"]["input_schema"]


async def test_a_search_past_its_time_limit_returns_what_it_found(
    call, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(50):
        write(ws / f"f{i}.txt", "needle\n")
    monkeypatch.setattr(ripgrep, "MAX_SECONDS", 0.0)
    r = await call("Grep", {"pattern": "needle"})
    assert not r.is_error, r.text
    assert "took longer than 0 s and was stopped; results are incomplete" in r.text


async def test_a_line_break_in_the_pattern_matches_only_in_multiline_mode(call, ws: Path) -> None:
    # rg refuses such a pattern outside multiline mode; no line holds a line break, so
    # (as in the reference) nothing matches. An empty pattern matches every line.
    write(ws / "f.txt", "foo\nbar\n")
    for pattern in ("foo\nbar", "foo\\nbar", "\n", "foo\r\nbar"):
        r = await call("Grep", {"pattern": pattern})
        assert not r.is_error and r.text == "No files found", (pattern, r.text)
    r = await call("Grep", {"pattern": "foo\nbar", "output_mode": "count"})
    assert r.text == "No matches found\n\nFound 0 total occurrences across 0 files."
    r = await call("Grep", {"pattern": "foo\nbar", "multiline": True, "output_mode": "content"})
    assert r.text == "f.txt:1:foo\nf.txt:2:bar"
    r = await call("Grep", {"pattern": "", "output_mode": "count"})
    assert r.text.startswith("f.txt:2\n")
