"""Finding a secret in every spelling a response body can carry it in.

An upstream that reflects a credential may escape it on the way: JSON (`\\/`,
`\\u0067` in either case), percent-encoding (either case), HTML character references
(decimal, hexadecimal, the named ones of the characters tokens are made of), or any mix
of these character by character. It may also encode it: base64 and base64url of the
token alone or inside a longer value (`user:token`, a JSON document), where the token
falls at any of three offsets; and an encoded form may be escaped in turn.

So a text is read once with every escape undone (`Unescaped`, which remembers where
each undone escape came from), every form of the secret is looked for in that reading,
and what matched is mapped back onto the bytes as sent.
"""

from __future__ import annotations

import base64
import bisect
import functools
import heapq
import re

# Named character references of the characters tokens and their encodings hold.
_NAMED = {
    b"sol": b"/",
    b"colon": b":",
    b"plus": b"+",
    b"equals": b"=",
    b"period": b".",
    b"lowbar": b"_",
    b"UnderBar": b"_",
    b"amp": b"&",
    b"percnt": b"%",
    b"tilde": b"~",
    b"excl": b"!",
    b"dollar": b"$",
    b"ast": b"*",
    b"midast": b"*",
    b"num": b"#",
    b"commat": b"@",
    b"quest": b"?",
    b"Hat": b"^",
    b"verbar": b"|",
    b"vert": b"|",
    b"comma": b",",
    b"semi": b";",
    b"quot": b'"',
    b"apos": b"'",
    b"lt": b"<",
    b"gt": b">",
    b"hyphen": b"-",
    b"dash": b"-",
    b"bsol": b"\\",
    b"grave": b"`",
    b"lcub": b"{",
    b"rcub": b"}",
    b"lsqb": b"[",
    b"rsqb": b"]",
    b"lpar": b"(",
    b"rpar": b")",
}
# One pattern per kind, each starting with its literal (a fast scan; one alternation
# of all three reads a binary body at a twentieth of the speed).
_ESCAPES = (
    re.compile(rb"%[0-9a-fA-F]{2}"),
    re.compile(rb"\\(?:u[0-9a-fA-F]{4}|/)"),
    re.compile(rb"&(?:#[0-9]{1,8}|#[xX][0-9a-fA-F]{1,8}|[A-Za-z]{2,8});"),
)
# The longest escape of one character (`&#x0000002f;` is 12): what a streaming reader
# holds back is this times the longest form.
MAX_SPELLING = 14
# Base64 cores shorter than this are not looked for alone (too likely by chance).
MIN_CORE = 8


def _undone(escape: bytes) -> bytes | None:
    """What one escape stands for; None: not an escape after all."""
    if escape[0] == ord("%"):
        return bytes([int(escape[1:], 16)])
    if escape == b"\\/":
        return b"/"
    if escape[0] == ord("\\"):
        code = int(escape[2:], 16)
    elif escape[:3] in (b"&#x", b"&#X"):
        code = int(escape[3:-1], 16)
    elif escape[:2] == b"&#":
        code = int(escape[2:-1])
    else:
        return _NAMED.get(escape[1:-1])
    if code > 0x10FFFF:
        return None
    return chr(code).encode("utf-8", "surrogatepass")


class Unescaped:
    """A text with every escape undone, and the way back to the text's own offsets."""

    def __init__(self, data: bytes) -> None:
        pieces: list[bytes] = []
        # Per undone escape: where it starts and ends in the reading and in the text.
        self.starts: list[int] = []
        self.marks: list[tuple[int, int, int]] = []  # (reading end, text start, text end)
        position = reading = 0
        found = (kind.finditer(data) for kind in _ESCAPES)
        for match in heapq.merge(*found, key=lambda m: m.start()):
            undone = _undone(match.group())
            if undone is None:
                continue
            start, end = match.span()
            pieces.append(data[position:start])
            reading += start - position
            pieces.append(undone)
            self.starts.append(reading)
            reading += len(undone)
            self.marks.append((reading, start, end))
            position = end
        if not pieces:
            self.text = data
        else:
            pieces.append(data[position:])
            self.text = b"".join(pieces)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The text's span that reads as the reading's [start, end)."""
        return self._at(start, False), self._at(end - 1, True)

    def _at(self, offset: int, end: bool) -> int:
        i = bisect.bisect_right(self.starts, offset) - 1
        if i < 0:
            return offset + 1 if end else offset
        reading_end, text_start, text_end = self.marks[i]
        if offset < reading_end:  # inside an undone escape: all of it
            return text_end if end else text_start
        return text_end + (offset - reading_end) + (1 if end else 0)


def _base64_forms(secret: bytes) -> set[bytes]:
    """The secret in base64 and base64url at each of the three offsets it can have in
    a longer encoded value (only the characters it alone decides), and alone (with its
    last partial character, with and without padding)."""
    found: set[bytes] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for offset in range(3):
            encoded = encode(b"\0" * offset + secret)
            first = (8 * offset + 5) // 6  # the first character no earlier byte touches
            whole = 8 * (offset + len(secret)) // 6  # characters of the secret's bits only
            core = encoded[first:whole]
            if len(core) >= MIN_CORE:
                found.add(core)
            if offset == 0:
                found.add(encoded)
                found.add(encoded.rstrip(b"="))
    return found


@functools.lru_cache(maxsize=64)
def forms(secrets: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """Each secret and its encoded forms, longest first."""
    found: set[bytes] = set()
    for secret in secrets:
        found.add(secret)
        found |= _base64_forms(secret)
    return tuple(sorted(found, key=lambda f: (-len(f), f)))


def matches(data: bytes, secrets: tuple[bytes, ...]) -> list[tuple[int, int]]:
    """The spans of `data` that spell some form of a secret, in any escape."""
    reading = Unescaped(data)
    spans: list[tuple[int, int]] = []
    for form in forms(secrets):
        at = reading.text.find(form)
        while at >= 0:
            spans.append(reading.span(at, at + len(form)))
            at = reading.text.find(form, at + 1)
    return spans
