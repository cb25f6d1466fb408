"""The pieces of a linked terminal that need no daemon: the detach sequence, found in
whatever way the keys arrive, and the daemon's end line kept off the screen."""

from __future__ import annotations

import pytest

from agentd_client.core.errors import Usage
from agentd_client.terminal.interactive import EndLine
from agentd_client.terminal.rawterm import DetachMatcher, parse_detach_keys


def test_detach_keys_parse_as_docker_writes_them() -> None:
    assert parse_detach_keys("ctrl-p,ctrl-q") == b"\x10\x11"
    assert parse_detach_keys("ctrl-a,x") == b"\x01x"
    for bad in ("", "ctrl-1", "alt-x", "ctrl-pp"):
        with pytest.raises(Usage):
            parse_detach_keys(bad)


@pytest.mark.parametrize(
    "pieces", [[b"ab\x10\x11cd"], [b"ab\x10", b"\x11cd"], [b"a", b"b\x10\x11"]]
)
def test_the_detach_sequence_is_found_however_it_is_split(pieces: list[bytes]) -> None:
    matcher = DetachMatcher(b"\x10\x11")
    sent = b""
    for piece in pieces:
        out, detached = matcher.feed(piece)
        sent += out
        if detached:
            break
    assert detached and sent == b"ab"


def test_a_key_that_only_starts_the_sequence_is_sent_after_all() -> None:
    matcher = DetachMatcher(b"\x10\x11")
    assert matcher.feed(b"\x10") == (b"", False)  # held: it may be a detach
    assert matcher.feed(b"x") == (b"\x10x", False)  # it was not: sent, in order
    assert matcher.feed(b"\x10\x10\x11") == (b"\x10", True)


def _shown(pieces: list[bytes]) -> bytes:
    end = EndLine()
    shown = b"".join(end.feed(p, False) for p in pieces[:-1])
    return shown + end.feed(pieces[-1], True)


@pytest.mark.parametrize(
    "pieces",
    [
        [b"out\n\n[exited with code 4]\n"],
        [b"out\n", b"\n[exi", b"ted with code 4]", b"\n", b""],
        [b"out\n\n", b"[exited with code 4]\n", b""],
    ],
)
def test_the_end_line_is_kept_off_however_it_arrives(pieces: list[bytes]) -> None:
    assert _shown(pieces) == b"out\n"


def test_output_like_the_end_line_is_shown() -> None:
    assert _shown([b"a\n[exited with", b" code x]\n", b""]) == b"a\n[exited with code x]\n"
    assert _shown([b"k", b"\n", b""]) == b"k\n"  # held a moment, then shown
