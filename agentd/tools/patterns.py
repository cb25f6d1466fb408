"""Regular expressions a model gives a tool: compiled once, every failure an InputError.

Python's `re` parser recurses once per nesting level, so a pattern of a few thousand
`(` or `[` ends in RecursionError: "a bug in agentd" for what is bad input. Overlong
patterns are refused before the parser sees them.
"""

from __future__ import annotations

import re
import warnings

from agentd.errors import InputError

MAX_PATTERN_CHARS = 10_000


def compile_pattern(pattern: str, what: str, flags: int = 0) -> re.Pattern[str]:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InputError(
            f"{what} is {len(pattern)} characters long; the limit is {MAX_PATTERN_CHARS}."
        )
    try:
        with warnings.catch_warnings():  # "possible nested set" and the like: not for us
            warnings.simplefilter("ignore")
            return re.compile(pattern, flags)
    except re.error as exc:
        raise InputError(f"{what} is not a valid regular expression: {exc}") from None
    except (RecursionError, OverflowError, MemoryError):
        raise InputError(
            f"{what} nests too deeply or is too large to compile; use a simpler pattern."
        ) from None
