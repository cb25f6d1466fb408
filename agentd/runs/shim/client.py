"""The daemon's side of the shims (agentd/runs/shim/supervisor.py): follow a run under a
shim (ShimRun, ShimOutput: a Run and an Output, agentd/runs/run.py; started by
agentd/runs/shim/spawn.py), its terminal's output relayed live, and find the shims of
tasks a previous daemon left running.

What comes from a shim is checked like any peer's input (bounded messages, typed
fields); the files the daemon reads back (shim.json, status.json) are in its own
private state dir, which no sandbox can reach.
"""

from __future__ import annotations

import array
import asyncio
import base64
import contextlib
import json
import logging
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from agentd.runs.output.file import LAST_LINE_BYTES, _resolve
from agentd.runs.output.registry import COALESCE
from agentd.runs.shim import protocol, terminal

log = logging.getLogger(__name__)

TAIL = 65536
KEEP_HEAD = 65536
# A terminal's latest output, as its shim sent it live, kept for followers (so a
# keystroke's echo is relayed without a read of the file); older bytes come from the file.
RECENT_BYTES = 65536
# Messages taken from a shim per wake-up of the loop.
READS_PER_WAKEUP = 64


class ShimOutput:
    """A shim's output file as the daemon sees it: how far written (from the shim's
    updates), woken readers, and the head and tail read back from the file at the end."""

    def __init__(self, path: str, fd: int, state: dict[str, Any] | None = None) -> None:
        self.path = path
        self.id = os.path.basename(path).removesuffix(".output")
        # Read (and at most an end line appended) by the daemon; closed when dropped.
        self._file = os.fdopen(fd, "r+b", buffering=0)
        self._fd = fd
        self.size = 0
        self.total = 0
        self.done = False
        self._line = ""
        self._end: dict[str, Any] = {}
        self._head: bytes | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._next: asyncio.Future[None] | None = None
        self.on_finish: Callable[[], None] | None = None
        # The bytes at [_recent_at, _recent_at + len(_recent)) of the file, sent live.
        self._recent = bytearray()
        self._recent_at = 0
        # Seconds its followers let output gather after a wake-up (registry.COALESCE
        # unless it is a terminal's).
        self.coalesce = COALESCE
        # Followers that take the live bytes as they come (the terminal socket's caught-up
        # connections): called with (offset, bytes) at each, and with (size, b"") when
        # the size moved otherwise; one that answers False is dropped (it fell behind).
        self.relays: list[Callable[[int, bytes], bool]] = []
        if state:
            self.update(state)

    @property
    def truncated(self) -> bool:
        return self.done and self.total > int(self._end.get("written", self.total))

    @property
    def last_line(self) -> str:
        return self._line

    @property
    def head(self) -> bytes:
        """The output's first KEEP_HEAD bytes (so far, while it runs)."""
        if self._head is not None:
            return self._head
        written = int(self._end.get("written", self.size)) if self.done else self.size
        head = os.pread(self._fd, min(KEEP_HEAD, written), 0)
        if self.done:
            self._head = head
        return head

    def tail_bytes(self) -> bytes:
        """The output's last bytes (up to TAIL), from the file's tail part and head part."""
        if not self.done:
            return b""
        end = self._end
        written = int(end.get("written", self.total))
        if self.total <= written:
            n = min(TAIL, self.total)
            return os.pread(self._fd, n, self.total - n)
        tail_at, tail_len = int(end.get("tail_at", 0)), int(end.get("tail_len", 0))
        tail = os.pread(self._fd, tail_len, tail_at)
        more = min(TAIL - tail_len, written) if self.total - written <= tail_len else 0
        return (os.pread(self._fd, more, written - more) if more > 0 else b"") + tail

    def recent(self, offset: int, end: int) -> bytes | None:
        """The file's bytes [offset, end) if they were sent live and are still kept."""
        start = offset - self._recent_at
        if start < 0 or end - self._recent_at > len(self._recent) or end <= offset:
            return None
        return bytes(self._recent[start : end - self._recent_at])

    def live(self, at: int, total: int, data: bytes) -> None:
        """`data`, written to the file at `at`, as the shim read it from the terminal.
        Bytes an update already covered are not kept twice; after a gap (a frame the
        shim could not send), the kept bytes start again at `at`."""
        end = at + len(data)
        if end <= self.size or not data:
            return
        if at != self.size or self._recent_at + len(self._recent) != at:
            if at < self.size:
                return  # straddles what an update covered: never so on one connection
            self._recent.clear()
            self._recent_at = at
        self._recent += data
        if len(self._recent) > RECENT_BYTES:
            drop = len(self._recent) - RECENT_BYTES
            del self._recent[:drop]
            self._recent_at += drop
        self.size = end
        self.total = max(self.total, total)
        if self.relays:
            self.relays = [relay for relay in self.relays if relay(at, data)]
        self._notify()

    def _moved(self) -> None:
        if self.relays:
            self.relays = [relay for relay in self.relays if relay(self.size, b"")]

    def changed(self) -> asyncio.Future[None]:
        if self._next is None or self._next.done():
            self._loop = asyncio.get_running_loop()
            self._next = self._loop.create_future()
        return self._next

    def _notify(self) -> None:
        fut, self._next = self._next, None
        if fut is not None:
            _resolve(fut)

    def update(self, msg: dict[str, Any]) -> None:
        size, total = msg.get("size"), msg.get("total")
        if isinstance(size, int) and size >= self.size:
            self.size = size
        if isinstance(total, int) and total >= self.total:
            self.total = total
        line = msg.get("line")
        if isinstance(line, str):
            self._line = line[-LAST_LINE_BYTES:]
        self._moved()
        self._notify()

    def ended(self, msg: dict[str, Any]) -> None:
        """The shim finished the file (`msg` its exit message), or vanished (`{}`)."""
        if self.done:
            return
        self._end = {k: v for k, v in msg.items() if isinstance(v, int)}
        self.update(msg)
        if not msg:
            self.size = self.total = os.fstat(self._fd).st_size
            self._end = {"written": self.total}
        self.done = True
        self._recent = bytearray()
        self._moved()
        self.relays = []
        self._notify()
        if self.on_finish is not None:
            self.on_finish()

    def finish(self, exit_code: int | None) -> None:
        """For a task the shim wrote the end line; a run made a task after it ended, not."""
        if exit_code is not None and not self._end.get("task", True) and self.done:
            line = f"\n[exited with code {exit_code}]\n".encode()
            with contextlib.suppress(OSError):
                os.pwrite(self._fd, line, self.size)
                self.size += len(line)
            self._end["task"] = True
        self.ended(self._end)


