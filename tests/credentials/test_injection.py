"""The swaps of a terminated connection: placeholders out (Basic credentials too),
foreign placeholders found, and real values back as placeholders or `*`s in every
spelling, whatever the chunks."""

from __future__ import annotations

import base64

from agentd.credentials.injection import Injection, OutStream, Swap
from agentd.credentials.placeholders import placeholder
from tests.credentials import spelled

REAL = "ghp_" + "Secr3tValue" * 3 + "x"
SHOWN = placeholder(REAL)
OTHER_REAL = "sk-ant-api03-" + "k3y" * 10
OTHER_SHOWN = placeholder(OTHER_REAL)
MINE = Swap("envVars GITHUB_TOKEN", SHOWN.encode(), REAL.encode(), ("api.github.com",))
THEIRS = Swap("envVars ANTHROPIC_API_KEY", OTHER_SHOWN.encode(), OTHER_REAL.encode(), ("a.b",))


def injection() -> Injection:
    return Injection("api.github.com", [MINE], [THEIRS])


def test_a_header_is_swapped_and_basic_credentials_inside_theirs() -> None:
    i = injection()
    value, used, refused = i.header(b"Authorization", f"Bearer {SHOWN}".encode())
    assert value == f"Bearer {REAL}".encode() and used == [MINE] and refused is None
    basic = b"Basic " + base64.b64encode(f"bot:{SHOWN}".encode())
    value, used, refused = i.header(b"authorization", basic)
    assert base64.b64decode(value[6:]) == f"bot:{REAL}".encode() and refused is None
    _, _, refused = i.header(b"x-api-key", OTHER_SHOWN.encode())
    assert refused is THEIRS
    basic = b"Basic " + base64.b64encode(f"bot:{OTHER_SHOWN}".encode())
    assert i.header(b"Authorization", basic)[2] is THEIRS


def test_a_body_is_swapped_across_chunks_and_a_foreign_placeholder_stops_it() -> None:
    body = f"a={SHOWN}&b={SHOWN}".encode()
    for size in (1, 3, 7, len(body)):
        stream = OutStream(injection())
        out = b""
        for at in range(0, len(body), size):
            part, refused = stream.feed(body[at : at + size])
            assert refused is None
            out += part
        out += stream.flush()
        assert out == f"a={REAL}&b={REAL}".encode()
    stream = OutStream(injection())
    sent, refused = stream.feed(b"x" * 100 + OTHER_SHOWN[:5].encode())
    assert refused is None
    assert stream.feed(OTHER_SHOWN[5:].encode())[1] is THEIRS


def test_real_values_come_back_as_placeholders_or_stars_in_every_spelling() -> None:
    for name, spelling in spelled.every(REAL, "bot").items():
        data = f"<p>{spelling}</p> and {REAL}".encode()
        for size in (5, 64, len(data)):
            masker = injection().masker()
            out = b"".join(masker.feed(data[a : a + size]) for a in range(0, len(data), size))
            out += masker.flush()
            assert len(out) == len(data), name
            text = out.decode("latin-1")
            assert f"and {SHOWN}" in text, name
            assert not spelled.leaks(text, REAL, window=10), (name, text)
