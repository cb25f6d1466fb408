"""The Bash tool runs a call the way its permission decision says (ToolContext.sandbox),
whatever the command is: here the tool is called directly, without the classifier, so a
command that writes shows what a read-only run does with a write."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentd.tools.base import ToolResult
from tests.tools.direct import call_bash


@pytest.fixture
def ws(workspace: Path) -> Path:
    """A workspace the sandbox's uid can reach (conftest's)."""
    return workspace


def _run(ws: Path, tmp_path: Path, command: str, sandbox: str) -> ToolResult:
    return asyncio.run(call_bash(ws, tmp_path, command, sandbox=sandbox, session_id=f"s-{sandbox}"))


def test_a_read_only_run_refuses_the_write_and_says_so(ws: Path, tmp_path: Path) -> None:
    r = _run(ws, tmp_path, "touch out.txt", "read_only")
    assert r.is_error
    text = r.text_content()
    assert "ran read-only because it was classified read-only" in text, text
    assert "`out.txt`" in text and "ask the user to run it with write access" in text
    assert not (ws / "out.txt").exists()


def test_a_normal_run_writes(ws: Path, tmp_path: Path) -> None:
    r = _run(ws, tmp_path, "touch out.txt && echo ok", "normal")
    assert not r.is_error and "ok" in r.text_content()
    assert (ws / "out.txt").exists()


def test_a_read_only_run_still_changes_directory_and_uses_tmp(ws: Path, tmp_path: Path) -> None:
    (ws / "src").mkdir()
    r = _run(ws, tmp_path, 'cd src && echo x > "$TMPDIR/t" && cat "$TMPDIR/t" && pwd', "read_only")
    assert not r.is_error, r.text_content()
    assert r.text_content().split() == ["x", str(ws / "src")]


def test_a_read_only_run_has_no_network(ws: Path, tmp_path: Path) -> None:
    r = _run(ws, tmp_path, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '", "read_only")
    assert r.text_content().split() == ["lo"], r.text_content()
