"""Line diffs as structured hunks, the shape the reference's `structuredPatch` has."""

from __future__ import annotations

import difflib
from typing import Any

NO_NEWLINE = "\\ No newline at end of file"


def _lines(text: str) -> list[str]:
    """Lines with their "\\n" kept; unlike str.splitlines, only "\\n" ends a line."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def structured_patch(old: str, new: str, context: int = 3) -> list[dict[str, Any]]:
    """Hunks {oldStart, oldLines, newStart, newLines, lines} turning `old` into `new`.

    `lines` are " ctx", "-old", "+new" without line ends; a last line without one is
    followed by the unified-diff marker "\\ No newline at end of file".
    """
    a, b = _lines(old), _lines(new)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    hunks: list[dict[str, Any]] = []
    for group in matcher.get_grouped_opcodes(context):
        if all(tag == "equal" for tag, *_ in group):
            continue
        lines: list[str] = []

        def emit(prefix: str, chunk: list[str], lines: list[str] = lines) -> None:
            for line in chunk:
                if line.endswith("\n"):
                    lines.append(prefix + line[:-1])
                else:
                    lines.extend((prefix + line, NO_NEWLINE))

        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                emit(" ", a[i1:i2])
            if tag in ("replace", "delete"):
                emit("-", a[i1:i2])
            if tag in ("replace", "insert"):
                emit("+", b[j1:j2])
        _, i1, _, j1, _ = group[0]
        _, _, i2, _, j2 = group[-1]
        hunks.append(
            {
                "oldStart": i1 + 1,
                "oldLines": i2 - i1,
                "newStart": j1 + 1,
                "newLines": j2 - j1,
                "lines": lines,
            }
        )
    return hunks
