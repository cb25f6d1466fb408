"""The Bash tool runs a call the way its permission decision says (ToolContext.sandbox),
whatever the command is: here the tool is called directly, without the classifier, so a
command that writes shows what a read-only run does with a write."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.config import Config
from agentd.sessions import Session
from agentd.store import Store
from agentd.tasks import TaskManager
from agentd.tools.base import ToolContext, ToolResult
from agentd.tools.bash import BashTool
from tests.conftest import SANDBOX_UID


@pytest.fixture
def ws() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="agentd-ws-", dir="/tmp"))
    root.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(root, SANDBOX_UID, SANDBOX_UID)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _run(ws: Path, tmp_path: Path, command: str, sandbox: str) -> ToolResult:
    async def go() -> ToolResult:
        config = Config(socket_path=str(tmp_path / "s.sock"), state_dir=str(tmp_path / "st"))
        store = Store(str(tmp_path / "a.db"))
        try:
            tasks = TaskManager(store, lambda *a: None, 60)
            session = Session(id=f"s-{sandbox}", workspace_roots=[str(ws)], cwd=str(ws))
            state = tmp_path / "state"
            state.mkdir(exist_ok=True)

            async def progress(**kw: object) -> None:
                pass

            ctx = ToolContext(
                session=session,
                tool_use_id="toolu_x",
                state_dir=str(state),
                progress=progress,
                services={"tasks": tasks, "config": config},
            )
            ctx.sandbox = sandbox
            return await BashTool().call({"command": command}, ctx)
        finally:
            store.close()

    return asyncio.run(go())


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
