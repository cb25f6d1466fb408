"""A terminal's client handed to its shim (agentd/runs/shim/links.py), on socketpairs:
keys taken only from INPUT frames, everything else handed back to the daemon with the
connection and the exact bytes not taken; a client that does not read or a gap in the
output handed back at the offset reached, with an output frame's unsent rest; a client
gone told without a connection."""

from __future__ import annotations

import base64
import json
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from agentd.runs.shim import links
from agentd_client.core import terminal_wire as wire


class _Shim:
    """What Links asks of the shim: a registry of readable sockets and a terminal."""

    def __init__(self) -> None:
        self.registered: dict[socket.socket, links.Link] = {}
        self.typed = bytearray()
        self.pending = 0
        self.file = b""

    def links(self) -> links.Links:
        return links.Links(
            register=self.registered.__setitem__,
            unregister=self.registered.pop,
            write_input=self._write,
            pending=lambda: self.pending,
            file_bytes=lambda a, b: self.file[a:b] if b <= len(self.file) else None,
        )

    def _write(self, data: bytes) -> int:
        self.typed += data
        return len(data)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket, socket.socket, socket.socket]]:
    """(client, the shim's copy of the daemon's end, controller at the shim, daemon)."""
    client, served = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    controller, daemon = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    yield client, served, controller, daemon
    for s in (client, served, controller, daemon):
        s.close()


def _told(daemon: socket.socket) -> tuple[dict[str, Any], int | None]:
    data, ancillary, _, _ = daemon.recvmsg(links.LINK_READ * 8, socket.CMSG_SPACE(4))
    fds = links.receive_fds(ancillary)
    return json.loads(data), (fds[0] if fds else None)


def _read_frames(sock: socket.socket) -> list[tuple[int, bytes]]:
    sock.settimeout(5)
    return wire.FrameReader(wire.MAX_DAEMON_PAYLOAD).feed(sock.recv(1 << 20))


def test_input_is_taken_until_another_frame_which_goes_back_with_the_rest(pair: Any) -> None:
    client, served, controller, daemon = pair
    shim = _Shim()
    held = shim.links()
    held.add(controller, 7, os.dup(served.fileno()), 0, 0)
    (link,) = held.links
    resize = wire.frame(wire.RESIZE, wire.SIZE.pack(40, 120))
    later = wire.frame(wire.INPUT, b"after")
    client.sendall(wire.frame(wire.INPUT, b"ab") + wire.frame(wire.INPUT, b"c") + resize + later)
    held.readable(link)
    assert bytes(shim.typed) == b"abc"
    msg, fd = _told(daemon)
    assert fd is not None
    os.close(fd)
    assert msg["reason"] == "back" and msg["bytes"] == 3 and msg["link"] == 7
    assert base64.b64decode(msg["rest"]) == resize + later  # exactly what was not taken
    assert not held.links and not shim.registered


def test_a_half_frame_goes_back_whole_and_a_full_terminal_sends_the_client_back(
    pair: Any,
) -> None:
    client, served, controller, daemon = pair
    shim = _Shim()
    held = shim.links()
    held.add(controller, 1, os.dup(served.fileno()), 0, 0)
    (link,) = held.links
    frame = wire.frame(wire.INPUT, b"x" * 100)
    client.sendall(frame[:50])
    held.readable(link)
    assert not shim.typed and held.links  # waits for the rest of the frame
    shim.pending = links.LINK_PENDING + 1  # the terminal does not keep up
    client.sendall(frame[50:])
    held.readable(link)
    msg, fd = _told(daemon)
    assert fd is not None
    os.close(fd)
    assert base64.b64decode(msg["rest"]) == frame and not shim.typed


def test_output_goes_with_offsets_and_a_client_that_does_not_read_goes_back(
    pair: Any,
) -> None:
    client, served, controller, daemon = pair
    shim = _Shim()
    shim.file = b"0123456789"
    held = shim.links()
    # Handed over at 4 while the output is at 10: 4..10 from the file first.
    held.add(controller, 2, os.dup(served.fileno()), 4, 10)
    held.output(10, b"ab")
    assert _read_frames(client) == [
        (wire.OUTPUT, wire.OFFSET.pack(4) + b"456789"),
        (wire.OUTPUT, wire.OFFSET.pack(10) + b"ab"),
    ]
    served.setblocking(False)
    at, block = 12, b"y" * links.LINK_READ
    while held.links:  # the client reads nothing: its buffer fills
        held.output(at, block)
        at += len(block)
    msg, fd = _told(daemon)
    assert fd is not None
    os.close(fd)
    unsent = base64.b64decode(msg["unsent"])
    got = bytearray()
    client.setblocking(False)
    try:
        while chunk := client.recv(1 << 20):
            got += chunk
    except BlockingIOError:
        pass
    # What the client has and the unsent rest are whole frames, ending at the offset told.
    frames = wire.FrameReader(wire.MAX_DAEMON_PAYLOAD).feed(bytes(got) + unsent)
    offsets = [wire.OFFSET.unpack_from(p)[0] for _, p in frames]
    end = offsets[-1] + len(frames[-1][1]) - wire.OFFSET.size
    assert offsets == list(range(12, end, links.LINK_READ)) and end == msg["offset"]


def test_a_gap_hands_back_and_a_client_gone_is_told_without_a_connection(pair: Any) -> None:
    client, served, controller, daemon = pair
    shim = _Shim()
    held = shim.links()
    held.add(controller, 3, os.dup(served.fileno()), 0, 0)
    held.output(5, b"late")  # not at the client's offset (a frame it never got)
    msg, fd = _told(daemon)
    assert fd is not None and msg["offset"] == 0
    os.close(fd)
    held.add(controller, 4, os.dup(served.fileno()), 0, 0)
    (link,) = held.links
    client.close()
    held.readable(link)
    msg, fd = _told(daemon)
    assert fd is None and msg["reason"] == "closed" and msg["link"] == 4


def test_a_link_dies_with_its_controller(pair: Any) -> None:
    client, served, controller, daemon = pair
    shim = _Shim()
    held = shim.links()
    held.add(controller, 5, os.dup(served.fileno()), 0, 0)
    held.controller_gone(controller)
    assert not held.links and not shim.registered
