"""The journal's commit count, kept outside the database: what the database must hold at
the next start.

Each commit that holds writes also adds one to a counter in the database's `meta` table
(in the same transaction), and, once it is committed, the same count goes into a small
file beside the database (written in place; fsynced on a thread of its own, so no commit
waits for it). At start the two are compared: a database that counts fewer commits than
the file lost history that was acknowledged (a damaged or removed write-ahead log, which
`PRAGMA quick_check` cannot see: SQLite replays the log up to its first bad frame and
drops the rest without a word).

The file also names the database it counts for (a random id made with the database), so
a different database put in its place (a restored backup: `agentd backup` gives its
copy an id of its own) starts counting afresh instead of being taken for a damaged one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading

log = logging.getLogger(__name__)

NAME = "journal-commits"
_SIZE = 96


class CommitMark:
    """The file (see the module docstring): `journal_id` and `commits` as last written."""

    def __init__(self, state_dir: str) -> None:
        self.path = os.path.join(state_dir, NAME)
        self.journal_id = ""
        self.commits = 0
        self._fd = -1
        self._wanted = threading.Event()
        self._closing = False
        self._syncer: threading.Thread | None = None
        try:
            flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
            self._fd = os.open(self.path, flags, 0o600)
            raw = os.pread(self._fd, _SIZE, 0).split(b"\0", 1)[0].decode("ascii", "replace")
            journal_id, _, count = raw.strip().partition(" ")
            if journal_id and count.isdigit():
                self.journal_id, self.commits = journal_id, int(count)
            with contextlib.suppress(OSError):
                os.posix_fallocate(self._fd, 0, _SIZE)
        except OSError as exc:
            log.warning("cannot keep the journal's commit count in %s: %s", self.path, exc)

    @property
    def known(self) -> bool:
        """Whether the file named a database (it did not exist, or could not be read)."""
        return bool(self.journal_id)

    def start(self) -> None:
        """Its fsyncs begin (a thread of their own)."""
        if self._fd >= 0 and self._syncer is None:
            self._syncer = threading.Thread(target=self._sync_loop, name="commit-mark", daemon=True)
            self._syncer.start()

    def set(self, journal_id: str, commits: int) -> None:
        """The count after a commit: written in place now, fsynced soon after."""
        self.journal_id, self.commits = journal_id, commits
        if self._fd < 0:
            return
        try:
            os.pwrite(self._fd, f"{journal_id} {commits}\n".encode().ljust(_SIZE, b"\0"), 0)
        except OSError as exc:  # the next start checks less; the log says why
            log.warning("cannot keep the journal's commit count in %s: %s", self.path, exc)
            return
        self._wanted.set()

    def _sync_loop(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._fd < 0:
                return
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            if self._closing:
                return

    def close(self) -> None:
        self._closing = True
        self._wanted.set()
        if self._syncer is not None:
            self._syncer.join(timeout=30)
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1
