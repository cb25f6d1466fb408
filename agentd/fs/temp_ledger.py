"""The temp files of atomic writes, recorded so that a crash never leaves one for good.

Write and Edit write a temp file beside the target (`.NAME.agentd-PID-HEX.tmp`) and
rename it over the target. A daemon killed in between leaves the temp file in the
workspace (50 MB of it for a big Write). Each one is recorded here before it is made
(the directory and name), then with its device and inode once it exists, and marked
done after the rename. At the next start the daemon removes the temp files that were
never marked done, and only those: found beneath the workspace root as the identity
that made them, never through a symlink, and only when the name still holds the very
file it made (same device and inode), so a file a workspace planted under that name is
left alone. (A crash in the microseconds between making the file and recording its
inode leaves an entry without one: its name is then removed only if it holds a file of
one link owned by that identity.)

The ledger is one append-only file the daemon opened at start: a write acting as a
session's identity (which cannot open the state dir) still records through the open
descriptor. It is emptied whenever no write is pending, so it stays small.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import threading
import uuid
from collections.abc import Callable
from typing import Any

from agentd.fs import reserve

log = logging.getLogger(__name__)

# Every temp name made by an atomic write matches this shape (see fsaccess).
TEMP_SUFFIX = ".tmp"


class TempLedger:
    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._lock = threading.Lock()
        self._pending: set[str] = set()

    def close(self) -> None:
        os.close(self._fd)

    def _append(self, record: dict[str, Any]) -> None:
        # One write() per line on an O_APPEND descriptor: lines of concurrent writers
        # never interleave. The daemon's own state: it may use the disk's reserve, even
        # from a thread acting as a session (fs/reserve.py).
        with reserve.as_daemon():
            os.write(self._fd, (json.dumps(record) + "\n").encode())

    def begin(self, root: str, rel_dir: str, name: str, identity: Any) -> str:
        """Record a temp file about to be made; the token names it in later calls."""
        token = uuid.uuid4().hex
        ident = [identity.uid, identity.gid] if identity is not None else None
        with self._lock:
            self._pending.add(token)
            self._append({"t": token, "root": root, "dir": rel_dir, "name": name, "as": ident})
        return token

    def made(self, token: str, st: os.stat_result) -> None:
        with self._lock:
            self._append({"t": token, "dev": st.st_dev, "ino": st.st_ino})

    def done(self, token: str) -> None:
        with self._lock:
            self._pending.discard(token)
            with contextlib.suppress(OSError):  # a full disk: the sweep finds it gone
                if self._pending:
                    self._append({"t": token, "done": True})
                else:
                    os.ftruncate(self._fd, 0)  # nothing pending: the ledger starts over

    def sweep(self, remove: Callable[[dict[str, Any]], bool]) -> int:
        """At start: `remove(entry)` for each temp file a crash left (an entry with no
        done mark); then the ledger is emptied. The number removed."""
        with self._lock:
            entries: dict[str, dict[str, Any]] = {}
            with open(self.path, "rb") as f:
                for line in f:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue  # a line a crash cut short
                    token = record.get("t")
                    if record.get("done"):
                        entries.pop(token, None)
                    elif token in entries:
                        entries[token].update(record)
                    elif "root" in record:
                        entries[token] = record
            removed = 0
            for entry in entries.values():
                try:
                    removed += remove(entry)
                except OSError as exc:
                    log.warning("could not remove the temp file %s: %s", entry["name"], exc)
            os.ftruncate(self._fd, 0)
            return removed


def remove_left_temp(entry: dict[str, Any], open_dir: Callable[..., Any]) -> bool:
    """Remove one recorded temp file if the name still holds the file we made.

    `open_dir(root, rel_dir, identity)` is a context manager giving a descriptor of the
    directory, opened beneath the root as the identity (fsaccess does that)."""
    name = entry["name"]
    if "/" in name or not name.startswith(".") or not name.endswith(TEMP_SUFFIX):
        return False  # not a name we make: a damaged ledger, never act on it
    with contextlib.ExitStack() as stack:
        try:
            dir_fd = stack.enter_context(open_dir(entry["root"], entry["dir"], entry["as"]))
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return False
        if not stat.S_ISREG(st.st_mode):
            return False
        if "ino" in entry:
            if (st.st_dev, st.st_ino) != (entry["dev"], entry["ino"]):
                return False
        else:
            # Killed between making it and recording which file it is (microseconds): a
            # file of one link owned by the identity it was made as is taken for ours.
            # At worst that removes a name in the workspace the identity could remove.
            owner = entry["as"][0] if entry.get("as") else os.geteuid()
            if st.st_nlink != 1 or st.st_uid != owner:
                return False
        os.unlink(name, dir_fd=dir_fd)
        return True
    return False
