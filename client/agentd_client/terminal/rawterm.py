"""A person's terminal handed to a process in the sandbox (`agentctl exec -it`,
`agentctl attach-task`): raw mode, the detach key sequence, and the terminal given back.

In raw mode every key goes to the process as typed (Ctrl-C is a byte its terminal turns
into SIGINT, not agentctl's), and its output reaches the person's terminal through an
allow-list (ttyfilter.py): what a program needs to draw passes, what would reach past
the screen (the clipboard, the title, device control strings) does not. Two things keep
the person in charge: the detach sequence (docker's Ctrl-P Ctrl-Q by default) is read
here and never sent, so a process that swallows every key cannot keep them; and on every
way out the terminal's modes are restored and what the task set is undone (the filter's
restore()), without clearing what is on the screen or moving the cursor.
"""

from __future__ import annotations

import contextlib
import os
import termios
import tty
from collections.abc import Callable, Iterator

from agentd_client.core.exits import Usage
from agentd_client.terminal import streams as terminal

DEFAULT_DETACH = "ctrl-p,ctrl-q"


def parse_detach_keys(spec: str) -> bytes:
    """`ctrl-p,ctrl-q` (docker's form: ctrl-<letter or @[\\]^_>, or single characters)."""
    out = bytearray()
    for part in spec.split(","):
        key = part.strip()
        if key.lower().startswith("ctrl-") and len(key) == 6:
            ch = key[5].upper()
            code = ord(ch) ^ 0x40 if ch.isalpha() or ch in "@[\\]^_" else -1
            if code < 0:
                raise Usage(f"--detach-keys: {key!r} is not a control key (ctrl-a .. ctrl-z)")
            out.append(code)
        elif len(key) == 1 and 0x20 <= ord(key) < 0x7F:
            out += key.encode()
        else:
            raise Usage(
                f"--detach-keys: {key!r}: use ctrl-<letter> or one character, comma-separated"
            )
    if not out:
        raise Usage("--detach-keys: give at least one key")
    return bytes(out)


class DetachMatcher:
    """Finds the detach sequence in what is typed. Keys that may start it are held back
    until the next key shows they do not (then sent, in order), as docker does."""

    def __init__(self, sequence: bytes) -> None:
        self.sequence = sequence
        self._held = b""

    def feed(self, data: bytes) -> tuple[bytes, bool]:
        """(bytes to send, whether the person detached)."""
        out = bytearray()
        for byte in data:
            key = bytes([byte])
            candidate = self._held + key
            if not self.sequence.startswith(candidate):
                out += self._held  # not the sequence after all; this key may start it
                candidate = key
            if not self.sequence.startswith(candidate):
                out += candidate
                self._held = b""
            elif candidate == self.sequence:
                self._held = b""
                return bytes(out), True
            else:
                self._held = candidate
        return bytes(out), False


@contextlib.contextmanager
def raw_mode(fd: int, restore: Callable[[], bytes]) -> Iterator[None]:
    """The terminal on `fd` raw while inside; restored, and `restore()` (what undoes the
    task's modes) written to stdout, whatever ends it (an exception, a signal turned into
    one, the task's end)."""
    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd, termios.TCSANOW)
        yield
    finally:
        with contextlib.suppress(OSError):
            termios.tcsetattr(fd, termios.TCSAFLUSH, saved)
        with contextlib.suppress(OSError, ValueError):
            out = terminal.raw_stdout()  # our own sequences, not the task's
            out.write(restore())
            out.flush()


def size(fd: int) -> tuple[int, int] | None:
    """(rows, cols) of the terminal on `fd`, None if it is not one."""
    try:
        cols, rows = os.get_terminal_size(fd)
    except OSError:
        return None
    return (rows, cols) if rows > 0 and cols > 0 else None
