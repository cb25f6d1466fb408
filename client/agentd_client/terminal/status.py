"""The status lines of running calls, at the bottom of `agentctl attach`'s screen: what
runs, for how long, how much it printed, its last line; and once it ended, how (its exit
status), while its last output is still being shown."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from agentd_client.terminal.screen import Row


@dataclass
class Running:
    name: str  # safe text, as every field here
    what: str
    started_ms: int
    size: int = 0
    last_line: str = ""
    ended: str = ""  # how it ended, while its last output is still being shown


def size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def rows(running: Iterable[Running]) -> list[Row]:
    out = []
    now = time.time() * 1000
    for r in running:
        elapsed = max(0.0, (now - r.started_ms) / 1000)
        printed = f"  {size(r.size)}" if r.size else ""
        if r.ended:
            out.append(Row(f"■ {r.name} {r.what[:60]}  {r.ended} after {elapsed:.0f}s{printed}"))
            continue
        last = f"  {r.last_line[:80]}" if r.last_line else ""
        out.append(Row(f"⏵ {r.name} {r.what[:60]}  {elapsed:.0f}s{printed}{last}", "bold"))
    return out
