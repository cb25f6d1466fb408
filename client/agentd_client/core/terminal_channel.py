"""A task's terminal over the daemon's terminal socket (terminal_wire.py), when the
daemon offers it: a token from OpenTerminal, then one unix socket carrying the keys one
way and the output (with its offsets) the other, no gRPC on the way.

`open_channel` answers None when it is not offered (an older daemon, a daemon reached
over TCP, a socket this process cannot reach): the caller then uses WriteInput and
ReadOutput, as before.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from agentd_client.core import terminal_wire as wire
from agentd_client.v1 import agentd_pb2 as pb

READ_SIZE = 1 << 18


class ChannelRefused(ConnectionError):
    """The daemon refused the connection (the reason it gave)."""


@dataclass(frozen=True, slots=True)
class Output:
    """Bytes of the output at `offset`; `done`: the output ended at `offset`."""

    offset: int
    data: bytes
    done: bool


class TerminalChannel:
    """One connection of the terminal socket, once the daemon said READY. Sends may come
    from one thread while another reads."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._reader = wire.FrameReader(wire.MAX_DAEMON_PAYLOAD)
        self._pending: list[tuple[int, bytes]] = []
        self._send_lock = threading.Lock()

    @classmethod
    def connect(cls, path: str, token: bytes, timeout: float = 10.0) -> TerminalChannel:
        """Connect and present the token; ChannelRefused with the daemon's reason."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(path)
            sock.sendall(wire.frame(wire.HELLO, token))
            channel = cls(sock)
            kind, payload = channel._next()
            if kind == wire.REFUSED:
                raise ChannelRefused(payload.decode(errors="replace"))
            if kind != wire.READY:
                raise ChannelRefused(f"unexpected frame {kind} before READY")
            sock.settimeout(None)
            return channel
        except BaseException:
            sock.close()
            raise

    def _next(self) -> tuple[int, bytes]:
        while not self._pending:
            data = self.sock.recv(READ_SIZE)
            if not data:
                raise ConnectionError("the daemon closed the terminal socket")
            self._pending = self._reader.feed(data)
        return self._pending.pop(0)

    def outputs(self) -> Iterator[Output]:
        """The output frames as they come, to the END (then stops); a REFUSED (the
        output gone) raises ChannelRefused, a lost connection ConnectionError."""
        while True:
            kind, payload = self._next()
            if kind == wire.OUTPUT:
                (offset,) = wire.OFFSET.unpack_from(payload)
                yield Output(offset, payload[wire.OFFSET.size :], False)
            elif kind == wire.END:
                (offset,) = wire.OFFSET.unpack(payload)
                yield Output(offset, b"", True)
                return
            elif kind == wire.REFUSED:
                raise ChannelRefused(payload.decode(errors="replace"))

    def _send(self, data: bytes) -> None:
        with self._send_lock:
            self.sock.sendall(data)

    def send(self, data: bytes) -> None:
        """Keys to the task (blocks while the daemon is behind)."""
        if len(data) <= wire.INPUT_FRAME:
            self._send(wire.frame(wire.INPUT, data))
        else:
            self._send(b"".join(wire.input_frames(data)))

    def resize(self, rows: int, cols: int) -> None:
        self._send(wire.frame(wire.RESIZE, wire.SIZE.pack(rows, cols)))

    def close_stdin(self) -> None:
        self._send(wire.frame(wire.CLOSE_STDIN))

    def detach(self) -> None:
        self._send(wire.frame(wire.DETACH))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def open_channel(
    client: Any,
    session_id: str,
    task_id: str,
    *,
    offset: int = 0,
    input: bool = False,
    hangup_on_drop: bool = False,
) -> TerminalChannel | None:
    """The task's terminal over the terminal socket, or None when it is not offered.
    Errors of the task itself (not found, takes no input) raise as gRPC errors."""
    request = pb.OpenTerminalRequest(
        session_id=session_id,
        task_id=task_id,
        uid=os.geteuid(),
        offset=offset,
        input=input,
        hangup_on_drop=hangup_on_drop,
    )
    try:
        offered = client.stub.OpenTerminal(request)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
            return None  # a daemon from before the terminal socket
        raise
    if not offered.path:
        return None
    try:
        return TerminalChannel.connect(offered.path, offered.token)
    except (ChannelRefused, OSError):
        return None  # not reachable from here: the gRPC path serves
