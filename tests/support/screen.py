"""What a person sees: agentctl on a real pty of a known size, its bytes rendered by a
terminal emulator (pyte) into the screen a person would read.

Waiting here is on bytes arriving (select on the pty), never on the clock.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Callable

import pyte

from tests.support.ctl import AGENTCTL

# The escape sequences agentctl's own screen code writes (agentd_client/terminal/screen.py):
# erase below, styles, synchronized-update brackets. Anything else that starts with ESC
# (or an 8-bit C1 control) on the wire came from somewhere it must not.
_OURS = re.compile(rb"\x1b\[(?:\d*A|J|\?2026[hl]|(?:\d+;)*\d*m)")


def foreign_escapes(raw: bytes) -> list[bytes]:
    """The escape sequences and C1 controls in `raw` that agentctl did not make itself,
    each with a little context."""
    rest = _OURS.sub(b"", raw)
    found = [rest[max(0, m.start() - 10) : m.start() + 12] for m in re.finditer(rb"\x1b", rest)]
    text = rest.decode("utf-8", errors="replace")
    found += [text[i : i + 8].encode() for i, ch in enumerate(text) if 0x80 <= ord(ch) < 0xA0]
    return found


def plain_lines(raw: bytes) -> list[str]:
    """Every line written, agentctl's own escape sequences taken out: for text that has
    scrolled off the screen since."""
    text = _OURS.sub(b"", raw).decode("utf-8", errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


class Terminal:
    """agentctl on a pty of `rows` x `cols`, its controlling terminal, read as a screen."""

    def __init__(
        self,
        *args: str,
        rows: int = 40,
        cols: int = 140,
        env: dict[str, str] | None = None,
        stdin_tty: bool = True,
    ) -> None:
        self.master, slave = pty.openpty()
        self.tty_name = os.ttyname(slave)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        base = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
        base.pop("COLUMNS", None)
        base.pop("LINES", None)
        self.proc = subprocess.Popen(
            ["setsid", "--ctty", AGENTCTL, *args],
            stdin=slave if stdin_tty else subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            close_fds=True,
            env={**base, "TERM": "xterm-256color", **(env or {})},
        )
        os.close(slave)
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = b""

    # reading
    def _pump(self, timeout: float) -> bool:
        """Read what is there (waiting up to `timeout` for the first bytes); False at EOF."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: the other side closed
            return False
        if not chunk:
            return False
        self.raw += chunk
        self.stream.feed(chunk)
        return True

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    def text(self) -> str:
        return "\n".join(self.lines())

    def wait_for(
        self, check: str | Callable[[Terminal], bool], timeout: float = 60, what: str = ""
    ) -> str:
        """Read until the screen shows `check` (a text on it, or a predicate); the screen."""
        test = (lambda t: check in t.text()) if isinstance(check, str) else check
        deadline = time.monotonic() + timeout
        while not test(self):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"the screen never showed {what or check!r}; it shows:\n{self.text()}"
                )
            if not self._pump(min(left, 0.5)) and not test(self):
                raise EOFError(f"agentctl ended; the screen shows:\n{self.text()}")
        return self.text()

    def wait_exit(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._pump(0.2)
        while self._pump(0.05) and select.select([self.master], [], [], 0)[0]:
            pass
        return self.proc.wait(max(0.1, deadline - time.monotonic()))

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def last_line(self) -> str:
        """The last non-empty line on the screen."""
        return next((line for line in reversed(self.lines()) if line.strip()), "")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.master)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
