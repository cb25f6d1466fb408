"""The write-ahead log never holds the only copy of the journal for long: what was
committed reaches the database file itself within CHECKPOINT_SECONDS, even when the log
stays small and nothing more is written."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from agentd.sessions import store as store_module
from agentd.sessions.store import Store
from tests.support.waiting import wait_until


def _in_main_file(db: Path, copy: Path) -> bool:
    """Whether the database file alone (without its log) holds the session."""
    shutil.copy(db, copy)
    for side in ("-wal", "-shm"):
        copy.with_name(copy.name + side).unlink(missing_ok=True)
    con = sqlite3.connect(copy)
    try:
        return bool(con.execute("SELECT count(*) FROM sessions").fetchone()[0])
    except sqlite3.Error:
        return False
    finally:
        con.close()


def test_committed_writes_reach_the_database_file_in_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "CHECKPOINT_SECONDS", 0.2, raising=False)
    db = tmp_path / "state" / "agentd.db"
    store = Store(str(db))
    try:
        store.save_session("s1", 1, {"id": "s1"})
        store.flush()
        wait_until(lambda: _in_main_file(db, tmp_path / "copy.db"), 30, "a checkpoint")
    finally:
        store.close()
