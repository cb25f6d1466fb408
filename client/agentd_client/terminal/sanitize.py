"""Hostile text made safe to show: what a model, a command or a workspace wrote never
drives a person's terminal.

Every character a terminal would act on instead of drawing is shown as its escape in
Python's (and bash's `$'…'`) notation: ESC as `\\x1b`, so `\\x1b[2J` reads as what it is
and never clears a screen; C1 controls (`\\x9b`, the 8-bit CSI), DEL, bidi controls
(`\\u202e`) and other invisible format characters (zero-width spaces, the BOM, tag
characters) the same way. ASCII-only escapes survive any terminal and font, and a person
can paste them into `printf` to see the bytes. Bytes that are not UTF-8 show as `\\xNN`
too. A lone backslash is left as it is, so commands read naturally; the prompt says
when a command holds characters shown escaped (see `hidden_count`).

Two forms: `line` for a field of one line (a command in a prompt, a path, a name: a
newline there could draw a fake line, so it shows as `\\n`), and `text` for output,
where newlines and tabs are kept. Both are idempotent and never raise.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# What a terminal acts on or draws as nothing: C0 and C1 controls and DEL (Cc); format
# characters (Cf: bidi controls, zero-width spaces and joiners, the BOM, the soft hyphen,
# interlinear and tag characters); the line and paragraph separators (Zl, Zp); lone
# surrogates (Cs); and the Hangul fillers, letters that draw nothing. Written out rather
# than computed from unicodedata at import (that costs 0.3 s on every agentctl run);
# tests/client/test_sanitize.py checks it covers every such character Python knows.
_UNSAFE = (
    "\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    "\u115f\u1160\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164"
    "\ud800-\udfff\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f"
)


def _escape(match: re.Match[str]) -> str:
    c = ord(match.group())
    if c == 0x0A:
        return "\\n"
    if c == 0x09:
        return "\\t"
    if c == 0x0D:
        return "\\r"
    if c < 0x100:
        return f"\\x{c:02x}"
    if c < 0x10000:
        return f"\\u{c:04x}"
    return f"\\U{c:08x}"


_LINE = re.compile(f"[{_UNSAFE}]")
# The same, newline and tab excepted.
_TEXT = re.compile(f"[\x00-\x08\x0b-\x1f{_UNSAFE.removeprefix(chr(0) + '-' + chr(0x1F))}]")


def line(value: object) -> str:
    """One line, safe to show: every control and invisible character escaped, newlines
    and tabs too."""
    return _LINE.sub(_escape, value if isinstance(value, str) else str(value))


def text(value: object) -> str:
    """Text, safe to show as output: newlines and tabs kept (a CR before a newline is
    dropped), every other control and invisible character escaped."""
    s = value if isinstance(value, str) else str(value)
    return _TEXT.sub(_escape, s.replace("\r\n", "\n"))


def output(data: bytes) -> str:
    """A command's bytes as safe text; bytes that are not UTF-8 show as `\\xNN`."""
    return text(data.decode("utf-8", errors="backslashreplace"))


def hidden_count(value: str) -> int:
    """How many characters `line` shows escaped, newlines and tabs not counted: the
    prompt says so, since an escape there is something a person did not type."""
    return len(_TEXT.findall(value))


def width(value: str) -> int:
    """Columns `value` (already safe) takes on a terminal, by grapheme cluster (wcwidth):
    wide East Asian characters and emoji two (a skin tone or a flag with them), combining
    marks and conjoining Hangul jamo none beyond their syllable."""
    import wcwidth  # only a screen measures text: every other command skips its tables

    return int(wcwidth.width(value, control_codes="ignore"))


def graphemes(value: str) -> Iterator[str]:
    """`value`'s grapheme clusters, what a terminal draws as one character: a line is
    cut between them, never inside one."""
    import wcwidth

    return iter(wcwidth.iter_graphemes(value))
