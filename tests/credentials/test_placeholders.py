"""A placeholder has its secret's shape (length, known prefix, character classes) and
is drawn afresh each time, never equal to the secret."""

from __future__ import annotations

import string

import pytest

from agentd.credentials.placeholders import placeholder


@pytest.mark.parametrize(
    ("secret", "prefix"),
    [
        ("ghp_" + "aB3" * 12, "ghp_"),
        ("github_pat_11ABCDEFG0_" + "x1Y" * 20, "github_pat_"),
        ("sk-ant-api03-" + "Zz9-_" * 18, "sk-ant-api03-"),
        ("sk-proj-" + "q" * 40, "sk-proj-"),
        ("npm_" + "0123456789" * 4, "npm_"),
        ("AKIAIOSFODNN7EXAMPLE", "AKIA"),
        ("plain-secret-value-1234", ""),
    ],
)
def test_the_shape_is_kept(secret: str, prefix: str) -> None:
    shown = placeholder(secret)
    assert len(shown) == len(secret) and shown != secret
    assert shown.startswith(prefix)
    for a, b in zip(secret[len(prefix) :], shown[len(prefix) :], strict=True):
        for alphabet in (string.digits, string.ascii_lowercase, string.ascii_uppercase):
            if a in alphabet:
                assert b in alphabet
                break
        else:
            assert a == b  # punctuation kept


def test_each_is_drawn_afresh() -> None:
    secret = "ghp_" + "a1" * 18
    assert len({placeholder(secret) for _ in range(20)}) == 20


def test_a_short_secret_is_drawn_whole() -> None:
    for secret in ("abc", "ghp_12", "x"):
        shown = placeholder(secret)
        assert len(shown) == len(secret) and shown != secret
