"""The frames of the daemon's terminal socket, for both ends (agentd/api/terminals/).

A frame is a kind (one byte), the payload's length (4 bytes, little-endian), the
payload. The client's first frame is HELLO with the token OpenTerminal gave; nothing it
sends after is taken before the token is checked. Then the daemon sends READY (or
REFUSED with a reason, and closes), and OUTPUT frames (the output file's offset, then
the bytes) from the offset asked, replay then live, contiguous, then END (the offset
where the output ended). The client sends INPUT (bytes to the task's terminal), RESIZE
(rows, cols), CLOSE_STDIN and DETACH.
"""

from __future__ import annotations

import struct

HEADER = struct.Struct("<BI")
OFFSET = struct.Struct("<Q")
SIZE = struct.Struct("<HH")

# client -> daemon
HELLO = 1
INPUT = 2
RESIZE = 3
CLOSE_STDIN = 4
DETACH = 5
# daemon -> client
READY = 16
OUTPUT = 17
END = 18
REFUSED = 19

# The longest payload the daemon takes (an INPUT's bytes; a HELLO's token is far shorter).
MAX_CLIENT_PAYLOAD = 1 << 16
# The longest payload the daemon sends (an output chunk and its offset).
MAX_DAEMON_PAYLOAD = (1 << 20) + OFFSET.size
# Bytes of input a client puts in one frame.
INPUT_FRAME = 1 << 14


class FrameError(ValueError):
    """The peer sent what is not a frame of this protocol."""


def frame(kind: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def output(offset: int, data: bytes) -> bytes:
    return HEADER.pack(OUTPUT, OFFSET.size + len(data)) + OFFSET.pack(offset) + data


def input_frames(data: bytes) -> list[bytes]:
    """`data` as INPUT frames of at most INPUT_FRAME bytes each."""
    return [frame(INPUT, data[i : i + INPUT_FRAME]) for i in range(0, len(data), INPUT_FRAME)]


class FrameReader:
    """Frames out of a byte stream, in order; a frame longer than `limit` is an error."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        """Bytes held that are not yet a whole frame."""
        return len(self._buf)

    def take_pending(self) -> bytes:
        """The bytes held that are not yet a whole frame, no longer held."""
        held = bytes(self._buf)
        self._buf.clear()
        return held

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        buf = self._buf
        buf += data
        frames: list[tuple[int, bytes]] = []
        at = 0
        end = len(buf)
        while end - at >= HEADER.size:
            kind, size = HEADER.unpack_from(buf, at)
            if size > self.limit:
                raise FrameError(f"a frame of {size} bytes (at most {self.limit})")
            if end - at - HEADER.size < size:
                break
            start = at + HEADER.size
            frames.append((kind, bytes(buf[start : start + size])))
            at = start + size
        if at:
            del buf[:at]
        return frames
