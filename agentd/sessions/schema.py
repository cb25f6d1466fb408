"""The state database's tables, and what an older journal needs when a table is new."""

from __future__ import annotations

SCHEMA = """
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
    -- the payload's format (sessions/journal.py); 1 for rows from before versions
    version INTEGER NOT NULL DEFAULT 1,
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
CREATE TABLE IF NOT EXISTS call_outputs (
    session_id TEXT NOT NULL,
    tool_use_id TEXT NOT NULL,
    output_id TEXT NOT NULL,
    PRIMARY KEY (session_id, tool_use_id)
);
CREATE TABLE IF NOT EXISTS trusted_settings (
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    approved_by TEXT NOT NULL,
    approved_ms INTEGER NOT NULL,
    PRIMARY KEY (path, sha256)
);
CREATE TABLE IF NOT EXISTS open_calls (
    session_id TEXT NOT NULL,
    tool_use_id TEXT NOT NULL,
    name TEXT NOT NULL,
    started_ms INTEGER NOT NULL,
    PRIMARY KEY (session_id, tool_use_id)
);
-- What each writing call changed (agentd/changes/checkpoints.py): one row per call,
-- its files and their images before and after as JSON; a restore's intent is its row
-- with state 'restoring', written before the workspace is touched.
CREATE TABLE IF NOT EXISTS checkpoints (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    tool_use_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    state TEXT NOT NULL,
    time_ms INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
-- Each path's image after each call, to find the content a later call overwrote.
CREATE TABLE IF NOT EXISTS checkpoint_files (
    root TEXT NOT NULL,
    path TEXT NOT NULL,
    time_ms INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    after TEXT NOT NULL,
    PRIMARY KEY (root, path, session_id, seq)
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

# Calls journaled as started and not as finished, in a journal written before the
# open_calls table existed (found once, when the table is made).
OPEN_CALLS_OF_OLD_JOURNAL = """
INSERT OR IGNORE INTO open_calls (session_id, tool_use_id, name, started_ms)
SELECT s.session_id, json_extract(s.payload, '$.tool_use_id'),
       coalesce(json_extract(s.payload, '$.name'), ''), s.time_ms
FROM events s
WHERE s.kind = 'call_started' AND json_extract(s.payload, '$.tool_use_id') IS NOT NULL
  AND NOT EXISTS (
    SELECT 1 FROM events f
    WHERE f.session_id = s.session_id AND f.kind = 'call_finished' AND f.seq > s.seq
      AND json_extract(f.payload, '$.result.tool_use_id')
          = json_extract(s.payload, '$.tool_use_id'))
"""

# The version column, added to a journal made before it (its rows are version 1).
EVENTS_VERSION_COLUMN = "ALTER TABLE events ADD COLUMN version INTEGER NOT NULL DEFAULT 1"

# The tables holding a session's rows, and the column naming it.
SESSION_ROWS = (
    ("events", "session_id"),
    ("read_state", "session_id"),
    ("tasks", "session_id"),
    ("call_outputs", "session_id"),
    ("open_calls", "session_id"),
    ("checkpoints", "session_id"),
    ("checkpoint_files", "session_id"),
    ("sessions", "id"),
)
