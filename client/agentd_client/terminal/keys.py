"""A person's keys while `agentctl attach` runs on a terminal.

The terminal is put in cbreak mode (no echo, a key at a time; Ctrl-C still interrupts)
so what the person types is drawn by the Screen in the prompt's own row, and redrawn
with it after anything printed above; in line mode the echo would land wherever output
left the cursor, and a redraw would lose it. Restored at exit, whatever happens.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import termios
import tty
from collections.abc import Iterator

# Longer than any answer: the rest of a paste is dropped.
MAX_INPUT = 64


@contextlib.contextmanager
def cbreak(fd: int) -> Iterator[None]:
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd, termios.TCSANOW)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)


class LineEditor:
    """The answer being typed: printable characters, Backspace, Ctrl-U, Ctrl-W; Enter
    submits. Escape sequences (arrow keys…) and other control keys are dropped."""

    def __init__(self) -> None:
        self.text = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
        self._escape = ""  # "" outside a sequence, else the part seen so far

    def clear(self) -> None:
        self.text = ""

    def feed(self, data: bytes) -> list[str]:
        """Take keys; the lines submitted with Enter, in order."""
        done: list[str] = []
        for ch in self._decoder.decode(data):
            if self._escape:
                self._escape += ch
                # ESC x, or ESC [ … final byte, or ESC O x: then the sequence is over.
                if (len(self._escape) == 2 and ch not in "[O") or (
                    len(self._escape) > 2 and ("@" <= ch <= "~" or self._escape[1] == "O")
                ):
                    self._escape = ""
                continue
            if ch == "\x1b":
                self._escape = ch
            elif ch in "\r\n":
                done.append(self.text)
                self.text = ""
            elif ch in "\x7f\x08":
                self.text = self.text[:-1]
            elif ch == "\x15":  # Ctrl-U
                self.text = ""
            elif ch == "\x17":  # Ctrl-W
                self.text = self.text.rstrip().rpartition(" ")[0]
            elif ch.isprintable() and len(self.text) < MAX_INPUT:
                self.text += ch
        return done


def read_keys(fd: int, put: object) -> None:
    """Hand every read of `fd` to `put` until end of input (a thread's loop)."""
    while True:
        try:
            data = os.read(fd, 1024)
        except OSError:
            return
        if not data:
            return
        put(data)  # type: ignore[operator]
