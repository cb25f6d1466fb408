"""A forwarded connection's data messages encoded and read by hand, byte-identical to
protobuf's: ForwardRequest and ForwardResponse both carry bytes as field 2, and the
generic path costs two copies of every chunk each way (into the message, then out of
it when serialized or read) on top of gRPC's own, which the profile of
bench/port_forward.py shows as most of the memcpy in agentctl and the daemon.
"""

from __future__ import annotations

# Field 2, wire type 2 (length-delimited): the `data` of ForwardRequest and ForwardResponse.
DATA_TAG = 0x12


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def data_frame(data: bytes) -> bytes:
    """The encoded message whose `data` is `data`, with one copy of it."""
    return b"".join((bytes((DATA_TAG,)), _varint(len(data)), data))


def data_of(raw: bytes) -> memoryview | None:
    """The `data` of an encoded message that holds only that field, as a view of `raw`
    (no copy); None for any other message (decode it the usual way)."""
    if not raw or raw[0] != DATA_TAG:
        return None
    size = shift = 0
    for i in range(1, min(len(raw), 11)):
        byte = raw[i]
        size |= (byte & 0x7F) << shift
        if not byte & 0x80:
            start = i + 1
            return memoryview(raw)[start:] if start + size == len(raw) else None
        shift += 7
    return None


# A multiplexed forward's frames (ForwardFrame inside ForwardMuxRequest/Response, field
# 2 of both), encoded by hand the same way: a data frame's bytes are copied once, into
# the message that carries it, and a batch of frames is one join.
FRAMES_TAG = 0x12
_ID, _OPEN, _OPENED, _DATA, _EOF, _CLOSE, _WINDOW = 0x08, 0x10, 0x1A, 0x22, 0x28, 0x32, 0x38


def _frame(cid: int, *body: bytes) -> bytes:
    head = bytes((_ID,)) + _varint(cid) if cid else b""
    size = len(head) + sum(len(b) for b in body)
    return b"".join((bytes((FRAMES_TAG,)), _varint(size), head, *body))


def open_frame(cid: int) -> bytes:
    return _frame(cid, bytes((_OPEN, 1)))


def opened_frame(cid: int, address: str) -> bytes:
    text = address.encode()
    return _frame(cid, bytes((_OPENED,)), _varint(len(text)), text)


def mux_data_frame(cid: int, data: bytes) -> bytes:
    return _frame(cid, bytes((_DATA,)), _varint(len(data)), data)


def eof_frame(cid: int) -> bytes:
    return _frame(cid, bytes((_EOF, 1)))


def close_frame(cid: int, reason: str) -> bytes:
    text = reason.encode()
    return _frame(cid, bytes((_CLOSE,)), _varint(len(text)), text)


def window_frame(cid: int, credit: int) -> bytes:
    return _frame(cid, bytes((_WINDOW,)), _varint(credit))


# A frame as read by hand: (connection id, kind, value); data is a view of the message.
ReadFrame = tuple[int, str, "int | str | memoryview"]
_KINDS = {_OPEN: "open", _EOF: "eof", _WINDOW: "window"}
_TEXTS = {_OPENED: "opened", _CLOSE: "close"}


def _read_varint(raw: memoryview, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = raw[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def frames_of(raw: bytes | memoryview) -> list[ReadFrame] | None:
    """The frames of an encoded ForwardMuxResponse/Request holding only frames, data as
    views of `raw` (no copy); None for any other message or anything unexpected in one
    (decode it the usual way: protobuf says what is wrong)."""
    view = memoryview(raw)
    out: list[ReadFrame] = []
    i, end = 0, len(view)
    try:
        while i < end:
            if view[i] != FRAMES_TAG:
                return None
            size, i = _read_varint(view, i + 1)
            stop = i + size
            if stop > end:
                return None
            cid, kind, value = 0, "", 0
            value_of: int | str | memoryview = 0
            while i < stop:
                tag = view[i]
                i += 1
                if tag == _ID:
                    cid, i = _read_varint(view, i)
                elif tag in _KINDS:
                    value, i = _read_varint(view, i)
                    kind, value_of = _KINDS[tag], value
                elif tag == _DATA or tag in _TEXTS:
                    n, i = _read_varint(view, i)
                    if i + n > stop:
                        return None
                    if tag == _DATA:
                        kind, value_of = "data", view[i : i + n]
                    else:
                        kind, value_of = _TEXTS[tag], str(view[i : i + n], "utf-8")
                    i += n
                else:
                    return None
            if i != stop:
                return None
            out.append((cid, kind, value_of))
    except (IndexError, ValueError, UnicodeDecodeError):
        return None
    return out