class ShimRun:
    """A run under a shim, with Run's face: output, done (the exit code), kill."""

    def __init__(self, sock: socket.socket, output: ShimOutput) -> None:
        self.output = output
        self.exit_code: int | None = None
        self.killed = False
        self.ended_ms = 0
        self.pid = -1
        self._task_dir: str | None = None
        self._sock = sock
        self._fd = sock.fileno()
        self._reading = False
        self._loop = asyncio.get_running_loop()
        sock.setblocking(False)
        # Its PTY's size (None: no PTY), whether its stdin takes input, and the input
        # sent to the shim not yet acknowledged (at most terminal.INPUT_WINDOW).
        self.pty: tuple[int, int] | None = None
        self.stdin_open = False
        self._unacked = 0
        self._room = asyncio.Event()
        self._room.set()
        # Input goes as binary INPUT messages once the shim is known to read them (one
        # this daemon forked: set_terminal; an adopted one: its "state" says so).
        self._binary_input = False
        # Set once the shim said what it is (its "state", the answer to "hello").
        self.stated = asyncio.Event()
        # Whether it serves a terminal's client handed to it (links.py: one this daemon
        # forked with a PTY, or one whose state says so), and the clients it holds, by
        # link id: called with its "unlinked" message and the connection handed back.
        self.can_link = False
        self._links: dict[int, Callable[[dict[str, Any], int | None], None]] = {}
        self.done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._serving = asyncio.ensure_future(self._serve())

    async def _serve(self) -> None:
        """Follow the shim until its end: its messages are read as they come, by a
        reader the loop calls (no wait set up per message), then the end is recorded."""
        ending: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        self._loop.add_reader(self._fd, self._readable, ending)
        self._reading = True
        try:
            end = await ending
        finally:
            self._stop_reading()
        self._sock.close()
        if not end and self._task_dir is not None:
            # The end may have been recorded and not sent: a task's shim writes it first.
            end = _recorded_end(self._task_dir) or {}
        code = end.get("code")
        self.exit_code = code if isinstance(code, int) else 137  # the shim vanished
        self.killed = self.killed or bool(end.get("killed"))
        ended = end.get("ended_ms")
        self.ended_ms = ended if isinstance(ended, int) else int(time.time() * 1000)
        self.output.ended(end)
        self.stdin_open = False
        self._room.set()  # a writer waiting for room learns of the end
        self.stated.set()
        if not self.done.done():
            self.done.set_result(self.exit_code)

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def _readable(self, ending: asyncio.Future[dict[str, Any]]) -> None:
        """Take what the shim sent (a bounded number of messages a call, so a shim that
        floods shares the loop); resolve `ending` at its end, or when it is gone."""
        for _ in range(READS_PER_WAKEUP):
            try:
                data, ancillary, _, _ = self._sock.recvmsg(
                    protocol.MAX_MESSAGE, _FD_SPACE, socket.MSG_CMSG_CLOEXEC
                )
                if ancillary:  # a terminal's connection handed back (links.py)
                    self._handed_back(data, _fds(ancillary))
                    continue
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionResetError:
                # The shim exited with an op of ours unread (a "task" sent as it ended):
                # the kernel reports that once, before what the shim sent last (its
                # exit), which the next read returns.
                continue
            except OSError:
                data = b""
            end = self._message(data) if data else {}
            if end is not None:
                self._stop_reading()
                if not ending.done():
                    ending.set_result(end)
                return

    def _message(self, data: bytes) -> dict[str, Any] | None:
        """One message from the shim; its exit message when it is that."""
        if data[0] == protocol.LIVE:
            if len(data) > protocol.LIVE_HEADER.size:
                _, at, total = protocol.LIVE_HEADER.unpack_from(data)
                self.output.live(at, total, data[protocol.LIVE_HEADER.size :])
            return None
        try:
            msg = json.loads(data)
            kind = msg["ev"]
        except (ValueError, KeyError, TypeError):
            return None
        if kind in ("out", "state"):
            self.output.update(msg)
            if isinstance(msg.get("pid"), int):
                self.pid = msg["pid"]
            if kind == "state":
                self._binary_input = msg.get("binary_input") is True
                self.can_link = msg.get("link") is True
                self._input_state(msg)
                self.stated.set()
        elif kind == "input":
            self._input_state(msg)
        elif kind == "wrote" and isinstance(msg.get("n"), int):
            self._unacked = max(0, self._unacked - msg["n"])
            if self._unacked < terminal.INPUT_WINDOW:
                self._room.set()
        elif kind == "unlinked":
            self._unlinked(msg, None)
        elif kind == "exit":
            return msg if isinstance(msg, dict) else {}
        return None

    def _handed_back(self, data: bytes, fds: list[int]) -> None:
        try:
            msg = json.loads(data)
        except ValueError:
            msg = None
        if not isinstance(msg, dict) or msg.get("ev") != "unlinked" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            return
        self._unlinked(msg, fds[0])

    def _unlinked(self, msg: dict[str, Any], fd: int | None) -> None:
        link_id = msg.get("link")
        told = self._links.pop(link_id, None) if isinstance(link_id, int) else None
        if told is None:
            if fd is not None:
                os.close(fd)
            return
        told(msg, fd)

    def link(
        self, link_id: int, fd: int, offset: int, told: Callable[[dict[str, Any], int | None], None]
    ) -> bool:
        """Hand a terminal's client connection (`fd`, a copy: the caller keeps its own) to
        the shim from output `offset`; `told` gets its "unlinked" message and the
        connection handed back (or None: the client went). False: not handed over."""
        if not self.can_link or self.done.done():
            return False
        header = protocol.LINK_HEADER.pack(protocol.LINK, link_id, offset)
        try:
            self._sock.sendmsg(
                [header], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
            )
        except OSError:
            return False
        self._links[link_id] = told
        return True

    def unlink(self, link_id: int) -> None:
        """Take a client back without waiting (its connection closed here)."""
        if self._links.pop(link_id, None) is not None:
            self._op({"op": "unlink", "link": link_id})

    def _op(self, body: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            self._sock.send(json.dumps(body).encode())

    def kill(self) -> None:
        self.killed = True
        self._op({"op": "kill"})

    def _input_state(self, msg: dict[str, Any]) -> None:
        size = msg.get("pty")
        if isinstance(size, list) and len(size) == 2 and terminal.valid_size(*size):
            self.pty = (size[0], size[1])
            self.output.coalesce = terminal.OUTPUT_COALESCE
        if isinstance(msg.get("stdin_open"), bool):
            self.stdin_open = msg["stdin_open"]

    def set_terminal(self, pty: tuple[int, int] | None, stdin: bool) -> None:
        """What it was started with (the shim's state says it again after a restart)."""
        self.pty = pty
        self.stdin_open = pty is not None or stdin
        self._binary_input = True
        self.can_link = pty is not None
        if pty is not None:
            self.output.coalesce = terminal.OUTPUT_COALESCE

    async def write(self, data: bytes) -> bool:
        """Send `data` to its stdin, waiting while a window's worth is unacknowledged
        (so a client that floods waits, and its stream with it); False once it ended."""
        view = memoryview(data)
        while view:
            while self._unacked >= terminal.INPUT_WINDOW and not self.done.done():
                self._room.clear()
                await self._room.wait()
            if self.done.done() or not self.stdin_open:
                return False
            part = view[: min(len(view), terminal.INPUT_WINDOW - self._unacked, 32768)]
            self._unacked += len(part)
            if self._binary_input:
                body = bytes([protocol.INPUT]) + part
            else:
                msg = {"op": "input", "data": base64.b64encode(part).decode()}
                body = json.dumps(msg).encode()
            try:
                # Waits for room on the control socket: input is never dropped there.
                await asyncio.get_running_loop().sock_sendall(self._sock, body)
            except OSError:
                return False
            except BaseException:  # cancelled (its client went) before it was sent
                self._unacked -= len(part)
                raise
            view = view[len(part) :]
        return True

    def write_now(self, data: bytes) -> bool:
        """Send `data` (a keystroke's worth) to its stdin at once if the input window has
        room and the control socket takes it; False: nothing was sent (use write())."""
        if (
            self.done.done()
            or not self.stdin_open
            or not self._binary_input
            or len(data) > 32768
            or self._unacked + len(data) > terminal.INPUT_WINDOW
        ):
            return False
        try:
            self._sock.send(bytes([protocol.INPUT]) + data)
        except OSError:
            return False
        self._unacked += len(data)
        return True

    def close_input(self) -> None:
        self._op({"op": "close_input"})

    def signal(self, name: str) -> None:
        """INT, TERM, HUP or KILL to its processes (KILL: as kill())."""
        if name == "KILL":
            self.kill()
        else:
            self._op({"op": "signal", "sig": name})

    def resize(self, rows: int, cols: int) -> None:
        self._op({"op": "resize", "rows": rows, "cols": cols})
        self.pty = (rows, cols)

    def make_task(self, directory: str) -> None:
        """Outlive this daemon: the shim listens in `directory` and records its end there."""
        self._task_dir = directory
        self._op({"op": "task", "dir": directory})

    def detach(self) -> None:
        """Let go without stopping it (a task at the daemon's stop)."""
        self._stop_reading()
        self._serving.cancel()
        self._sock.close()


_FD_SPACE = socket.CMSG_SPACE(array.array("i").itemsize)


def _fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return list(fds)


def _recorded_end(directory: str) -> dict[str, Any] | None:
    """The end a task's shim recorded in its directory (the daemon's own, 0700)."""
    try:
        dir_fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        return protocol.read_json(dir_fd, protocol.STATUS_NAME)
    except OSError:
        return None
    finally:
        os.close(dir_fd)


# ---- a previous daemon's shims ----


async def reconnect(directory: str, dir_fd: int) -> socket.socket | None:
    """A control connection to the shim listening in `directory`, checked to be the shim
    that wrote shim.json there (its pid and start time); None when none answers."""
    info = protocol.read_json(dir_fd, protocol.SHIM_NAME) or {}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(
            sock, f"/proc/self/fd/{dir_fd}/{protocol.SOCKET_NAME}"
        )
    except OSError:
        sock.close()
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    pid = int.from_bytes(creds[0:4], sys.byteorder)
    uid = int.from_bytes(creds[4:8], sys.byteorder)
    if uid != os.geteuid() or pid != info.get("pid"):
        log.warning("%s: the process on its socket is not its shim; not adopted", directory)
        sock.close()
        return None
    return sock


def kill_stray(dir_fd: int) -> None:
    """SIGKILL a shim that does not answer, if shim.json still names a live process
    (same pid and start time: never a reused pid). Its sandbox dies with it."""
    info = protocol.read_json(dir_fd, protocol.SHIM_NAME) or {}
    pid, start = info.get("pid"), info.get("start")
    if isinstance(pid, int) and pid > 1 and start == protocol.start_time(pid) and start != -1:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


def remove_dir(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
