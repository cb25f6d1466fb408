"""The bottom of a terminal that `agentctl attach` owns: status lines and the pending
prompt, always the last thing on the screen.

Each frame is one write: erase the bottom region, write what goes above it (events and
output, already safe text), draw the bottom again. Nothing is ever printed below the
prompt or over it, so output cannot scroll it away, push it off the screen with blank
lines, or end up on its line; and since every text is sanitized (no escape sequence a
command wrote survives), output cannot clear the screen or move the cursor either.

The bottom's rows are wrapped here, one column short of the width, so the region's
height is known exactly and erasing it never leaves a row behind. The only escape
sequences on the screen are the few written here: cursor up, erase to the end of the
screen, a style, and synchronized-update brackets (ignored by terminals without them).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from agentd_client.terminal import sanitize

_STYLES = {
    "": "",
    "head": "\x1b[1;7m",  # the prompt's header and gutter: output can draw no style
    "bold": "\x1b[1m",
    "dim": "\x1b[2m",
}
_RESET = "\x1b[0m"
_SYNC_ON, _SYNC_OFF = "\x1b[?2026h", "\x1b[?2026l"


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the bottom region: safe text, a style, and a gutter its wrapped rows
    keep."""

    text: str
    style: str = ""
    gutter: str = ""
    gutter_style: str = ""


def wrap(text: str, width: int) -> list[str]:
    """`text` cut into rows of at most `width` columns."""
    rows: list[str] = []
    row: list[str] = []
    used = 0
    for cluster in sanitize.graphemes(text):
        w = sanitize.width(cluster)
        if used + w > width and row:
            rows.append("".join(row))
            row, used = [], 0
        row.append(cluster)
        used += w
    rows.append("".join(row))
    return rows


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class Screen:
    """A terminal's bottom rows: `frame(above, bottom)` writes `above` over them and
    draws `bottom` again, in one write."""

    def __init__(self, fd: int | None = None) -> None:
        self.fd = sys.stdout.fileno() if fd is None else fd
        self._drawn = 0  # rows of the bottom region on the screen now
        self._rows_drawn: list[str] = []

    def size(self) -> tuple[int, int]:
        """(rows, columns), with a usable default where the terminal says 0."""
        try:
            size = os.get_terminal_size(self.fd)
            rows, cols = size.lines, size.columns
        except OSError:
            rows, cols = 0, 0
        return rows or 24, cols or int(os.environ.get("COLUMNS", "0") or 0) or 80

    def _rows(self, bottom: list[Row], height: int, width: int) -> list[str]:
        drawn: list[tuple[str, Row]] = []  # (a row's text, the Row it is part of)
        for row in bottom:
            inner = max(10, width - sanitize.width(row.gutter))
            drawn += [(part, row) for part in wrap(sanitize.line(row.text), inner)]
        if len(drawn) > height:
            # Keep the head and the question (the last rows); say what was cut between.
            keep_tail = max(1, height // 2)
            keep_head = max(0, height - keep_tail - 1)
            cut = len(drawn) - keep_head - keep_tail
            last = drawn[-1][1]
            marker = Row("", "bold", last.gutter, last.gutter_style)
            note = f"… {cut} rows not shown: answer n unless you can read it all"
            inner = max(10, width - sanitize.width(last.gutter))
            drawn = [*drawn[:keep_head], (wrap(note, inner)[0], marker), *drawn[-keep_tail:]]
        out = []
        for text, row in drawn:
            gutter_style = _STYLES[row.gutter_style]
            gutter = f"{gutter_style}{row.gutter}{_RESET if gutter_style else ''}"
            style = _STYLES[row.style]
            out.append(f"{gutter}{style}{text}{_RESET if style else ''}")
        return out

    def frame(self, above: str, bottom: list[Row]) -> None:
        """Write `above` (safe text of whole lines) above the bottom, then draw `bottom`."""
        height, width = self.size()
        rows = self._rows(bottom, max(1, height - 1), max(11, width - 1))
        if not above and rows == self._rows_drawn:
            return  # nothing changed
        parts = [_SYNC_ON]
        if self._drawn:
            # The cursor is at the end of the bottom's last row: to its first, and erase.
            parts.append("\r" + (f"\x1b[{self._drawn - 1}A" if self._drawn > 1 else "") + "\x1b[J")
        if above:
            parts.append(sanitize.text(above))
            if not above.endswith("\n"):
                parts.append("\n")
        parts.append("\n".join(rows))
        parts.append(_SYNC_OFF)
        self._drawn = len(rows)
        self._rows_drawn = rows
        _write_all(self.fd, "".join(parts).encode("utf-8", errors="replace"))

    def clear(self) -> None:
        """Erase the bottom region (at exit: what remains on the screen is history)."""
        self.frame("", [])


class PlainScreen:
    """The same frames for a stdout that is not a terminal: what goes above is printed;
    a prompt once when it appears, and the next text starts on a line of its own."""

    def __init__(self) -> None:
        self._shown_key: object = None
        self._mid_line = False

    def frame(self, above: str, bottom: list[Row], prompt_key: object = None) -> None:
        out = sys.stdout
        if above:
            if self._mid_line:
                out.write("\n")
                self._mid_line = False
            out.write(above if above.endswith("\n") else above + "\n")
        if prompt_key != self._shown_key:
            self._shown_key = prompt_key
            if bottom:
                if self._mid_line:
                    out.write("\n")
                text = "\n".join(sanitize.line(r.gutter + r.text) for r in bottom)
                out.write(text)
                self._mid_line = True
        out.flush()

    def clear(self) -> None:
        if self._mid_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._mid_line = False
