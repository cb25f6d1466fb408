"""The relay's masking of a secret in a stream: wherever the chunks split it, in
every spelling a body can carry it in (tests/credentials/spelled.py)."""

from __future__ import annotations

import pytest

from agentd.credentials.http import Masker
from tests.credentials import spelled

SECRET = b"ghp_0123456789abcdef"
# A token with the characters escapes treat apart (`/`, `+`, `=`, `:`).
ODD = "ghp_Ab/Cd+Ef=Gh:ij~kl.mn_op-12"
USER = "agentd-bot"


def test_a_secret_split_across_chunks_is_masked() -> None:
    data = b"head " + SECRET + b" middle " + SECRET + b" tail"
    for step in (1, 2, 3, 7, len(SECRET) - 1, len(SECRET), 64):
        m = Masker([SECRET])
        out = b"".join(m.feed(data[i : i + step]) for i in range(0, len(data), step)) + m.flush()
        assert out == data.replace(SECRET, b"*" * len(SECRET)), step
        assert len(out) == len(data)  # a Content-Length stays true


def test_the_longest_form_is_masked_first() -> None:
    m = Masker([b"Basic " + SECRET, SECRET])
    assert m.mask(b"x Basic " + SECRET + b" y") == b"x " + b"*" * (6 + len(SECRET)) + b" y"


CASES = spelled.every(ODD, USER)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_spelling_is_masked(name: str) -> None:
    body = f'{{"echo": "{CASES[name]}", "n": 1}}'
    assert spelled.leaks(body, ODD), "the checker reads it back when nothing is masked"
    out = Masker([ODD.encode()]).mask(body.encode())
    assert len(out) == len(body.encode())
    assert not spelled.leaks(out.decode(), ODD), out


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_spelling_split_across_chunks_is_masked(name: str) -> None:
    body = ("x" * 37 + CASES[name] + "y" * 11).encode()
    whole = Masker([ODD.encode()]).mask(body)
    for step in (1, 2, 3, 5, 7, 64):
        m = Masker([ODD.encode()])
        out = b"".join(m.feed(body[i : i + step]) for i in range(0, len(body), step)) + m.flush()
        assert out == whole, (name, step)
        assert not spelled.leaks(out.decode(), ODD), (name, step, out)


def test_ordinary_text_passes_unchanged() -> None:
    text = b'{"url": "https:\\/\\/example.test\\/a%2Fb?x=&amp;y", "v": "\\u00e9"}' * 50
    assert Masker([ODD.encode(), SECRET]).mask(text) == text
