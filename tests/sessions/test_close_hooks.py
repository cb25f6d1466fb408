"""A session's close steps each run under their own error handling: one that raises is
logged, the steps after it still run, and the session ends closed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentd.foundation.config import Config
from agentd.sessions.session import Session, SessionManager
from agentd.sessions.store import Store


def test_a_close_step_that_raises_leaves_the_session_closed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = Config.load(None, socket_path=str(tmp_path / "s.sock"), state_dir=str(tmp_path))
    store = Store(config.db_path)
    sessions = SessionManager(store, config)
    (tmp_path / "ws").mkdir()
    session = sessions.create([str(tmp_path / "ws")])
    ran: list[str] = []

    async def fails(s: Session) -> None:
        ran.append("first")
        raise RuntimeError("boom")

    async def after(s: Session) -> None:
        ran.append("second")

    sessions.on_close += [fails, after]
    try:
        closed = asyncio.run(sessions.close(session.id))
    finally:
        store.close()
    assert ran == ["first", "second"]
    assert closed.closed
    assert "a close step failed" in caplog.text
