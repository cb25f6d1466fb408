"""SQLite persistence: sessions, their event journal, background tasks, which output file
each Bash call wrote, and trusted settings.

One connection, owned by the event loop's thread. Commits are grouped: a write
marks the store dirty and a commit follows within `flush_delay` seconds (or at
once on `flush()`), so a tool call does not pay for a commit per event and its reply
does not wait for one. The promise (docs/operations.md, "What survives a crash"): a daemon killed
outright loses at most that window of journal, never a file a tool wrote (those are
written atomically and fsynced before the call answers), never a trust decision
(committed before its reply), nothing on a clean stop (close() commits).

A full disk (SQLITE_FULL, ENOSPC, EDQUOT) raises StorageFull from the write that hit
it and sets `full_since`. SQLite may then roll the whole group back: its events are
counted in `unjournaled` (with those refused outright) and logged as lost. Only a
commit that held writes clears `full_since` (an empty one succeeds on a full disk and
proves nothing). Both are logged once a minute at most, not once per event.

The database is checked at start (quick_check) and watched while running: a file that
is not a database, is damaged, cannot be written, or is deleted or replaced under the
daemon is StateDamaged, one line saying what to do; while running it is logged, kept
in `problem` and shown in the status.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from agentd.foundation.errors import StateDamaged, StorageFull
from agentd.sessions import schema, store_faults
from agentd.sessions.commit_mark import CommitMark
from agentd.sessions.lost_count import LostCount

log = logging.getLogger(__name__)

# Seconds between two log lines about a full state disk.
_FULL_LOG_EVERY = 60.0


# Bytes of write-ahead log after which a checkpoint is asked for (SQLite's default
# auto-checkpoint is 1,000 pages, about this).
CHECKPOINT_BYTES = 4 * 1024 * 1024
# Seconds after which what the log holds is copied into the database anyway: the log
# never holds the only copy of the journal for long (a damaged log loses at most this).
CHECKPOINT_SECONDS = 30.0


# The longest a journaled event waits for its commit (see the module docstring).
FLUSH_DELAY = 0.05


class Store:
    def __init__(
        self, path: str, flush_delay: float = FLUSH_DELAY, accept_loss: bool = False
    ) -> None:
        """`accept_loss`: a database that lacks acknowledged commits (commit_mark.py) is
        taken as it is, said in the log, instead of refused."""
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        self.path = path
        # Journal pages are read on other threads, each with a read-only connection of
        # its own (WAL: they never block the writer, nor it them).
        self._readers = threading.local()
        self._mark = CommitMark(os.path.dirname(path))
        # Checked before the database is opened for writing: a refused start leaves the
        # damaged log as it found it (a writer's close would copy what it could read of
        # the log into the database and remove the log).
        self._check_commits(accept_loss)
        try:
            self._db = self._open(path)
            self.journal_id, self._commits = self._commit_count()
        except sqlite3.DatabaseError as exc:
            self._mark.close()
            raise StateDamaged(store_faults.unusable(path, exc)) from None
        except BaseException:
            self._mark.close()
            raise
        self._mark.start()
        self._identity = store_faults.file_identity(path)
        # What is wrong with the database found while running (deleted, replaced,
        # damaged), one line; "" while it is fine.
        self.problem = ""
        # Checkpoints (copying the log into the database, with an fsync each) run on a
        # thread of their own: on the event loop's commit they held it for 100s of ms.
        self._db.execute("PRAGMA wal_autocheckpoint=0")
        self._checkpoint_wanted = threading.Event()
        self._checkpoint_asked = 0.0
        self._uncheckpointed = False  # commits since the last checkpoint
        self._closing = False
        self._checkpointer = threading.Thread(
            target=self._checkpoint_loop, name="wal-checkpoint", daemon=True
        )
        self._checkpointer.start()
        self._db.execute("BEGIN")
        # Writes in the open transaction, and how many of them are journal events: a
        # rollback on a full disk loses them, and they are counted.
        self._pending_writes = 0
        self._pending_events = 0
        # Calls opened since the last commit, by (session id, tool_use_id): their rows
        # (name, started_ms) go into the next one (call_opened).
        self._opening: dict[tuple[str, str], tuple[str, int]] = {}
        self._flush_delay = flush_delay
        self._flush_handle: asyncio.TimerHandle | None = None
        # session id -> the body last written by this connection (sessions are only
        # written through it), so a save of an unchanged session is skipped
        self._session_bodies: dict[str, str] = {}
        # When a write last failed for want of space (time.time()), 0 while writes work.
        self.full_since = 0.0
        self._full_logged = 0.0
        # Events that could not be journaled for want of space, ever (lost_count.py).
        self._lost = LostCount(os.path.dirname(path))
        # Whether the open transaction holds only the probe of a full disk (its commit
        # proves nothing about room for a real write).
        self._probe_only = False

    @property
    def unjournaled(self) -> int:
        """Events that could not be journaled for want of space, across restarts."""
        return self._lost.value

    @unjournaled.setter
    def unjournaled(self, value: int) -> None:
        if value != self._lost.value:
            self._lost.set(value)

    def _check_commits(self, accept_loss: bool) -> None:
        """StateDamaged (one line) when the database lacks commits agentd acknowledged,
        as the count kept outside it says (commit_mark.py); with `accept_loss`, a
        warning instead."""
        mark = self._mark
        if not mark.known or not mark.commits:
            return
        if not os.path.exists(self.path):
            why = store_faults.database_gone(self.path, mark.commits)
        else:
            found = store_faults.commits_held(self.path)
            if found is None:
                return  # unreadable: opening it says why
            journal_id, held = found
            if journal_id and journal_id != mark.journal_id:
                return  # another database (a restored backup): counted afresh
            if held >= mark.commits:
                return
            why = store_faults.commits_missing(self.path, held, mark.commits)
        if not accept_loss:
            mark.close()
            raise StateDamaged(why)
        log.warning("going on with what the state database holds (--accept-journal-loss): %s", why)

    def _commit_count(self) -> tuple[str, int]:
        """(the database's id, its commit count), made for a new database; the count
        outside it starts from there."""
        rows = dict(
            self._db.execute(
                "SELECT key, value FROM meta WHERE key IN ('journal_id', 'commits')"
            ).fetchall()
        )
        journal_id = rows.get("journal_id") or uuid.uuid4().hex
        commits = int(rows["commits"]) if str(rows.get("commits", "")).isdigit() else 0
        if "journal_id" not in rows:
            self._db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('journal_id', ?), ('commits', ?)",
                (journal_id, str(commits)),
            )
        if self._mark.known and self._mark.journal_id != journal_id:
            log.info(
                "state database %s is not the one agentd last wrote (a restored backup?); "
                "its commits are counted from here",
                self.path,
            )
        self._mark.set(journal_id, commits)
        return journal_id, commits

    @staticmethod
    def _open(path: str) -> sqlite3.Connection:
        """The database, checked: StateDamaged (one line) when it cannot be used."""
        fresh = not os.path.exists(path)
        try:
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            had_open_calls = fresh or bool(
                db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'open_calls'"
                ).fetchone()
            )
            # Reads every page once: a damaged database is refused at start, not found
            # later by an Attach that reads the damaged page.
            verdict = [row[0] for row in db.execute("PRAGMA quick_check(5)")]
            if verdict != ["ok"]:
                raise StateDamaged(store_faults.damaged(path, "; ".join(map(str, verdict))[:300]))
            db.executescript(schema.SCHEMA)
            columns = {row[1] for row in db.execute("PRAGMA table_info(events)")}
            if "version" not in columns:
                db.execute(schema.EVENTS_VERSION_COLUMN)
            if not had_open_calls:
                db.execute(schema.OPEN_CALLS_OF_OLD_JOURNAL)
        except sqlite3.DatabaseError as exc:
            raise StateDamaged(store_faults.unusable(path, exc)) from None
        return db

    def check(self) -> str:
        """Whether the database file is still the one opened: "" if so, else what
        happened (one line, logged once). Called periodically (retention's pass)."""
        now = store_faults.file_identity(self.path)
        if now == self._identity or self.problem:
            return self.problem
        if now is None:
            self.problem = (
                f"agentd's state database {self.path} was deleted while agentd runs: what "
                "happens from now on is lost at the next restart, and so is every session; "
                "restore it from a backup, or restart agentd with --accept-journal-loss to begin "
                "an empty one"
            )
        else:
            self.problem = (
                f"agentd's state database {self.path} was replaced by another file while "
                "agentd runs: agentd still writes to the one it opened, which the next start "
                "will not find; put the original back or restart agentd to use the new one"
            )
        log.error("%s", self.problem)
        return self.problem

    def require_writable(self, what: str) -> None:
        """StateDamaged, saying why, when the database is deleted or replaced: `what` (a
        change a client asked for) is refused, not acknowledged into a database the next
        start will not find."""
        if problem := self.check():
            raise StateDamaged(f"{what} refused: {problem}")

    def _full_error(self, exc: BaseException) -> StorageFull:
        return StorageFull(
            f"agentd's state disk is full ({os.path.dirname(self.path)}): {exc}; "
            "free space there (or lower retention_seconds / state_max_bytes)"
        )

    def _note_full(self, exc: BaseException) -> None:
        now = time.time()
        if not self.full_since:
            self.full_since = now
        if now - self._full_logged >= _FULL_LOG_EVERY:
            self._full_logged = now
            log.warning(
                "state disk full (%s): calls that must store something are refused, "
                "events are not journaled until space is freed (%d lost so far)",
                exc,
                self.unjournaled,
            )

    def _write(self, sql: str, params: Any = (), many: bool = False) -> None:
        """A write: a full disk becomes StorageFull (and is noted)."""
        try:
            if many:
                self._db.executemany(sql, params)
            else:
                self._db.execute(sql, params)
            self._pending_writes += 1
        except (sqlite3.OperationalError, OSError) as exc:
            self._rolled_back_if_so()
            self._raise_if_full(exc)
            raise
        finally:
            self._keep_transaction()

    def _rolled_back_if_so(self) -> None:
        """After a failed statement: if SQLite rolled the transaction back, what it held
        is gone. Its events are counted and logged as lost; the sessions' cached bodies
        are forgotten, so their next save writes them again."""
        if self._db.in_transaction:
            return
        lost = self._pending_events
        if self._pending_writes:
            self._session_bodies.clear()
        self._pending_writes = self._pending_events = 0
        # Logged with the full disk's own line (_note_full), once a minute at most.
        self.unjournaled += lost

    def _raise_if_full(self, exc: BaseException) -> None:
        """StorageFull (noted) for a failure for want of space; else nothing (the caller
        re-raises what it caught)."""
        if store_faults.is_full(exc):
            self._note_full(exc)
            raise self._full_error(exc) from None

    def _keep_transaction(self) -> None:
        if not self._db.in_transaction:
            # SQLite may roll the transaction back on SQLITE_FULL: open the next one.
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("BEGIN")

    def _dirty(self) -> None:
        if self._flush_handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._flush_handle = loop.call_later(self._flush_delay, self._flush_later)

    @property
    def dirty(self) -> bool:
        """Written since the last commit (readers on other connections cannot see it yet)."""
        return self._flush_handle is not None

    def flush(self) -> None:
        """Commit now; StorageFull if the disk is full (the writes stay pending)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self._write_openings()
        if self.full_since and not self._pending_writes:
            # An empty commit succeeds on a full disk: write something, so the commit
            # below says whether there is room (for the probe: not yet for a real write).
            self._write(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('probe', ?)",
                (str(time.time()),),
            )
            self._probe_only = True
        wrote = 0 if self._probe_only else self._pending_writes
        self._probe_only = False
        if wrote:
            self._count_commit()
        try:
            if self._db.in_transaction:
                self._db.execute("COMMIT")
            self._pending_writes = self._pending_events = 0
            self._db.execute("BEGIN")
        except (sqlite3.OperationalError, OSError) as exc:
            self._rolled_back_if_so()
            self._raise_if_full(exc)
            raise
        finally:
            self._keep_transaction()
        if wrote:
            self._commits += 1
            self._mark.set(self.journal_id, self._commits)  # outside the database
        now = time.monotonic()
        # The log file keeps its size when SQLite starts it over: asked at most once a
        # second while it is large.
        if (
            wrote
            and now - self._checkpoint_asked > 1.0
            and store_faults.wal_bytes(self.path) > CHECKPOINT_BYTES
        ):
            self._checkpoint_asked = now
            self._checkpoint_wanted.set()
        if wrote:
            self._uncheckpointed = True
        # Only a commit that held real writes says the disk has room again: a probe's
        # few bytes may fit where the write that was refused does not.
        if self.full_since and wrote:
            log.warning(
                "state disk writable again after %.0fs (%d journal events lost meanwhile)",
                time.time() - self.full_since,
                self.unjournaled,
            )
            self.full_since = 0.0

    def _count_commit(self) -> None:
        """The commit about to be made counted in itself (commit_mark.py)."""
        self._write("UPDATE meta SET value = ? WHERE key = 'commits'", (str(self._commits + 1),))

    def _flush_later(self) -> None:
        """The grouped commit: on a full disk it is tried again later, never raised into
        the event loop."""
        self._flush_handle = None
        try:
            self.flush()
        except StorageFull:
            self._dirty()

    def _checkpoint_loop(self) -> None:
        """Copy the log into the database when it grew, and at least every
        CHECKPOINT_SECONDS while commits come (PASSIVE: never waits for, nor blocks, the
        writer or the readers)."""
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            while True:
                asked = self._checkpoint_wanted.wait(CHECKPOINT_SECONDS)
                self._checkpoint_wanted.clear()
                if self._closing:
                    return
                if not asked and not self._uncheckpointed:
                    continue  # nothing committed since the last one
                self._uncheckpointed = False
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:
                    log.warning("state database checkpoint failed: %s", exc)
        finally:
            db.close()

    def close(self) -> None:
        self._closing = True
        self._checkpoint_wanted.set()
        self._checkpointer.join(timeout=30)
        with contextlib.suppress(StorageFull):
            self.flush()
        with contextlib.suppress(sqlite3.Error):
            self._db.execute("COMMIT")
        self._db.close()
        self._lost.close()
        self._mark.close()

    # sessions
    def save_session(self, session_id: str, created_ms: int, body: dict[str, Any]) -> None:
        text = json.dumps(body)
        if self._session_bodies.get(session_id) == text:
            return  # unchanged since it was last written: no write, no commit
        self._write(
            "INSERT INTO sessions (id, created_ms, body) VALUES (?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET body = excluded.body",
            (session_id, created_ms, text),
        )
        self._session_bodies[session_id] = text
        self._dirty()

    def forget_session_body(self, session_id: str) -> None:
        """The row of a session whose creation failed is not there: forget its cache."""
        self._session_bodies.pop(session_id, None)

    def delete_session(self, session_id: str) -> None:
        """Every row of a session: it, its journal, what it read, its tasks. Committed at
        once (deleting frees pages, it needs no new ones beyond the WAL's)."""
        for table, key in schema.SESSION_ROWS:
            self._write(f"DELETE FROM {table} WHERE {key} = ?", (session_id,))
        self._session_bodies.pop(session_id, None)
        self.flush()

    def used_bytes(self) -> int:
        """Bytes of the database in use (its free pages are reused before it grows), plus
        its write-ahead log."""
        page_size = self._db.execute("PRAGMA page_size").fetchone()[0]
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
        try:
            wal = os.stat(self.path + "-wal").st_size
        except FileNotFoundError:
            wal = 0
        return (pages - free) * page_size + wal

    def load_sessions(self) -> Iterator[dict[str, Any]]:
        for (body,) in self._db.execute("SELECT body FROM sessions ORDER BY created_ms"):
            yield json.loads(body)

    # what each session has read: one row per file, written when it changes
    def save_read_state(
        self, session_id: str, states: dict[str, dict[str, Any]], removed: list[str]
    ) -> None:
        if states:
            self._write(
                "INSERT INTO read_state (session_id, path, body) VALUES (?, ?, ?) "
                "ON CONFLICT(session_id, path) DO UPDATE SET body = excluded.body",
                [(session_id, path, json.dumps(body)) for path, body in states.items()],
                many=True,
            )
        if removed:
            self._write(
                "DELETE FROM read_state WHERE session_id = ? AND path = ?",
                [(session_id, path) for path in removed],
                many=True,
            )
        self._dirty()

    def load_read_state(self, session_id: str) -> dict[str, dict[str, Any]]:
        rows = self._db.execute(
            "SELECT path, body FROM read_state WHERE session_id = ?", (session_id,)
        )
        return {path: json.loads(body) for path, body in rows}

    # events
    def append_event(
        self,
        session_id: str,
        seq: int,
        time_ms: int,
        kind: str,
        payload: dict[str, Any] | str,
        version: int,
    ) -> None:
        """`payload` as a dict, or as its JSON text already made; `version`, its format
        (sessions/journal.py)."""
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self._write(
            "INSERT INTO events (session_id, seq, time_ms, kind, payload, version) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (session_id, seq, time_ms, kind, text, version),
        )
        self._pending_events += 1
        self._dirty()

    # calls started and not yet finished: what a crash leaves open (sessions.recovery)
    # A call's row is written with the commit that holds its start, when that commit
    # comes (flush): one that ended before then (most: a Read, a Grep) is never
    # written, as its row would have been written and deleted in the same commit.
    def call_opened(self, session_id: str, tool_use_id: str, name: str, started_ms: int) -> None:
        self._opening[(session_id, tool_use_id)] = (name, started_ms)
        self._dirty()

    def call_closed(self, session_id: str, tool_use_id: str) -> None:
        if self._opening.pop((session_id, tool_use_id), None) is not None:
            return
        self._write(
            "DELETE FROM open_calls WHERE session_id = ? AND tool_use_id = ?",
            (session_id, tool_use_id),
        )
        self._dirty()

    def _write_openings(self) -> None:
        """The rows of the calls still open since the last commit, into this one."""
        if not self._opening:
            return
        rows = [(sid, tid, name, ms) for (sid, tid), (name, ms) in self._opening.items()]
        self._write(
            "INSERT OR REPLACE INTO open_calls (session_id, tool_use_id, name, started_ms) "
            "VALUES (?, ?, ?, ?)",
            rows,
            many=True,
        )
        self._opening.clear()

    def open_calls(self) -> list[tuple[str, str, str, int]]:
        """(session_id, tool_use_id, name, started_ms) of every call left open."""
        self._write_openings()
        return list(
            self._db.execute(
                "SELECT session_id, tool_use_id, name, started_ms FROM open_calls "
                "ORDER BY session_id, started_ms"
            )
        )

    def events_after(
        self, session_id: str, after_seq: int, up_to: int | None = None
    ) -> Iterator[tuple[int, int, str, dict[str, Any], int]]:
        """(seq, time_ms, kind, payload, version) of journaled events, on the loop's thread."""
        query = (
            "SELECT seq, time_ms, kind, payload, version FROM events "
            "WHERE session_id = ? AND seq > ?"
        )
        params: list[Any] = [session_id, after_seq]
        if up_to is not None:
            query += " AND seq <= ?"
            params.append(up_to)
        rows = self._db.execute(query + " ORDER BY seq", params)
        for seq, time_ms, kind, payload, version in rows:
            yield seq, time_ms, kind, json.loads(payload), version

    def events_page(
        self, session_id: str, after_seq: int, up_to: int, max_bytes: int, max_rows: int = 1000
    ) -> list[tuple[int, int, str, dict[str, Any], int, int]]:
        """Journaled events after `after_seq` up to `up_to`, at most `max_bytes` of payload
        (at least one event) and `max_rows`: (seq, time_ms, kind, payload, size, version).
        Runs on any thread but the event loop's, on a read-only connection of its own:
        only committed events are seen (flush first)."""
        page: list[tuple[int, int, str, dict[str, Any], int, int]] = []
        try:
            db = getattr(self._readers, "db", None)
            if db is None:
                uri = f"file:{urllib.parse.quote(self.path)}?mode=ro"
                db = sqlite3.connect(uri, uri=True, isolation_level=None)
                self._readers.db = db
            rows = db.execute(
                "SELECT seq, time_ms, kind, payload, version FROM events WHERE session_id = ? "
                "AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
                (session_id, after_seq, up_to, max_rows),
            )
            used = 0
            for seq, time_ms, kind, payload, version in rows:
                page.append((seq, time_ms, kind, json.loads(payload), len(payload), version))
                used += len(payload)
                if used >= max_bytes:
                    break
            rows.close()
        except (sqlite3.DatabaseError, ValueError) as exc:
            if problem := self.check():  # deleted or replaced: say that, not "damaged"
                raise StateDamaged(f"the journal cannot be read: {problem}") from None
            # Damaged since start (quick_check passed then): one line, no traceback.
            raise StateDamaged(store_faults.damaged(self.path, str(exc)[:200])) from None
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
    def save_task(self, task_id: str, session_id: str, body: Mapping[str, Any]) -> None:
        self._write(
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

    # which output file a Bash call (by its tool_use_id) wrote, for `agentctl logs CALL`
    def save_call_output(self, session_id: str, tool_use_id: str, output_id: str) -> None:
        self._write(
            "INSERT INTO call_outputs (session_id, tool_use_id, output_id) VALUES (?, ?, ?) "
            "ON CONFLICT(session_id, tool_use_id) DO UPDATE SET output_id = excluded.output_id",
            (session_id, tool_use_id, output_id),
        )
        self._dirty()

    def call_output(self, session_id: str, tool_use_id: str) -> str | None:
        row = self._db.execute(
            "SELECT output_id FROM call_outputs WHERE session_id = ? AND tool_use_id = ?",
            (session_id, tool_use_id),
        ).fetchone()
        return row[0] if row else None

    def forget_call_outputs(self, session_id: str) -> None:
        self._write("DELETE FROM call_outputs WHERE session_id = ?", (session_id,))
        self._dirty()

    # rows of a table another module owns (sessions/checkpoint_rows.py)
    def write_row(self, sql: str, params: Any = (), *, now: bool = False) -> None:
        """A write in the grouped commit, or committed before return when `now`."""
        self._write(sql, params)
        if now:
            self.flush()
        else:
            self._dirty()

    def read_rows(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """Rows on the loop's thread (it sees this connection's uncommitted writes)."""
        return list(self._db.execute(sql, params))

    # trusted settings content: committed at once, a trust given or revoked must not be lost
    def save_trust(self, path: str, sha256: str, approved_by: str, approved_ms: int) -> None:
        self.require_writable("Trusting")
        self._write(
            "INSERT OR REPLACE INTO trusted_settings (path, sha256, approved_by, approved_ms) "
            "VALUES (?, ?, ?, ?)",
            (path, sha256, approved_by, approved_ms),
        )
        self.flush()

    def delete_trust(self, path: str, sha256: str = "") -> None:
        self.require_writable("Revoking trust")
        if sha256:
            self._write(
                "DELETE FROM trusted_settings WHERE path = ? AND sha256 = ?", (path, sha256)
            )
        else:
            self._write("DELETE FROM trusted_settings WHERE path = ?", (path,))
        self.flush()

    def load_trust(self) -> list[dict[str, Any]]:
        rows = self._db.execute(
            "SELECT path, sha256, approved_by, approved_ms FROM trusted_settings ORDER BY path"
        )
        return [{"path": p, "sha256": h, "by": b, "ms": m} for p, h, b, m in rows]
