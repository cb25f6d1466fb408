"""forward_wire encodes and reads a forwarded connection's data messages by hand: each
must be byte-identical to protobuf's encoding, both ways, at every varint length."""

from __future__ import annotations

import pytest

from agentd_client.core import forward_wire as w
from agentd_client.core.forward_wire import data_frame, data_of
from agentd_client.v1 import agentd_pb2 as pb

SIZES = [0, 1, 127, 128, 16_383, 16_384, 1 << 20, (1 << 21) + 7]


def payload(n: int) -> bytes:
    return bytes(i * 7 % 251 for i in range(min(n, 4096))) * (n // 4096) + bytes(n % 4096)


@pytest.mark.parametrize("n", SIZES)
def test_data_frame_is_protobufs_encoding(n: int) -> None:
    data = payload(n)
    assert len(data) == n
    assert data_frame(data) == pb.ForwardResponse(data=data).SerializeToString()
    assert data_frame(data) == pb.ForwardRequest(data=data).SerializeToString()


@pytest.mark.parametrize("n", SIZES)
def test_data_of_reads_protobufs_encoding(n: int) -> None:
    data = payload(n)
    view = data_of(pb.ForwardResponse(data=data).SerializeToString())
    assert view is not None and bytes(view) == data


@pytest.mark.parametrize(
    "message",
    [
        pb.ForwardResponse(eof=True),
        pb.ForwardResponse(opened=pb.ForwardOpened(connection_id="conn_1", address="x")),
        pb.ForwardResponse(),
    ],
)
def test_other_messages_are_left_to_protobuf(message: pb.ForwardResponse) -> None:
    assert data_of(message.SerializeToString()) is None


def test_a_length_that_does_not_match_is_not_data() -> None:
    """A data field followed by another field (or cut short) is decoded the usual way."""
    whole = data_frame(b"abc")
    assert data_of(whole + pb.ForwardResponse(eof=True).SerializeToString()) is None
    assert data_of(whole[:-1]) is None
    assert data_of(b"\x12\xff\xff") is None


@pytest.mark.parametrize("cid", [1, 127, 128, 1 << 31])
def test_mux_frames_are_protobufs_own_bytes(cid: int) -> None:
    frame_of = pb.ForwardFrame
    cases = [
        (w.open_frame(cid), frame_of(id=cid, open=True)),
        (w.opened_frame(cid, "[::1]:8000"), frame_of(id=cid, opened="[::1]:8000")),
        (w.mux_data_frame(cid, b"x" * 300), frame_of(id=cid, data=b"x" * 300)),
        (w.mux_data_frame(cid, b""), frame_of(id=cid, data=b"")),
        (w.eof_frame(cid), frame_of(id=cid, eof=True)),
        (w.close_frame(cid, ""), frame_of(id=cid, close="")),
        (w.close_frame(cid, "reset: é"), frame_of(id=cid, close="reset: é")),
        (w.window_frame(cid, 1 << 20), frame_of(id=cid, window=1 << 20)),
    ]
    for raw, frame in cases:
        assert raw == pb.ForwardMuxResponse(frames=[frame]).SerializeToString(), frame
        assert raw == pb.ForwardMuxRequest(frames=[frame]).SerializeToString(), frame
    joined = b"".join(raw for raw, _ in cases)
    assert list(pb.ForwardMuxResponse.FromString(joined).frames) == [f for _, f in cases]


def test_mux_frames_are_read_by_hand_as_protobuf_reads_them() -> None:
    frames = [
        pb.ForwardFrame(id=1, open=True),
        pb.ForwardFrame(id=2, opened="127.0.0.1:80"),
        pb.ForwardFrame(id=300, data=payload(70_000)),
        pb.ForwardFrame(id=3, data=b""),
        pb.ForwardFrame(id=4, eof=True),
        pb.ForwardFrame(id=5, close="reset: é"),
        pb.ForwardFrame(id=6, window=1 << 20),
        pb.ForwardFrame(id=7),
    ]
    raw = pb.ForwardMuxResponse(frames=frames).SerializeToString()
    read = w.frames_of(raw)
    assert read is not None
    for (cid, kind, value), frame in zip(read, frames, strict=True):
        assert cid == frame.id
        assert kind == (frame.WhichOneof("kind") or "")
        if kind == "data":
            assert bytes(value) == frame.data  # type: ignore[arg-type]
        elif kind in ("opened", "close", "window"):
            assert value == getattr(frame, kind)


@pytest.mark.parametrize(
    "raw",
    [
        pb.ForwardMuxResponse(started=pb.ForwardMuxStarted(window=1)).SerializeToString(),
        b"\x12\x05\x08\x01",  # a frame longer than the message
        b"\x12\x02\x48\x01",  # a field no frame has
        b"\x12\x04\x32\x02\xff\xfe",  # a close that is not UTF-8
        b"\x12\x0b" + b"\x08" + b"\xff" * 10,  # a varint that never ends
    ],
)
def test_anything_else_is_left_to_protobuf(raw: bytes) -> None:
    assert w.frames_of(raw) is None
