"""Following command output from the daemon's files: every byte, each reader its own offset.

Progress events only say that an output grew; a Follower reads the bytes with
ReadOutput (one stream per output, on a thread of its own) and hands them on in order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc

from agentd_client.core.client import Client, Stream
from agentd_client.v1 import agentd_pb2 as pb

# Receives (output id, bytes) in order; b"" once, when the output ended.
Sink = Callable[[str, bytes], None]
# Told (output id, the offset to go on from) when the daemon went away mid-output.
Lost = Callable[[str, int], None]


# What a daemon going away (a restart) looks like to a stream.
_LOST = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN)


class Follower:
    """Follows outputs by id, once each, until they end or `stop()`."""

    def __init__(
        self, client: Client, session_id: str, sink: Sink, lost: Lost | None = None
    ) -> None:
        self._client = client
        self._session_id = session_id
        self._sink = sink
        self._lost = lost
        self._lock = threading.Lock()
        self._threads: dict[str, threading.Thread] = {}
        self._streams: dict[str, Stream[pb.OutputChunk]] = {}
        self._stopped = False

    def follow(self, output_id: str, offset: int = 0) -> None:
        with self._lock:
            if self._stopped or output_id in self._threads:
                return
            thread = threading.Thread(
                target=self._run, args=(output_id, offset), daemon=True, name=f"follow-{output_id}"
            )
            self._threads[output_id] = thread
        thread.start()

    def followed(self) -> list[str]:
        with self._lock:
            return list(self._threads)

    def following(self, output_id: str) -> bool:
        with self._lock:
            return output_id in self._threads

    def _run(self, output_id: str, offset: int) -> None:
        stream = self._client.read_output(self._session_id, output_id, offset, follow=True)
        with self._lock:
            if self._stopped:
                stream.cancel()
                return
            self._streams[output_id] = stream
        at = offset
        lost = False
        try:
            for chunk in stream:
                if chunk.data:
                    self._sink(output_id, chunk.data)
                    at = chunk.offset + len(chunk.data)
                if chunk.done:
                    break
        except grpc.RpcError as exc:
            # Cancelled, or the daemon went away: the event stream says so; with `lost`,
            # whoever follows goes on from `at` once it is back.
            lost = self._lost is not None and exc.code() in _LOST and not self._stopped
        finally:
            with self._lock:
                self._streams.pop(output_id, None)
                if lost:
                    self._threads.pop(output_id, None)
            if lost:
                assert self._lost is not None
                self._lost(output_id, at)
            else:
                self._sink(output_id, b"")

    def wait(self, output_id: str, timeout: float = 5.0) -> None:
        """Until the output has been followed to its end (all its bytes handed on)."""
        with self._lock:
            thread = self._threads.get(output_id)
        if thread is not None:
            thread.join(timeout)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            streams = list(self._streams.values())
        for stream in streams:
            stream.cancel()
