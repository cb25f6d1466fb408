"""The journal's commit count (agentd/sessions/commit_mark.py): a database that lacks
commits the store made is refused at open, one line; a different database (a restored
backup) is counted afresh; `accept_loss` goes on with what is held."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentd.cli import backup
from agentd.foundation.config import Config
from agentd.foundation.errors import StateDamaged
from agentd.sessions.commit_mark import NAME
from agentd.sessions.store import Store


def _commits(store: Store, n: int, prefix: str) -> None:
    for i in range(n):
        store.save_session(f"{prefix}{i}", i, {"id": f"{prefix}{i}"})
        store.flush()


def test_each_commit_is_counted_outside_the_database(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "agentd.db"))
    _commits(store, 3, "s")
    store.flush()  # nothing written: not a commit that counts
    store.close()
    journal_id, count = (tmp_path / NAME).read_bytes().split(b"\0", 1)[0].split()
    assert int(count) == 3 and journal_id.decode() == store.journal_id
    Store(str(tmp_path / "agentd.db")).close()  # nothing missing: it opens


def test_an_older_copy_of_the_same_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "agentd.db"
    store = Store(str(db))
    _commits(store, 1, "a")
    store.close()
    shutil.copy(db, tmp_path / "old.db")
    store = Store(str(db))
    _commits(store, 2, "b")
    store.close()
    shutil.copy(tmp_path / "old.db", db)
    with pytest.raises(StateDamaged) as refused:
        Store(str(db))
    line = str(refused.value)
    assert "\n" not in line and str(db) in line and "lacks 2 of the commits" in line
    assert "--accept-journal-loss" in line
    Store(str(db), accept_loss=True).close()
    Store(str(db)).close()  # counted from what it went on with


def test_a_gone_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "agentd.db"
    store = Store(str(db))
    _commits(store, 1, "a")
    store.close()
    db.unlink()
    with pytest.raises(StateDamaged, match="is gone"):
        Store(str(db))
    assert not db.exists()  # the refusal made no empty database in its place


def test_a_restored_backup_is_another_database(tmp_path: Path) -> None:
    state = tmp_path / "state"
    db = state / "agentd.db"
    store = Store(str(db))
    _commits(store, 1, "a")
    store.flush()
    config = Config(socket_path=str(tmp_path / "s.sock"), state_dir=str(state))
    backup.backup(config, str(tmp_path / "copy.db"))
    _commits(store, 2, "b")
    store.close()
    shutil.copy(tmp_path / "copy.db", db)
    restored = Store(str(db))
    try:
        assert [s["id"] for s in restored.load_sessions()] == ["a0"]
    finally:
        restored.close()
