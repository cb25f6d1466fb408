"""Sessions in SQLite: the body, and what the session has read, row by row."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

from agentd.foundation.config import Config
from agentd.sessions.session import FileState, SessionManager
from agentd.sessions.store import Store


def _manager(state_dir: Path) -> tuple[Store, SessionManager]:
    config = Config.load(None, socket_path=str(state_dir / "s.sock"), state_dir=str(state_dir))
    store = Store(config.db_path)
    return store, SessionManager(store, config)


def test_read_state_round_trips_and_saves_only_what_changed(tmp_path: Path) -> None:
    store, sessions = _manager(tmp_path / "state")
    ws = tmp_path / "ws"
    ws.mkdir()
    session = sessions.create([str(ws)], env={"A": "1"})
    for i in range(100):
        session.read_state[f"/w/f{i}"] = FileState(f"h{i}", i, i)
    sessions.save(session)
    assert session.read_state.changed == set()

    written: list[int] = []
    save = store.save_read_state
    store.save_read_state = lambda sid, states, removed: (  # type: ignore[method-assign]
        written.append(len(states) + len(removed)),
        save(sid, states, removed),
    )
    session.read_state["/w/f1"] = FileState("new", 7, 7)
    session.read_state.pop("/w/f2")
    sessions.save(session)
    sessions.save(session)  # nothing changed: nothing written
    assert written == [2]
    store.close()

    store, again = _manager(tmp_path / "state")
    loaded = again.get(session.id)
    assert loaded.env == {"A": "1"}
    assert len(loaded.read_state) == 99
    assert loaded.read_state["/w/f1"] == FileState("new", 7, 7)
    assert "/w/f2" not in loaded.read_state
    assert loaded.read_state.changed == set()
    store.close()


def test_a_call_open_at_a_commit_is_in_it_and_one_ended_before_is_never_written(
    tmp_path: Path,
) -> None:
    """What a crash leaves open is what was open at the last commit: a call's row goes
    into the commit that holds its start; a call ended before that commit (most reads)
    costs no row at all, as a row written and deleted within one commit."""
    path = str(tmp_path / "state" / "agentd.db")

    def committed() -> list[tuple[str, str]]:
        with contextlib.closing(sqlite3.connect(path)) as other:
            return sorted(other.execute("SELECT session_id, tool_use_id FROM open_calls"))

    async def run() -> None:
        store = Store(path, flush_delay=3600)  # commits only when flushed here
        statements: list[str] = []
        store._db.set_trace_callback(statements.append)
        store.call_opened("s1", "quick", "Read", 1)
        store.call_closed("s1", "quick")
        store.call_opened("s1", "slow", "Bash", 2)
        store.call_opened("s2", "other", "Bash", 3)
        assert not [s for s in statements if "open_calls" in s]
        store.flush()
        assert committed() == [("s1", "slow"), ("s2", "other")]
        assert sorted(c[:2] for c in store.open_calls()) == [("s1", "slow"), ("s2", "other")]
        store.call_closed("s1", "slow")
        store.call_opened("s3", "late", "Grep", 4)
        # Read before any commit: the calls open now, as the table was read before.
        assert sorted(c[:2] for c in store.open_calls()) == [("s2", "other"), ("s3", "late")]
        store.flush()
        assert committed() == [("s2", "other"), ("s3", "late")]
        store.close()

    asyncio.run(run())
