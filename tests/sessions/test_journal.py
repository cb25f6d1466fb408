"""agentd/sessions/journal.py: rows written before the journal had versions replay as
they always did (their wire form is the one today's code gave them, kept in
tests/data/journal/unversioned_rows.json), and a journal made before the version column
gets it."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict

from agentd.api.wire import event_to_pb
from agentd.sessions import journal
from agentd.sessions.event_types import CwdChanged, PermissionResolved
from agentd.sessions.events import Event, EventLog, Replay
from agentd.sessions.store import Store

ROWS = Path(__file__).parents[1] / "data" / "journal" / "unversioned_rows.json"

# The events table as the daemon made it before the version column.
OLD_EVENTS = """
CREATE TABLE events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    time_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE open_calls (
    session_id TEXT NOT NULL,
    tool_use_id TEXT NOT NULL,
    name TEXT NOT NULL,
    started_ms INTEGER NOT NULL,
    PRIMARY KEY (session_id, tool_use_id)
);
"""


def _old_journal(path: Path, rows: list[dict[str, Any]]) -> None:
    db = sqlite3.connect(path)
    db.executescript(OLD_EVENTS)
    db.executemany(
        "INSERT INTO events (session_id, seq, time_ms, kind, payload) VALUES (?, ?, ?, ?, ?)",
        [("s1", i, 1000 + i, r["kind"], json.dumps(r["payload"])) for i, r in enumerate(rows, 1)],
    )
    db.commit()
    db.close()


async def _replayed(log: EventLog) -> list[dict[str, Any]]:
    return [
        MessageToDict(event_to_pb(e), preserving_proto_field_name=True) async for e in log.replay(0)
    ]


def test_rows_of_todays_format_replay_to_the_same_wire_events(tmp_path: Path) -> None:
    rows = json.loads(ROWS.read_text())
    _old_journal(tmp_path / "agentd.db", rows)
    store = Store(str(tmp_path / "agentd.db"))
    try:
        got = asyncio.run(_replayed(EventLog("s1", store, Replay())))
        assert len(got) == len(rows)
        for row, wire in zip(rows, got, strict=True):
            assert wire == row["wire"], row["kind"]
    finally:
        store.close()


def test_an_old_journal_gets_the_version_column_and_new_rows_say_theirs(tmp_path: Path) -> None:
    path = tmp_path / "agentd.db"
    _old_journal(path, [{"kind": "cwd_changed", "payload": {"cwd": "/a", "previous": "/"}}])
    store = Store(str(path))
    try:
        log = EventLog("s1", store, Replay())
        log.emit(PermissionResolved(request_id="r", decision="deny", scope="once", decided_by="x"))
        store.flush()
        rows = list(store.events_after("s1", 0))
        assert [(kind, version) for _, _, kind, _, version in rows] == [
            ("cwd_changed", journal.UNVERSIONED),
            ("permission_resolved", journal.VERSION),
        ]
        # A version 2 row holds every field, an empty rule too.
        assert rows[1][3]["rule"] == ""
        decoded = [journal.decode(kind, p, v) for _, _, kind, p, v in rows]
        assert decoded[0] == CwdChanged(cwd="/a", previous="/")
    finally:
        store.close()
    # Opened again: the column is there once, the rows unchanged.
    again = Store(str(path))
    try:
        assert len(list(again.events_after("s1", 0))) == 2
    finally:
        again.close()


def test_a_row_that_cannot_be_read_is_left_out_not_fatal() -> None:
    assert journal.decode("no_such_kind", {}, journal.VERSION) is None
    assert journal.decode("cwd_changed", {"cwd": "/a"}, journal.VERSION) is None
    # Version 1 rows may lack fields: they are read as their defaults.
    assert journal.decode("cwd_changed", {"cwd": "/a"}, journal.UNVERSIONED) == CwdChanged(
        cwd="/a", previous=""
    )
    # A later version's fields this daemon does not know are left out.
    newer = {"cwd": "/a", "previous": "/", "why": "cd"}
    assert journal.decode("cwd_changed", newer, journal.VERSION + 1) == CwdChanged("/a", "/")


def test_old_parts_are_made_new_json_text_and_hex_bytes() -> None:
    old = {
        "name": "Read",
        "duration_ms": 1,
        "result": {
            "tool_use_id": "t",
            "is_error": False,
            "content": [{"type": "image", "media_type": "image/png", "data": "89504e47"}],
            "data_json": '{"n": 1}',
        },
    }
    body = journal.decode("call_finished", old, journal.UNVERSIONED)
    assert body is not None
    wire = event_to_pb(Event(1, "s", 1, body))
    image = wire.call_finished.result.content[0].source
    assert image.data == bytes.fromhex("89504e47") and image.media_type == "image/png"
    assert wire.call_finished.result.data.struct_value.fields["n"].number_value == 1
