"""A ForwardMux stream driven by hand (tests): frames sent as the test builds them, the
daemon's frames collected per connection id by a reader thread, so a test can craft
what agentctl never sends and watch each connection on its own."""

from __future__ import annotations

import queue
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator

import grpc

from agentd_client import Client
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
        self.error: grpc.RpcError | None = None
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
        self._requests.put(pb.ForwardMuxRequest(frames=list(frames)))

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
