"""Command output on its way to a terminal: whole lines, written in frames, and skipped
when it comes faster than the terminal can show it.

A follower hands bytes over as they come; they wait here for the next frame, which
takes them all in one write (never a write per line). A frame shows at most what the
budget allows: the budget refills at `RATE` lines a second up to `BURST` lines, and is
spent on every line shown. A command that prints a few thousand lines shows them all;
one that prints 300,000 in a second shows its first lines, then
"… N lines, see `agentctl logs …`" and its latest lines, frame after frame, so the
terminal never falls behind and a prompt raised meanwhile shows at once. Skipped lines
are never decoded: counting newlines is all they cost.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from agentd_client.terminal import sanitize

# Lines shown at most in one go, and per second over time.
BURST = 2000
RATE = 20000
# When skipping, at least this many of the latest lines are still shown (half a screen,
# where the screen is taller).
TAIL = 12
# A line longer than this is cut (a minified file, a progress bar without newlines).
MAX_LINE = 4000


@dataclass
class _Pending:
    lines: deque[bytes] = field(default_factory=lambda: deque(maxlen=BURST))
    count: int = 0  # complete lines waiting, `lines` holds the latest of them
    partial: bytes = b""


class Budget:
    """Lines a terminal may be sent now: refilled with time, spent on lines shown."""

    def __init__(self, burst: int = BURST, rate: float = RATE) -> None:
        self.burst = burst
        self.rate = rate
        self.left = float(burst)
        self._at = time.monotonic()

    def refill(self) -> int:
        now = time.monotonic()
        self.left = min(self.burst, self.left + (now - self._at) * self.rate)
        self._at = now
        return int(self.left)

    def spend(self, n: int) -> None:
        self.left = max(0.0, self.left - n)


def _cut(line: bytes) -> str:
    if len(line) > MAX_LINE:
        return sanitize.output(line[:MAX_LINE]) + f" … ({len(line) - MAX_LINE} more bytes)"
    return sanitize.output(line)


class Outputs:
    """The output of every followed command, waiting for the next frame."""

    def __init__(self, skip_hint: str) -> None:
        # "agentctl logs -s SESSION {id}": how a person sees what was skipped.
        self.skip_hint = skip_hint
        self._pending: dict[str, _Pending] = {}
        self.skipped = 0  # lines skipped since start (for the record)

    def feed(self, output_id: str, data: bytes) -> None:
        p = self._pending.setdefault(output_id, _Pending())
        data = p.partial + data
        n = data.count(b"\n")
        if not n:
            p.partial = data
            if len(p.partial) > MAX_LINE * 4:  # a line with no end in sight: show it cut
                p.lines.append(p.partial)
                p.count += 1
                p.partial = b""
            return
        head, _, p.partial = data.rpartition(b"\n")
        # Only the lines a frame could show are split out; the rest are only counted.
        latest = head.rsplit(b"\n", BURST)
        if len(latest) > BURST:
            latest = latest[1:]
        p.lines.extend(latest)
        p.count += n

    def end(self, output_id: str) -> None:
        """The output ended: a last line without a newline is a line."""
        p = self._pending.get(output_id)
        if p is not None and p.partial:
            p.lines.append(p.partial)
            p.count += 1
            p.partial = b""

    def waiting(self) -> bool:
        return any(p.count for p in self._pending.values())

    def take(self, budget: Budget, prefix: bool, tail: int = TAIL) -> list[str]:
        """The lines of this frame, safe text; where lines must be left out, a line that
        says how many and where they are, then the latest ones."""
        out: list[str] = []
        left = budget.refill()
        for output_id, p in self._pending.items():
            if not p.count:
                continue
            tag = f"{output_id}│ " if prefix else ""
            if p.count <= left and p.count <= len(p.lines):
                shown = list(p.lines)
            else:
                keep = min(max(TAIL, tail), left, len(p.lines))
                shown = list(p.lines)[len(p.lines) - keep :] if keep else []
                skipped = p.count - keep
                self.skipped += skipped
                hint = self.skip_hint.format(id=output_id)
                out.append(f"{tag}… {skipped:,} lines, see `{hint}`")
            out += [tag + _cut(line) for line in shown]
            budget.spend(len(shown))
            left -= len(shown)
            p.count = 0
            p.lines.clear()
        return out
