"""A multiplexed forward stream driven by hand (tests), on ForwardMux or on the terminal
socket: frames sent as the test builds them, the daemon's frames collected per
connection id by a reader thread, so a test can craft what agentctl never sends and
watch each connection on its own."""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator

import grpc

from agentd_client import Client
from agentd_client.core import terminal_wire as wire
from agentd_client.core.forward_socket import (
    FRAMES,
    MAX_FRAMES_PAYLOAD,
    ChannelRefused,
    FrameViews,
)
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.waiting import wait_until

Frame = pb.ForwardFrame


def data(cid: int, payload: bytes) -> Frame:
    return Frame(id=cid, data=payload)


class Mux:
    """One ForwardMux call. `read=False`: nothing of the daemon's answers is read after
    `started` (a client that never reads)."""

    def __init__(self, c: Client, start: pb.ForwardMuxStart, read: bool = True) -> None:
        self._requests: queue.Queue[pb.ForwardMuxRequest | None] = queue.Queue()
        self._requests.put(pb.ForwardMuxRequest(start=start))
        self.frames: dict[int, list[Frame]] = defaultdict(list)
        self.error: grpc.RpcError | OSError | None = None
        self.ended = threading.Event()
        self._lock = threading.Lock()

        def requests() -> Iterator[pb.ForwardMuxRequest]:
            while (item := self._requests.get()) is not None:
                yield item

        self.call = c.stub.ForwardMux(requests(), timeout=300)
        first = next(self.call)
        assert first.HasField("started"), first
        self.started = first.started
        if read:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for reply in self.call:
                with self._lock:
                    for frame in reply.frames:
                        self.frames[frame.id].append(frame)
        except grpc.RpcError as exc:
            self.error = exc
        finally:
            self.ended.set()

    def send(self, *frames: Frame) -> None:
        self.send_raw(pb.ForwardMuxRequest(frames=list(frames)))

    def send_raw(self, request: pb.ForwardMuxRequest) -> None:
        self._requests.put(request)

    def of(self, cid: int) -> list[Frame]:
        with self._lock:
            return list(self.frames[cid])

    def received(self, cid: int) -> bytes:
        return b"".join(f.data for f in self.of(cid) if f.WhichOneof("kind") == "data")

    def closed(self, cid: int) -> str | None:
        """The reason the daemon closed `cid` with ("" when cleanly), or None if open."""
        for f in self.of(cid):
            if f.WhichOneof("kind") == "close":
                return f.close
        return None

    def wait(self, what: str, check: Callable[[], object], timeout: float = 60) -> object:
        def ready() -> object:
            if self.ended.is_set() and not check():
                raise AssertionError(f"the stream ended ({self.error}) before {what}")
            return check()

        return wait_until(ready, timeout=timeout, what=what)

    def wait_closed(self, cid: int, timeout: float = 60) -> str:
        self.wait(f"connection {cid} closed", lambda: self.closed(cid) is not None, timeout)
        reason = self.closed(cid)
        assert reason is not None
        return reason

    def wait_opened(self, cid: int, timeout: float = 60) -> str:
        def opened() -> str | None:
            for f in self.of(cid):
                kind = f.WhichOneof("kind")
                if kind == "opened":
                    return f.opened
                if kind == "close":
                    raise AssertionError(f"connection {cid} refused: {f.close}")
            return None

        return str(self.wait(f"connection {cid} opened", opened, timeout))

    def close(self) -> None:
        self._requests.put(None)
        self.call.cancel()


class SocketMux(Mux):
    """The same stream on the daemon's terminal socket: OpenForward's token, then the
    frames in FRAMES batches (agentd_client/core/forward_socket.py). A refused
    connection raises ChannelRefused with the daemon's reason; `error` is why the
    stream ended (the daemon closed the socket)."""

    def __init__(self, c: Client, start: pb.ForwardMuxStart, read: bool = True) -> None:
        self.frames = defaultdict(list)
        self.error = None
        self.ended = threading.Event()
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        offered = c.stub.OpenForward(
            pb.OpenForwardRequest(
                session_id=start.session_id,
                port=start.port,
                host=start.host,
                forward_id=start.forward_id,
                uid=os.geteuid(),
            ),
            timeout=60,
        )
        assert offered.path and offered.token, "the daemon offers no terminal socket"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(offered.path)
        self.sock.sendall(wire.frame(wire.HELLO, offered.token))
        self._reader = FrameViews(MAX_FRAMES_PAYLOAD)
        self._pending: list[tuple[int, bytes]] = []
        kind, payload = self._next()
        if kind != wire.READY:
            self.sock.close()
            raise ChannelRefused(payload.decode(errors="replace"))
        self.sock.settimeout(None)
        self.started = pb.ForwardMuxStarted(window=offered.window, max_data=offered.max_data)
        if read:
            threading.Thread(target=self._read, daemon=True).start()

    def _next(self) -> tuple[int, bytes]:
        while not self._pending:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the daemon closed the socket")
            self._pending = [(k, bytes(p)) for k, p in self._reader.feed(chunk)]
        return self._pending.pop(0)

    def _read(self) -> None:
        try:
            while True:
                kind, payload = self._next()
                if kind != FRAMES:
                    continue
                with self._lock:
                    for frame in pb.ForwardMuxResponse.FromString(payload).frames:
                        self.frames[frame.id].append(frame)
        except OSError as exc:
            self.error = exc
        finally:
            self.ended.set()

    def send_raw(self, request: pb.ForwardMuxRequest) -> None:
        self.send_bytes(FRAMES, request.SerializeToString())

    def send_bytes(self, kind: int, payload: bytes) -> None:
        """A socket frame as the test builds it."""
        with self._send_lock:
            self.sock.sendall(wire.frame(kind, payload))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def open_mux(carrier: str, c: Client, start: pb.ForwardMuxStart, read: bool = True) -> Mux:
    """A stream on `carrier`: "grpc" (ForwardMux) or "socket" (the terminal socket)."""
    return SocketMux(c, start, read) if carrier == "socket" else Mux(c, start, read)
