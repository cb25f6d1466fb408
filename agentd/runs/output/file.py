"""A command's output file: its head up to a bound, then a marker, then its tail.

Written by one writer (a shim, agentd/runs/shim/supervisor.py, or the daemon's reader
thread for a run it supervises itself); read by anyone through the file at their own
offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import deque
from collections.abc import Callable

from agentd.runs.run import Output

# Seconds between progress updates of a running command.
PROGRESS_INTERVAL = 0.25
# The last line a progress update carries, at most this many bytes.
LAST_LINE_BYTES = 200


def open_output(path: str, group: int | None) -> int:
    """Create (or empty) an output file; its fd, for writing."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    if group is not None:
        # Readable by the sandbox identity's group (read-only bind at TASKS_MOUNT;
        # the state dir keeps everyone else out); writable by the daemon only.
        os.fchown(fd, -1, group)
        os.fchmod(fd, 0o640)
    return fd


class OutputFile:
    """The head of a stream up to `limit` bytes, then a marker and the last `tail` bytes.

    Written by one reader thread; read by anyone through the file, at their own
    offsets (ReadOutput, BashOutput, `tail -f` in the sandbox): `size` is how much of
    it is written, and `changed()` a future that resolves at the next write or the
    end. Memory use is the tail ring and the head text kept for the result.
    """

    def __init__(
        self,
        path: str,
        limit: int,
        tail: int = 65536,
        keep_head: int = 65536,
        group: int | None = None,
        fd: int | None = None,
    ) -> None:
        self.path = path
        self.id = os.path.basename(path).removesuffix(".output")
        self.limit = max(limit, 2 * tail)
        # `fd`: the file opened already (open_output), e.g. by the daemon for a shim.
        self._fd = open_output(path, group) if fd is None else fd
        self._written = 0  # bytes in the file's head part
        self.size = 0  # bytes in the file, marker and tail included
        self.total = 0  # bytes the command printed
        self.done = False
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self._tail_cap = tail
        self.head = bytearray()
        self._keep_head = keep_head
        self._last_line = b""
        self._partial = b""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._next: asyncio.Future[None] | None = None
        # Called once the file is complete (Outputs forgets it as a live output).
        self.on_finish: Callable[[], None] | None = None

    @property
    def written(self) -> int:
        """Bytes of the output's head in the file (the rest went to the tail ring)."""
        return self._written

    @property
    def truncated(self) -> bool:
        return self.total > self._written

    @property
    def last_line(self) -> str:
        return self._last_line.decode(errors="replace")

    def recent(self, offset: int, end: int) -> bytes | None:
        """Nothing is held in memory for readers: the file has it all."""
        return None

    def fits(self, n: int) -> bool:
        """The next `n` bytes go into the file's head whole (at `size`)."""
        return self.limit - self._tail_cap - self._written >= n

    def read_back(self, offset: int, end: int) -> bytes | None:
        """The file's bytes [offset, end), if its head holds them all."""
        if end > self._written or offset > end:
            return None
        return os.pread(self._fd, end - offset, offset)

    def changed(self) -> asyncio.Future[None]:
        """Resolves at the next write to the file or its end (call on the event loop)."""
        if self._next is None or self._next.done():
            self._loop = asyncio.get_running_loop()
            self._next = self._loop.create_future()
        return self._next

    def _notify(self) -> None:
        # Called by the writer thread after the file grew: wake readers, if any wait.
        fut, loop = self._next, self._loop
        if fut is not None and loop is not None:
            self._next = None
            with contextlib.suppress(RuntimeError):  # loop closed
                loop.call_soon_threadsafe(_resolve, fut)

    def write(self, data: bytes) -> None:
        self.total += len(data)
        room = self.limit - self._tail_cap - self._written
        if room > 0:
            part = data[:room]
            os.write(self._fd, part)
            self._written += len(part)
            self.size = self._written
        if len(self.head) < self._keep_head:
            self.head += data[: self._keep_head - len(self.head)]
        # The last `tail` bytes, always: the end of the output is what a result shows.
        self._tail.append(data)
        self._tail_size += len(data)
        while self._tail_size - len(self._tail[0]) >= self._tail_cap:
            self._tail_size -= len(self._tail.popleft())
        self._track_last_line(data)
        if room > 0:
            self._notify()

    def _track_last_line(self, data: bytes) -> None:
        end = data.rfind(b"\n")
        if end < 0:
            self._partial = (self._partial + data[-LAST_LINE_BYTES:])[-LAST_LINE_BYTES:]
            return
        start = data.rfind(b"\n", 0, end) + 1
        line = data[start:end] if start > 0 else self._partial + data[:end]
        self._last_line = line.rstrip(b"\r")[-LAST_LINE_BYTES:]
        self._partial = data[end + 1 :][-LAST_LINE_BYTES:]

    def tail_bytes(self) -> bytes:
        data = b"".join(self._tail)
        return data[-self._tail_cap :]

    def finish(self, exit_code: int | None) -> None:
        """Close the file: the marker and tail when the head bound was passed, then the code."""
        parts: list[bytes] = []
        self.tail_at, self.tail_len = self.size, 0
        if self.truncated:
            missing = self.total - self._written
            tail = self.tail_bytes()[-missing:]
            if missing > len(tail):
                dropped = missing - len(tail)
                parts.append(f"\n[… {dropped} bytes of output dropped …]\n".encode())
            self.tail_at += sum(len(p) for p in parts)
            self.tail_len = len(tail)
            parts.append(tail)
        if exit_code is not None:
            parts.append(f"\n[exited with code {exit_code}]\n".encode())
        for part in parts:
            os.write(self._fd, part)
            self.size += len(part)
        os.close(self._fd)
        self.done = True
        self._notify()
        if self.on_finish is not None:
            self.on_finish()


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def head_and_tail(out: Output, max_chars: int) -> tuple[str, bool]:
    """The output for a result: all of it when it fits, else its head and tail around a note."""
    if out.total <= max_chars:
        return bytes(out.head).decode(errors="replace"), False
    half = max_chars // 2
    head = bytes(out.head[:half]).decode(errors="ignore")
    tail = out.tail_bytes()[-half:].decode(errors="ignore")
    cut = out.total - len(head.encode()) - len(tail.encode())
    return f"{head}\n\n... [{cut} bytes truncated] ...\n\n{tail}", True
