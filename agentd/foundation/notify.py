"""Telling the service manager how we are: systemd's notify protocol, and its watchdog.

The protocol is one datagram per message, `KEY=VALUE` lines, sent to the unix socket
named by `$NOTIFY_SOCKET` (a path, or `@name` for an abstract address). That is a few
lines, so we speak it ourselves rather than link libsystemd.

The watchdog pings are sent by a task on the event loop, never by a thread: a thread
keeps pinging while the loop is stuck, and a stuck loop is exactly what the watchdog
must catch (every RPC, every tool call and every sandbox waits on the loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def _address(name: str) -> str | bytes:
    # "@name" is an abstract socket: a leading NUL on the wire, no file behind it.
    return b"\0" + name[1:].encode() if name.startswith("@") else name


class Notifier:
    """Sends READY, STATUS, STOPPING, RELOADING and WATCHDOG; a no-op outside systemd."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        name = env.get("NOTIFY_SOCKET", "")
        self._address = _address(name) if name else None
        self._sock: socket.socket | None = None
        self.watchdog_seconds = _watchdog_seconds(env)
        self._watchdog: asyncio.Task[None] | None = None
        if environ is None:
            # The sandboxes and hooks we start must not speak for the daemon.
            for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
                os.environ.pop(key, None)

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def send(self, *lines: str) -> bool:
        """Send one message; never raises and never blocks (a full queue drops it)."""
        if self._address is None:
            return False
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.setblocking(False)
            self._sock.sendto("\n".join(lines).encode(), self._address)
        except OSError as exc:
            log.warning("cannot notify the service manager at %s: %s", self._address, exc)
            return False
        return True

    def ready(self, status: str) -> None:
        self.send("READY=1", f"STATUS={status}", f"MAINPID={os.getpid()}")

    def status(self, text: str) -> None:
        self.send(f"STATUS={text}")

    def reloading(self) -> None:
        # MONOTONIC_USEC lets systemd ≥ 253 (Type=notify-reload) match this to its reload.
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        self.send("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def reloaded(self, status: str) -> None:
        self.send("READY=1", f"STATUS={status}")

    def stopping(self, status: str = "stopping") -> None:
        self.send("STOPPING=1", f"STATUS={status}")

    def start_watchdog(self, status: Callable[[], str] | None = None) -> None:
        """Ping at half the watchdog interval from the running loop; refresh STATUS too."""
        if self.watchdog_seconds and self.enabled and self._watchdog is None:
            self._watchdog = asyncio.ensure_future(self._ping(self.watchdog_seconds / 2, status))

    async def _ping(self, every: float, status: Callable[[], str] | None) -> None:
        last = ""
        while True:
            lines = ["WATCHDOG=1"]
            if status is not None and (now := status()) != last:
                lines.append(f"STATUS={now}")
                last = now
            self.send(*lines)
            await asyncio.sleep(every)

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
            self._watchdog = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _watchdog_seconds(env: dict[str, str] | os._Environ[str]) -> float:
    """The watchdog interval systemd asks of us, or 0 when it asks none of this process."""
    pid = env.get("WATCHDOG_PID")
    if pid and pid != str(os.getpid()):
        return 0.0
    try:
        usec = int(env.get("WATCHDOG_USEC", "0"))
    except ValueError:
        return 0.0
    return usec / 1_000_000 if usec > 0 else 0.0
