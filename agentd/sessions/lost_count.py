"""The count of events that could not be journaled, kept outside the database that could
not take them: a small file next to it, its blocks allocated when there is room (at
start), then overwritten in place, which needs no new space on a full disk. A restart
reads it back, so the count says every hole the journal has, not those since the start.
"""

from __future__ import annotations

import contextlib
import logging
import os

log = logging.getLogger(__name__)

NAME = "events-unjournaled"
_SIZE = 32


class LostCount:
    def __init__(self, state_dir: str) -> None:
        self.path = os.path.join(state_dir, NAME)
        self.value = 0
        self._fd = -1
        try:
            flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
            self._fd = os.open(self.path, flags, 0o600)
            raw = os.pread(self._fd, _SIZE, 0).split(b"\0", 1)[0].strip()
            self.value = int(raw) if raw.isdigit() else 0
            with contextlib.suppress(OSError):
                os.posix_fallocate(self._fd, 0, _SIZE)
        except OSError as exc:
            log.warning("cannot keep the count of unjournaled events in %s: %s", self.path, exc)

    def set(self, value: int) -> None:
        self.value = value
        if self._fd < 0:
            return
        try:
            os.pwrite(self._fd, str(value).encode().ljust(_SIZE, b"\0"), 0)
        except OSError as exc:  # the count stays right in memory; the log says why
            log.warning("cannot keep the count of unjournaled events: %s", exc)

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
                os.close(self._fd)
            self._fd = -1
