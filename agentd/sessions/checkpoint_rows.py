"""The journal's checkpoint rows: one per writing call (its files' images as JSON), and
each path's image after each call, to find what a later call overwrote.

A row is written when its call has ended (state "done"); a restore's row is written
first with state "restoring" and committed before the workspace is touched (its
intent), then made "done". A start finds the rows a crash left "restoring" and marks
them "interrupted" (each file was written atomically: none is torn).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentd.sessions.store import Store

DONE, RESTORING, INTERRUPTED = "done", "restoring", "interrupted"


def _key(path: str) -> str:
    """A path as the index column holds it: JSON text, so a name that is not UTF-8 (a
    command may make one) is kept exactly and is valid text."""
    return json.dumps(path)


@dataclass(frozen=True, slots=True)
class Row:
    session_id: str
    seq: int
    tool_use_id: str
    tool_name: str
    state: str
    time_ms: int
    body: dict[str, Any]


class CheckpointRows:
    def __init__(self, store: Store) -> None:
        self._store = store

    def next_seq(self, session_id: str) -> int:
        rows = self._store.read_rows(
            "SELECT max(seq) FROM checkpoints WHERE session_id = ?", (session_id,)
        )
        return (rows[0][0] or 0) + 1

    def save(self, row: Row, *, now: bool = False) -> None:
        """The call's row and its files' images after it (replacing an earlier save)."""
        store = self._store
        store.write_row(
            "INSERT OR REPLACE INTO checkpoints "
            "(session_id, seq, tool_use_id, tool_name, state, time_ms, body) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                row.session_id,
                row.seq,
                row.tool_use_id,
                row.tool_name,
                row.state,
                row.time_ms,
                json.dumps(row.body),
            ),
        )
        for entry in row.body.get("files", []) if row.state == DONE else []:
            if entry["after"]["kind"] == "unknown" and entry["before"]["kind"] == "unknown":
                continue  # named only (past a call's cap on paths): nothing to look up
            store.write_row(
                "INSERT OR REPLACE INTO checkpoint_files "
                "(root, path, time_ms, session_id, seq, after) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    _key(entry["root"]),
                    _key(entry["path"]),
                    row.time_ms,
                    row.session_id,
                    row.seq,
                    json.dumps(entry["after"]),
                ),
            )
        if now:
            store.flush()

    def list(self, session_id: str) -> list[Row]:
        rows = self._store.read_rows(
            "SELECT session_id, seq, tool_use_id, tool_name, state, time_ms, body "
            "FROM checkpoints WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
        return [Row(s, q, t, n, st, ms, json.loads(b)) for s, q, t, n, st, ms, b in rows]

    def last_after(self, root: str, path: str) -> dict[str, Any] | None:
        """The image `path` had after the last call (of any session) that changed it."""
        rows = self._store.read_rows(
            "SELECT after FROM checkpoint_files WHERE root = ? AND path = ? "
            "ORDER BY time_ms DESC, seq DESC LIMIT 1",
            (_key(root), _key(path)),
        )
        return json.loads(rows[0][0]) if rows else None

    def blobs_named(self, root: str) -> set[str]:
        """Every content a row of any session names in `root` (what the store keeps)."""
        named: set[str] = set()
        for (body,) in self._store.read_rows("SELECT body FROM checkpoints"):
            for entry in json.loads(body).get("files", []):
                if entry.get("root") != root:
                    continue
                for side in ("before", "after"):
                    if blob := entry.get(side, {}).get("blob"):
                        named.add(blob)
        return named

    def stored_bytes(self, session_id: str) -> int:
        rows = self._store.read_rows(
            "SELECT coalesce(sum(json_extract(body, '$.stored')), 0) FROM checkpoints "
            "WHERE session_id = ?",
            (session_id,),
        )
        return int(rows[0][0] or 0)

    def interrupted(self) -> int:
        """Mark the restores a crash interrupted; how many."""
        rows = self._store.read_rows(
            "SELECT count(*) FROM checkpoints WHERE state = ?", (RESTORING,)
        )
        if rows[0][0]:
            self._store.write_row(
                "UPDATE checkpoints SET state = ? WHERE state = ?",
                (INTERRUPTED, RESTORING),
                now=True,
            )
        return int(rows[0][0])
