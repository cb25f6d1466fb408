"""Clients that connect in a loop and count what happened, to see a restart window as a
client sees it: one on the API's unix socket (Knocker), and a sandboxed one on its
session's proxy (PROXY_LOOP) (tests/api/test_restart_handover.py,
tests/network/test_restart_window.py, bench/restart_window.py)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

# A background command: connects to the session's HTTP proxy port, one every 50 ms,
# each noted "ok" or "refused" in the workspace's `log`, until `stop` exists there.
PROXY_LOOP = r"""
port=${http_proxy##*:}; port=${port%%/*}
while [ ! -e stop ]; do
  if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then echo ok; else echo refused; fi >> log
  sleep 0.05
done
"""


def proxy_log(workspace: Path) -> list[str]:
    """What PROXY_LOOP noted so far."""
    try:
        return (workspace / "log").read_text().split()
    except FileNotFoundError:
        return []


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
