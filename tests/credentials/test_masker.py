"""The relay's masking of a secret in a stream: wherever the chunks split it."""

from __future__ import annotations

from agentd.credentials.http import Masker

SECRET = b"ghp_0123456789abcdef"


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
