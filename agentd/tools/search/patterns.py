"""Regular expressions a model gives a tool: every failure an InputError, every match
bounded in time.

Python's `re` parser recurses once per nesting level, so a pattern of a few thousand
`(` ends in RecursionError: "a bug in agentd" for what is bad input. And `re` matching
backtracks without limit while holding the GIL: `^(a|a)*$` against a line of forty
`a` would stall the whole daemon for days. So patterns are compiled with the `regex`
library (the same syntax) and searched with its timeout, off the event loop, with
the GIL released.
"""

from __future__ import annotations

import asyncio
import time
import warnings

import regex

from agentd.foundation.errors import InputError

MAX_PATTERN_CHARS = 10_000
# Time one filtering of a tool's output may take.
MATCH_SECONDS = 2.0


def compile_pattern(pattern: str, what: str, flags: int = 0) -> regex.Pattern[str]:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InputError(
            f"{what} is {len(pattern)} characters long; the limit is {MAX_PATTERN_CHARS}."
        )
    try:
        with warnings.catch_warnings():  # "possible nested set" and the like: not for us
            warnings.simplefilter("ignore")
            return regex.compile(pattern, flags)
    except regex.error as exc:
        raise InputError(f"{what} is not a valid regular expression: {exc}") from None
    except (RecursionError, OverflowError, MemoryError, ValueError):
        raise InputError(
            f"{what} nests too deeply or is too large to compile; use a simpler pattern."
        ) from None


def _matching_lines(pattern: regex.Pattern[str], text: str, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    kept: list[str] = []
    for line in text.splitlines(keepends=True):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if pattern.search(line, timeout=left, concurrent=True):
            kept.append(line)
    return "".join(kept)


async def matching_lines(
    pattern: regex.Pattern[str], text: str, what: str, seconds: float = MATCH_SECONDS
) -> str:
    """The lines of `text` that `pattern` matches; InputError if that takes too long."""
    try:
        return await asyncio.to_thread(_matching_lines, pattern, text, seconds)
    except TimeoutError:
        raise InputError(
            f"{what} took more than {seconds:g} seconds to apply (it backtracks too much); "
            f"use a simpler pattern. No output was consumed."
        ) from None
