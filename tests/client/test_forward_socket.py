"""The forward socket's frame reader (agentd_client/core/forward_socket.py): frames cut
anywhere across reads come out whole and in order, a frame whole in one read is a view
of it (no copy), and a header promising more than the limit is refused at once."""

from __future__ import annotations

import random

import pytest

from agentd_client.core import terminal_wire as wire
from agentd_client.core.forward_socket import FrameViews


def test_frames_cut_anywhere_come_out_whole_and_in_order() -> None:
    rng = random.Random(7)
    for _ in range(300):
        sizes = [0, 1, 3, 5, 100, 70_000]
        frames = [(rng.randrange(256), rng.randbytes(rng.choice(sizes))) for _ in range(6)]
        stream = b"".join(wire.frame(k, p) for k, p in frames)
        reader, got, at = FrameViews(1 << 20), [], 0
        while at < len(stream):
            n = rng.choice([1, 2, 4, 5, 6, 7, 100, 65_536, 200_000])
            got += [(k, bytes(p)) for k, p in reader.feed(stream[at : at + n])]
            at += n
        assert got == frames


def test_a_whole_frame_is_a_view_of_the_read() -> None:
    data = wire.frame(32, b"abc") + wire.frame(32, b"de")
    (_, first), (_, second) = FrameViews(100).feed(data)
    assert first.obj is data and second.obj is data
    assert (bytes(first), bytes(second)) == (b"abc", b"de")


def test_a_frame_over_the_limit_is_refused_from_its_header() -> None:
    reader = FrameViews(1000)
    assert reader.feed(wire.HEADER.pack(32, 1001)[:3]) == []
    with pytest.raises(wire.FrameError):
        reader.feed(wire.HEADER.pack(32, 1001)[3:])
