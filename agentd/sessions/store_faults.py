"""What the state database's faults are, in the words a person acts on: a full disk, a
damaged or unusable file, and the identity that tells a replaced file from the one the
daemon opened."""

from __future__ import annotations

import errno
import os
import sqlite3


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
