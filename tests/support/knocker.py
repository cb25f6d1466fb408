"""A client that connects to a unix socket in a loop and counts what happened, to see a
restart window as a client sees it (tests/api/test_restart_handover.py,
bench/restart_window.py)."""

from __future__ import annotations

import socket
import threading
import time


class Knocker:
    """Connects to `path` every `every` seconds: "ok" when accepted or queued, "refused"
    when the connect fails."""

    def __init__(self, path: str, every: float = 0.02) -> None:
        self.path = path
        self.every = every
        self.counts = {"ok": 0, "refused": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.counts["ok" if connects(self.path) else "refused"] += 1
            time.sleep(self.every)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(10)
        return self.counts


def connects(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(path)
        except OSError:
            return False
    return True
