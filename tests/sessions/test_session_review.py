"""Review mode as a session option (agentd/sessions/session.py): kept, and refused by a
daemon that cannot mount the views it needs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentd.foundation.errors import FailedPrecondition
from agentd.sessions.session import SessionManager
from agentd.sessions.store import Store
from tests.support.services import config_under


def test_review_is_kept_and_needs_a_root_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_under(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    store = Store(str(tmp_path / "a.db"))
    try:
        sessions = SessionManager(store, config)
        if os.geteuid() == 0:
            made = sessions.create([str(ws)], review=True)
            assert made.review and not sessions.create([str(ws)]).review
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
        with pytest.raises(FailedPrecondition, match="create the session without review"):
            sessions.create([str(ws)], review=True)
    finally:
        store.close()
