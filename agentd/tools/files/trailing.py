"""Trailing whitespace in what Write and Edit put into a file, as the reference trims it.

Claude Code 2.1.328 strips the whitespace at the end of every line of Write's `content`
and of Edit's `new_string` (MultiEdit: each edit's), except in Markdown files, where two
trailing spaces are a line break. What it counts as Markdown is a path ending `.md` or
`.mdx`, any case (`.markdown` is trimmed). An Edit of a file that does not exist yet (an
empty old_string creating it) keeps its text as given, since the reference trims only
after reading the file. Lines are split at CRLF, LF or CR, and the breaks are kept;
"whitespace" is JavaScript's `\\s`, so NBSP, U+3000 and a vertical tab go too.
Recorded in tests/data/oracle (cases edit_trailing_ws, edit_trailing_ws_more).
"""

from __future__ import annotations

import re

_BREAK = re.compile(r"(\r\n|\n|\r)")
# JavaScript's \s (ECMA-262 WhiteSpace and LineTerminator), which differs from Python's.
_JS_SPACE = (
    "\t\n\v\f\r \u00a0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_MARKDOWN = re.compile(r"\.(md|mdx)\Z", re.IGNORECASE)


def keeps_trailing_space(file_path: str) -> bool:
    """Whether text written to `file_path` (as the model gave it) keeps line-end spaces."""
    return _MARKDOWN.search(file_path) is not None


def strip_line_ends(text: str) -> str:
    """`text` with the whitespace at the end of each line removed, line breaks kept."""
    # str.rstrip per line, not a regex per line: ~1 ms for a 5,000-line Write instead of
    # ~12 ms, on the event loop (bench/fairness.py).
    if "\r" not in text:
        return "\n".join([line.rstrip(_JS_SPACE) for line in text.split("\n")])
    parts = _BREAK.split(text)
    parts[0::2] = [line.rstrip(_JS_SPACE) for line in parts[0::2]]
    return "".join(parts)


def as_written(file_path: str, text: str) -> str:
    """The text as the reference writes it into `file_path`."""
    return text if keeps_trailing_space(file_path) else strip_line_ends(text)
