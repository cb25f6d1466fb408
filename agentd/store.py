"""SQLite persistence: sessions, their event journal, background tasks, and trusted settings.

One connection, owned by the event loop's thread. Commits are grouped: a write
marks the store dirty and a commit follows within `flush_delay` seconds (or at
once on `flush()`), so a tool call does not pay for a commit per event and its reply
does not wait for one. The promise (README, "What survives a crash"): a daemon killed
outright loses at most that window of journal, never a file a tool wrote (those are
written atomically and fsynced before the call answers), never a trust decision
(committed before its reply), nothing on a clean stop (close() commits).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    created_ms INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    time_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS read_state (
    session_id TEXT NOT NULL,
    path TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, path)
);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS trusted_settings (
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    approved_by TEXT NOT NULL,
    approved_ms INTEGER NOT NULL,
    PRIMARY KEY (path, sha256)
);
"""


# The longest a journaled event waits for its commit (see the module docstring).
FLUSH_DELAY = 0.05


class Store:
    def __init__(self, path: str, flush_delay: float = FLUSH_DELAY) -> None:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # Journal pages are read on other threads, each with a read-only connection of
        # its own (WAL: they never block the writer, nor it them).
        self._readers = threading.local()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._db.execute("BEGIN")
        self._flush_delay = flush_delay
        self._flush_handle: asyncio.TimerHandle | None = None
        # session id -> the body last written by this connection (sessions are only
        # written through it), so a save of an unchanged session is skipped
        self._session_bodies: dict[str, str] = {}

    def _dirty(self) -> None:
        if self._flush_handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._flush_handle = loop.call_later(self._flush_delay, self.flush)

    @property
    def dirty(self) -> bool:
        """Written since the last commit (readers on other connections cannot see it yet)."""
        return self._flush_handle is not None

    def flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._db.in_transaction:
            self._db.execute("COMMIT")
        self._db.execute("BEGIN")

    def close(self) -> None:
        self.flush()
        self._db.execute("COMMIT")
        self._db.close()

    # sessions
    def save_session(self, session_id: str, created_ms: int, body: dict[str, Any]) -> None:
        text = json.dumps(body)
        if self._session_bodies.get(session_id) == text:
            return  # unchanged since it was last written: no write, no commit
        self._db.execute(
            "INSERT INTO sessions (id, created_ms, body) VALUES (?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET body = excluded.body",
            (session_id, created_ms, text),
        )
        self._session_bodies[session_id] = text
        self._dirty()

    def load_sessions(self) -> Iterator[dict[str, Any]]:
        for (body,) in self._db.execute("SELECT body FROM sessions ORDER BY created_ms"):
            yield json.loads(body)

    # what each session has read: one row per file, written when it changes
    def save_read_state(
        self, session_id: str, states: dict[str, dict[str, Any]], removed: list[str]
    ) -> None:
        self._db.executemany(
            "INSERT INTO read_state (session_id, path, body) VALUES (?, ?, ?) "
            "ON CONFLICT(session_id, path) DO UPDATE SET body = excluded.body",
            [(session_id, path, json.dumps(body)) for path, body in states.items()],
        )
        self._db.executemany(
            "DELETE FROM read_state WHERE session_id = ? AND path = ?",
            [(session_id, path) for path in removed],
        )
        self._dirty()

    def load_read_state(self, session_id: str) -> dict[str, dict[str, Any]]:
        rows = self._db.execute(
            "SELECT path, body FROM read_state WHERE session_id = ?", (session_id,)
        )
        return {path: json.loads(body) for path, body in rows}

    # events
    def append_event(
        self, session_id: str, seq: int, time_ms: int, kind: str, payload: dict[str, Any] | str
    ) -> None:
        """`payload` as a dict, or as its JSON text already made."""
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self._db.execute(
            "INSERT INTO events (session_id, seq, time_ms, kind, payload) VALUES (?, ?, ?, ?, ?)",
            (session_id, seq, time_ms, kind, text),
        )
        self._dirty()

    def events_after(
        self, session_id: str, after_seq: int, up_to: int | None = None
    ) -> Iterator[tuple[int, int, str, dict[str, Any]]]:
        query = "SELECT seq, time_ms, kind, payload FROM events WHERE session_id = ? AND seq > ?"
        params: list[Any] = [session_id, after_seq]
        if up_to is not None:
            query += " AND seq <= ?"
            params.append(up_to)
        for seq, time_ms, kind, payload in self._db.execute(query + " ORDER BY seq", params):
            yield seq, time_ms, kind, json.loads(payload)

    def events_page(
        self, session_id: str, after_seq: int, up_to: int, max_bytes: int, max_rows: int = 1000
    ) -> list[tuple[int, int, str, dict[str, Any], int]]:
        """Journaled events after `after_seq` up to `up_to`, at most `max_bytes` of payload
        (at least one event) and `max_rows`: (seq, time_ms, kind, payload, size) each.
        Runs on any thread but the event loop's, on a read-only connection of its own:
        only committed events are seen (flush first)."""
        db = getattr(self._readers, "db", None)
        if db is None:
            uri = f"file:{urllib.parse.quote(self.path)}?mode=ro"
            db = sqlite3.connect(uri, uri=True, isolation_level=None)
            self._readers.db = db
        rows = db.execute(
            "SELECT seq, time_ms, kind, payload FROM events WHERE session_id = ? AND seq > ? "
            "AND seq <= ? ORDER BY seq LIMIT ?",
            (session_id, after_seq, up_to, max_rows),
        )
        page: list[tuple[int, int, str, dict[str, Any], int]] = []
        used = 0
        for seq, time_ms, kind, payload in rows:
            page.append((seq, time_ms, kind, json.loads(payload), len(payload)))
            used += len(payload)
            if used >= max_bytes:
                break
        rows.close()
        return page

    def last_event_ms(self, session_id: str) -> int:
        """The time of the session's latest journaled event, 0 if none."""
        row = self._db.execute(
            "SELECT time_ms FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        return row[0] if row else 0

    def last_seq(self, session_id: str) -> int:
        row = self._db.execute(
            "SELECT MAX(seq) FROM events WHERE session_id = ?", (session_id,)
        ).fetchone()
        return row[0] or 0

    # tasks
    def save_task(self, task_id: str, session_id: str, body: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT INTO tasks (id, session_id, body) VALUES (?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET body = excluded.body",
            (task_id, session_id, json.dumps(body)),
        )
        self._dirty()

    def load_tasks(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        if session_id is None:
            rows = self._db.execute("SELECT body FROM tasks")
        else:
            rows = self._db.execute("SELECT body FROM tasks WHERE session_id = ?", (session_id,))
        for (body,) in rows:
            yield json.loads(body)

    # trusted settings content: committed at once, a trust given or revoked must not be lost
    def save_trust(self, path: str, sha256: str, approved_by: str, approved_ms: int) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO trusted_settings (path, sha256, approved_by, approved_ms) "
            "VALUES (?, ?, ?, ?)",
            (path, sha256, approved_by, approved_ms),
        )
        self.flush()

    def delete_trust(self, path: str, sha256: str = "") -> None:
        if sha256:
            self._db.execute(
                "DELETE FROM trusted_settings WHERE path = ? AND sha256 = ?", (path, sha256)
            )
        else:
            self._db.execute("DELETE FROM trusted_settings WHERE path = ?", (path,))
        self.flush()

    def load_trust(self) -> list[dict[str, Any]]:
        rows = self._db.execute(
            "SELECT path, sha256, approved_by, approved_ms FROM trusted_settings ORDER BY path"
        )
        return [{"path": p, "sha256": h, "by": b, "ms": m} for p, h, b, m in rows]
