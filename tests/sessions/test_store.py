"""Sessions in SQLite: the body, and what the session has read, row by row."""

from __future__ import annotations

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
