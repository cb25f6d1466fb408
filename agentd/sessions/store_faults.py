"""What the state database's faults are, in the words a person acts on: a full disk, a
damaged or unusable file, and the identity that tells a replaced file from the one the
daemon opened."""

from __future__ import annotations

import errno
import os
import sqlite3
import urllib.parse


def is_full(exc: BaseException) -> bool:
    """Whether `exc` says the disk (or the user's quota) is full."""
    if isinstance(exc, sqlite3.OperationalError):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def wal_bytes(path: str) -> int:
    try:
        return os.stat(path + "-wal").st_size
    except FileNotFoundError:
        return 0


def file_identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def damaged(path: str, why: str) -> str:
    why = " ".join(why.replace("*", "").split())[:240]  # one line, whatever SQLite said
    return (
        f"agentd's state database {path} is damaged ({why}); stop agentd, move it aside "
        f"(mv {path} {path}.damaged) and start again with an empty state, or try "
        f"`sqlite3 {path} .recover` to save what it holds"
    )


def unusable(path: str, exc: sqlite3.DatabaseError) -> str:
    text = str(exc)
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return damaged(path, text)
    return (
        f"agentd cannot use its state database {path} ({text}); make it and its directory "
        f"{os.path.dirname(path)} writable by the user agentd runs as (uid {os.getuid()}), "
        "or point --state-dir elsewhere"
    )


# The way out of a start refused for missing history, said by each refusal.
_WAY_OUT = (
    "restore it from a backup (`agentd backup`; see 'What survives a crash' in "
    "docs/operations.md), or start with `agentd serve --accept-journal-loss` to go on "
    "with what it holds"
)


def commits_missing(path: str, held: int, acknowledged: int) -> str:
    return (
        f"agentd's state database {path} lacks {acknowledged - held} of the commits agentd "
        f"acknowledged (it holds {held} of {acknowledged}; its write-ahead log {path}-wal "
        f"is damaged or was removed, so sessions and events are missing): {_WAY_OUT}"
    )


def database_gone(path: str, acknowledged: int) -> str:
    return (
        f"agentd's state database {path} is gone, yet agentd acknowledged {acknowledged} "
        f"commits to it (its sessions and events are missing): {_WAY_OUT}"
    )


def commits_held(path: str) -> tuple[str, int] | None:
    """(journal id, commit count) the database at `path` holds, read without writing
    (a read-only connection neither checkpoints nor removes the log); ("", 0) when it
    holds none (its log lost them, or it is older than the count); None when it cannot
    be read (the writer's open then says why)."""
    try:
        db = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        if not db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
        ).fetchone():
            return "", 0
        rows = dict(
            db.execute("SELECT key, value FROM meta WHERE key IN ('journal_id', 'commits')")
        )
    except sqlite3.Error:
        return None
    finally:
        db.close()
    count = str(rows.get("commits", ""))
    return str(rows.get("journal_id", "")), int(count) if count.isdigit() else 0


def failed_while_running(exc: sqlite3.DatabaseError) -> str:
    """What to say when the database fails under a running daemon's read or write."""
    why = " ".join(str(exc).split())[:200]
    return (
        f"agentd's state database failed ({why}): this request was not done; see "
        "`agentctl status` (database_problem) and agentd's log, and if the database is "
        "damaged stop agentd and restore it from a backup (`agentd backup`)"
    )
