"""Line diffs as structured hunks, the shape the reference's `structuredPatch` has.

The work is bounded whatever the input. difflib with autojunk off (the most minimal
patch) is cubic on repetitive text: a 5,000-line file of short repeated lines took
193 s. So the common head and tail are cut first (an Edit's change in a large file
leaves a few lines), a small middle is diffed exactly where the call runs, and a large
one in a worker process (agentd.foundation.offload) with difflib's heuristic for long
inputs, under a CPU deadline: past it, the middle becomes one hunk that replaces it
whole, still a correct patch, only coarser.
A large patch comes back inside the call's whole result data, with that data's JSON
text (for the journal) and protobuf wire form (for the reply) made in the worker too
(structs.EncodedDict): the event loop copies bytes instead of encoding a patch of tens of
thousands of lines twice (~8 ms each for a 5,000-line Write; bench/fairness.py).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import signal
from collections.abc import Iterator
from typing import Any

from agentd.foundation import offload
from agentd_client.core import structs

NO_NEWLINE = "\\ No newline at end of file"
# Below this many line pairs in the differing middle, a patch costs at most a few
# milliseconds even on repetitive text: it is made where the call runs.
INLINE_PAIRS = 100 * 100
# CPU seconds a worker spends on one patch before it settles for the coarse one.
PATCH_SECONDS = 2.0
# Where a tool's result data holds the patch, as the reference names it.
PATCH_KEY = "structuredPatch"


def _lines(text: str) -> list[str]:
    """Lines with their "\\n" kept; unlike str.splitlines, only "\\n" ends a line."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _common_ends(a: list[str], b: list[str]) -> tuple[int, int]:
    """How many lines `a` and `b` share at their start, and then at their end."""
    limit = min(len(a), len(b))
    head = 0
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return head, tail


def inline_ok(old: str, new: str) -> bool:
    """Whether the patch of `old` into `new` is cheap enough to make on the event loop:
    few enough line pairs whatever their content (counted in C, not split)."""
    return (old.count("\n") + 1) * (new.count("\n") + 1) <= INLINE_PAIRS


class _Deadline(Exception):
    pass


@contextlib.contextmanager
def _cpu_deadline(seconds: float) -> Iterator[None]:
    """Raise _Deadline in this (a worker's main) thread after `seconds` of CPU time."""

    def expire(signum: int, frame: Any) -> None:
        raise _Deadline

    previous = signal.signal(signal.SIGVTALRM, expire)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


def _opcode_groups(
    a: list[str], b: list[str], context: int, exact: bool, autojunk: bool = False
) -> list[list[tuple[str, int, int, int, int]]]:
    head, tail = _common_ends(a, b)
    a_mid, b_mid = a[head : len(a) - tail], b[head : len(b) - tail]
    if not a_mid and not b_mid:
        return []
    ops: list[tuple[str, int, int, int, int]]
    if exact:
        matcher = difflib.SequenceMatcher(None, a_mid, b_mid, autojunk=autojunk)
        ops = [
            (tag, i1 + head, i2 + head, j1 + head, j2 + head)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        ]
    else:
        tag = "replace" if a_mid and b_mid else ("delete" if a_mid else "insert")
        ops = [(tag, head, head + len(a_mid), head, head + len(b_mid))]
    if head:
        ops.insert(0, ("equal", 0, head, 0, head))
    if tail:
        ops.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    # difflib's own grouping of opcodes into hunks with `context` lines around them.
    grouper = difflib.SequenceMatcher(None, "", "")
    grouper.opcodes = ops  # type: ignore[attr-defined]
    return list(grouper.get_grouped_opcodes(context))


def _hunks(
    a: list[str], b: list[str], groups: list[list[tuple[str, int, int, int, int]]]
) -> list[dict[str, Any]]:
    hunks: list[dict[str, Any]] = []
    for group in groups:
        if all(tag == "equal" for tag, *_ in group):
            continue
        lines: list[str] = []

        def add_lines(prefix: str, chunk: list[str], lines: list[str] = lines) -> None:
            for line in chunk:
                if line.endswith("\n"):
                    lines.append(prefix + line[:-1])
                else:
                    lines.extend((prefix + line, NO_NEWLINE))

        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                add_lines(" ", a[i1:i2])
            if tag in ("replace", "delete"):
                add_lines("-", a[i1:i2])
            if tag in ("replace", "insert"):
                add_lines("+", b[j1:j2])
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


def structured_patch(
    old: str, new: str, context: int = 3, *, exact: bool = True, autojunk: bool = False
) -> list[dict[str, Any]]:
    """Hunks {oldStart, oldLines, newStart, newLines, lines} turning `old` into `new`.

    `lines` are " ctx", "-old", "+new" without line ends; a last line without one is
    followed by the unified-diff marker "\\ No newline at end of file". `exact=False`
    replaces the whole differing middle in one hunk (linear time); `autojunk` lets
    difflib skip lines that are frequent in `new` as anchors (much faster on long
    repetitive text, a patch as correct, sometimes less minimal).
    """
    a, b = _lines(old), _lines(new)
    return _hunks(a, b, _opcode_groups(a, b, context, exact, autojunk))


def bounded_patch(old: str, new: str, seconds: float = PATCH_SECONDS) -> list[dict[str, Any]]:
    """The patch, made in a worker process (the deadline is a signal). A large middle is
    diffed with difflib's own heuristic for long inputs (autojunk, its default: lines
    frequent in `new` are no anchors), which keeps it near linear; past `seconds` of CPU,
    the coarse patch."""
    try:
        with _cpu_deadline(seconds):
            return structured_patch(old, new, autojunk=True)
    except _Deadline:
        return structured_patch(old, new, exact=False)


def encoded_with_patch(
    data: dict[str, Any], old: str, new: str
) -> tuple[list[dict[str, Any]], str, bytes, int]:
    """In a worker: the patch, then `data` holding it as PATCH_KEY encoded as JSON text
    and as a google.protobuf.Value (structs.EncodedDict's parts)."""
    hunks = bounded_patch(old, new)
    data = {**data, PATCH_KEY: hunks}  # the key keeps its place, so the text its order
    return hunks, json.dumps(data), structs.to_value(data).SerializeToString(), structs.levels(data)


async def with_patch(
    pool: offload.Offload, key: str, data: dict[str, Any], old: str, new: str
) -> dict[str, Any]:
    """`data` (a tool's result data, final but for it) with PATCH_KEY set to the patch of
    `old` into `new`, in the place `data` already gives that key. Bounded and off the event
    loop (in `pool`, the daemon's workers) when it could take long, and then with its
    encodings made there too; `key` (the session) decides whose turn it is in the queue."""
    if inline_ok(old, new):
        data[PATCH_KEY] = structured_patch(old, new)
        return data
    hunks, text, wire, depth = await pool.run(key, encoded_with_patch, data, old, new)
    data[PATCH_KEY] = hunks
    return structs.EncodedDict(data, wire, text, depth)
