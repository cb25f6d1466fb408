"""`agentd backup OUT`: a consistent copy of the state database, made with SQLite's online
backup API while the daemon runs (WAL: it neither waits for the daemon's writes nor
holds them up). Restore: stop the daemon, put the copy in place of STATE/agentd.db
(remove agentd.db-wal and agentd.db-shm beside it), start the daemon. The copy has a
journal id of its own, so the start takes it as the database it now is."""

from __future__ import annotations

import os
import sqlite3
import uuid

from agentd.foundation.config import Config


def backup(config: Config, out: str) -> dict[str, object]:
    """Copy the database to `out` (a new file: an existing one is refused); what was
    copied. OSError or sqlite3.Error say why it could not be made."""
    source_path = config.db_path
    if not os.path.exists(source_path):
        raise FileNotFoundError(f"no state database at {source_path}; check --state-dir")
    if os.path.lexists(out):
        raise FileExistsError(f"{out} exists; give a new file name")
    tmp = f"{out}.partial"
    source = sqlite3.connect(f"file:{source_path}?mode=ro", uri=True)
    try:
        target = sqlite3.connect(tmp)
        try:
            source.backup(target)
            # An id of its own: restored in place of the database it copies, it is
            # known as another database, not as that one missing its later commits
            # (sessions/commit_mark.py).
            target.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('journal_id', ?)",
                (uuid.uuid4().hex,),
            )
            target.commit()
            verdict = target.execute("PRAGMA quick_check").fetchone()[0]
            sessions = target.execute("SELECT count(*) FROM sessions").fetchone()[0]
        finally:
            target.close()
    finally:
        source.close()
    if verdict != "ok":
        os.unlink(tmp)
        raise OSError(f"the copy does not check out ({verdict}); try again")
    os.chmod(tmp, 0o600)
    os.rename(tmp, out)
    return {"path": out, "bytes": os.path.getsize(out), "sessions": sessions}
