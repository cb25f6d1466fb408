"""The one way agentctl's text reaches a person.

`install()` runs in `agentctl`'s main before any command: from then on `sys.stdout` and
`sys.stderr` (and their `.buffer`) are SafeStreams, which show every control character,
escape sequence and invisible format character written to them as its escape
(agentd_client.terminal.sanitize) and keep newlines and tabs. A command cannot forget to
sanitize: `print` and `write` go through it. The only ways past it, each named for why:

- `json_stdout` is not wrapped at all (`--json`: JSON escapes every control character,
  so the bytes stay exact for programs);
- `raw_stdout()`: the bytes a person asked for (`logs --raw`, `attach --raw`, and the
  MCP protocol on stdout);
- `screen.Screen`, which draws attach's bottom region with sequences of its own around
  text it sanitized.

Fields of one line (names, paths, commands) are formatted with `sanitize.line` by the
commands themselves, so a newline in a field never draws a line of its own.
"""

from __future__ import annotations

import io
import sys
from typing import Any, BinaryIO, TextIO

from agentd_client.terminal import sanitize


class _SafeBuffer(io.RawIOBase):
    """`sys.stdout.buffer` behind a SafeStream: bytes are decoded (invalid UTF-8 as `\\xNN`)
    and shown as safe text."""

    def __init__(self, stream: SafeStream) -> None:
        self._stream = stream
        self._partial = b""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        data = bytes(data)
        # Hold an incomplete UTF-8 character for the next write.
        buf = self._partial + data
        cut = len(buf)
        for back in range(1, min(4, len(buf)) + 1):
            byte = buf[-back]
            if byte & 0xC0 == 0x80:
                continue
            if byte >= 0xC0 and back < (2 if byte < 0xE0 else 3 if byte < 0xF0 else 4):
                cut = len(buf) - back
            break
        self._partial = buf[cut:]
        self._stream.write_safe(sanitize.output(buf[:cut]))
        return len(data)

    def flush(self) -> None:
        if self._partial:
            self._stream.write_safe(sanitize.output(self._partial))
            self._partial = b""
        self._stream.flush()


class SafeStream(io.TextIOBase):
    """A text stream for a person: whatever is written shows as text, never acts."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw
        self._buffer = _SafeBuffer(self)

    @property
    def buffer(self) -> BinaryIO:
        return self._buffer  # type: ignore[return-value]

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.raw.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self.raw.errors

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.write_safe(sanitize.text(s))
        return len(s)

    def write_safe(self, s: str) -> None:
        self.raw.write(s)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()


_original_stdout: TextIO | None = None


def install(*, stdout: bool = True) -> None:
    """Put SafeStreams in front of stderr, and of stdout unless it carries JSON."""
    global _original_stdout
    if not isinstance(sys.stderr, SafeStream):
        sys.stderr = SafeStream(sys.stderr)
    if stdout and not isinstance(sys.stdout, SafeStream):
        _original_stdout = sys.stdout
        sys.stdout = SafeStream(sys.stdout)


def raw_stdout() -> BinaryIO:
    """stdout's bytes as they are, for output a person asked for raw (`--raw`) and for a
    protocol on stdout (`agentctl mcp`). Text already written is flushed first."""
    sys.stdout.flush()
    out = sys.stdout.raw if isinstance(sys.stdout, SafeStream) else sys.stdout
    return out.buffer


def protocol_stdout() -> None:
    """Hand stdout back unwrapped, for a protocol that owns it (`agentctl mcp`)."""
    if isinstance(sys.stdout, SafeStream):
        sys.stdout.flush()
        sys.stdout = sys.stdout.raw


def is_tty(stream: Any = None) -> bool:
    stream = sys.stdout if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
