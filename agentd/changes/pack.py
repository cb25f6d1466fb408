"""One capture's copies (capture.py): a single file of the daemon's own, appended to, each
content zlib-compressed where that makes it smaller, found again by offset and checked
by its SHA-256 on the way out (a damaged record reads as missing, never as wrong
content).

Thousands of small files are one sequential write, not a file and a rename each: the
capture's cost is the reading of the workspace, not the making of the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import zlib
from dataclasses import dataclass

_RAW, _PACKED = b"r", b"z"


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    length: int
    sha: str


class Pack:
    def __init__(self, path: str) -> None:
        """A new pack at `path` (in a private directory of the daemon's state)."""
        self.path = path
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
        self._fd = os.open(path, flags, 0o600)
        self._end = 0

    def add(self, data: bytes) -> Record:
        packed = _PACKED + zlib.compress(data, 1)
        if len(packed) > len(data) + 1:
            packed = _RAW + data
        view = memoryview(packed)
        while view:
            view = view[os.write(self._fd, view) :]
        record = Record(self._end, len(packed), hashlib.sha256(data).hexdigest())
        self._end += len(packed)
        return record

    def get(self, record: Record) -> bytes | None:
        """The content, or None when the pack is gone or the record damaged."""
        try:
            stored = os.pread(self._fd, record.length, record.offset)
            body = stored[1:]
            data = zlib.decompress(body) if stored[:1] == _PACKED else body
        except (OSError, ValueError, zlib.error):
            return None
        return data if hashlib.sha256(data).hexdigest() == record.sha else None

    def remove(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
