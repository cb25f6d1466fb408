"""Runs of sandboxed commands, their bounded output, and the background tasks among them.

Every Bash call is a Run: a sandboxed process whose merged stdout/stderr a reader
thread copies to an output file. The file keeps the head of the output up to a
bound, then a marker, then the tail (a small ring kept in memory); so a command
may print gigabytes and neither the daemon's memory nor the disk grows with it.
A foreground call waits for its Run; a background task, or a foreground call that
reached its timeout, is the same Run registered with the TaskManager.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import secrets
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentd import metrics
from agentd.store import Store

log = logging.getLogger(__name__)

_F_SETPIPE_SZ = 1031
_READ_SIZE = 1 << 20
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


def head_and_tail(out: OutputFile, max_chars: int) -> tuple[str, bool]:
    """The output for a result: all of it when it fits, else its head and tail around a note."""
    if out.total <= max_chars:
        return bytes(out.head).decode(errors="replace"), False
    half = max_chars // 2
    head = bytes(out.head[:half]).decode(errors="ignore")
    tail = out.tail_bytes()[-half:].decode(errors="ignore")
    cut = out.total - len(head.encode()) - len(tail.encode())
    return f"{head}\n\n... [{cut} bytes truncated] ...\n\n{tail}", True


@dataclass
class Task:
    id: str
    session_id: str
    command: str
    description: str
    output_path: str
    tool_use_id: str
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    status: str = "running"  # running, completed, failed, killed
    exit_code: int | None = None
    ended_ms: int = 0
    # where BashOutput's next read starts
    read_offset: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "command": self.command,
            "description": self.description,
            "status": self.status,
            "exit_code": self.exit_code,
            "output_path": self.output_path,
            "started_ms": self.started_ms,
            "ended_ms": self.ended_ms,
            "tool_use_id": self.tool_use_id,
        }


class Run:
    """One sandboxed process and the thread copying its output to an OutputFile."""

    def __init__(self, process: Any, read_fd: int, output: OutputFile) -> None:
        self.process = process
        self.output = output
        self.exit_code: int | None = None
        self.killed = False
        loop = asyncio.get_running_loop()
        self._reader_done = loop.create_future()
        with contextlib.suppress(OSError):  # a bigger pipe is an optimisation only
            fcntl.fcntl(read_fd, _F_SETPIPE_SZ, _READ_SIZE)
        threading.Thread(
            target=self._read, args=(read_fd, loop), daemon=True, name=f"run-{process.pid}"
        ).start()
        self.done = asyncio.ensure_future(self._wait())

    def _read(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        try:
            while chunk := os.read(fd, _READ_SIZE):
                self.output.write(chunk)
        except OSError:
            log.exception("reading command output failed")
        finally:
            os.close(fd)
            loop.call_soon_threadsafe(self._reader_done.set_result, None)

    async def _wait(self) -> int:
        code = await self.process.wait()
        # Everything the command printed is read before the run counts as finished;
        # the pipe closes when the last process holding it ends (the whole sandbox).
        await self._reader_done
        self.exit_code = code
        return code

    def kill(self) -> None:
        self.killed = True
        self.process.kill()


def task_from(body: dict[str, Any]) -> Task:
    """A Task from its stored body (unknown keys ignored)."""
    return Task(**{k: v for k, v in body.items() if k in Task.__dataclass_fields__})


def new_task_id() -> str:
    return "b" + secrets.token_hex(4)


class TaskManager:
    """Background tasks of every session: start, list, stop, and their end as events."""

    def __init__(
        self,
        store: Store,
        emit: Callable[[str, str, dict[str, Any]], None],
        max_seconds: float,
        shim_root: str | None = None,
    ) -> None:
        self._store = store
        self._emit = emit
        self._max_seconds = max_seconds
        # Where the shims of tasks keep their socket and status (agentd/readopt.py); None:
        # tasks do not outlive the daemon.
        self.shim_root = shim_root
        self._tasks: dict[str, Task] = {}
        self._runs: dict[str, Any] = {}  # task id -> Run or ShimRun
        self._finished: dict[str, asyncio.Event] = {}
        # session id -> notifications for the model, added to the session's next result
        self._notices: dict[str, list[str]] = {}
        for body in store.load_tasks():
            self.remember(task_from(body))
        if shim_root is None:
            self.end_orphans()

    def remember(self, task: Task) -> None:
        self._tasks[task.id] = task

    def tasks(self) -> list[Task]:
        return list(self._tasks.values())

    def end_orphans(self) -> None:
        """Tasks recorded running that no shim carries on: the daemon went down with them."""
        for task in self._tasks.values():
            if task.status == "running" and task.id not in self._runs:
                task.status, task.ended_ms = "killed", int(time.time() * 1000)
                self._save(task)

    def running_count(self) -> int:
        return len(self._runs)

    def adopt(self, task: Task, run: Any) -> None:
        """Make `run` a background task: tracked, evented, stopped with its session; a
        run under a shim also outlives this daemon (see agentd/readopt.py)."""
        if self.shim_root is not None and hasattr(run, "make_task"):
            directory = os.path.join(self.shim_root, task.id)
            os.makedirs(self.shim_root, mode=0o700, exist_ok=True)
            os.mkdir(directory, 0o700)
            with open(os.path.join(directory, "task.json"), "x", encoding="utf-8") as f:
                json.dump(task.to_dict(), f)
            run.make_task(directory)
        self._emit(task.session_id, "task_started", {"task": task.to_dict()})
        metrics.task_started()
        self.follow(task, run)
        self._store.flush()  # the record of a task that may outlive us is on disk now

    def follow(self, task: Task, run: Any) -> None:
        """Track a running task (a new one, or one a previous daemon left) to its end."""
        self._tasks[task.id] = task
        self._runs[task.id] = run
        self._finished[task.id] = asyncio.Event()
        self._save(task)
        asyncio.ensure_future(self._watch(task, run))

    async def _watch(self, task: Task, run: Any) -> None:
        left = self._max_seconds - (time.time() * 1000 - task.started_ms) / 1000
        try:
            code = await asyncio.wait_for(asyncio.shield(run.done), max(left, 0.001))
        except TimeoutError:
            run.kill()
            code = await run.done
            task.status = "killed"
        run.output.finish(code)
        self._runs.pop(task.id, None)
        self.record_end(
            task, code, run.killed, getattr(run, "ended_ms", 0) or int(time.time() * 1000)
        )
        self._finished.pop(task.id).set()

    def record_end(self, task: Task, code: int | None, killed: bool, ended_ms: int) -> None:
        """The end of a task, however learnt: stored, evented, told to the model."""
        task.exit_code = code
        if task.status == "running":
            task.status = "killed" if killed else ("completed" if code == 0 else "failed")
        task.ended_ms = ended_ms
        self._save(task)
        with contextlib.suppress(Exception):  # its session may be gone from the store
            self._emit(task.session_id, "task_finished", {"task": task.to_dict()})
        if task.status != "killed":
            self._notices.setdefault(task.session_id, []).append(_notification(task))
        if self.shim_root is not None:
            self._store.flush()  # recorded for good before the shim's own record goes
            shutil.rmtree(os.path.join(self.shim_root, task.id), ignore_errors=True)

    def _save(self, task: Task) -> None:
        self._store.save_task(task.id, task.session_id, task.to_dict())

    def get(self, session_id: str, task_id: str) -> Task | None:
        task = self._tasks.get(task_id)
        return task if task is not None and task.session_id == session_id else None

    def is_running(self, task_id: str) -> bool:
        return task_id in self._runs

    def list(self, session_id: str, include_finished: bool = True) -> list[dict[str, Any]]:
        return [
            t.to_dict()
            for t in self._tasks.values()
            if t.session_id == session_id and (include_finished or t.id in self._runs)
        ]

    async def stop(self, task: Task) -> None:
        run = self._runs.get(task.id)
        if run is None:
            return
        finished = self._finished[task.id]
        task.status = "killed"
        run.kill()
        await finished.wait()  # _watch has recorded the end

    async def stop_session(self, session_id: str) -> None:
        await asyncio.gather(
            *(
                self.stop(t)
                for t in list(self._tasks.values())
                if t.session_id == session_id and t.id in self._runs
            )
        )

    async def stop_all(self) -> None:
        await asyncio.gather(*(self.stop(self._tasks[tid]) for tid in list(self._runs)))

    async def leave(self) -> None:
        """The daemon stops and tasks live on: let go of those under a shim (the next
        daemon takes them over); stop the others, which cannot outlive us."""
        for tid, run in list(self._runs.items()):
            if hasattr(run, "detach") and self.shim_root is not None:
                run.detach()
                self._runs.pop(tid)
        await self.stop_all()

    def take_notices(self, session_id: str) -> list[str]:
        return self._notices.pop(session_id, [])


def _notification(task: Task) -> str:
    what = task.description or task.command
    verb = "completed" if task.status == "completed" else f"failed with exit code {task.exit_code}"
    return (
        "<task-notification>\n"
        f"<task-id>{task.id}</task-id>\n"
        f"<output-file>{task.output_path}</output-file>\n"
        f"<status>{task.status}</status>\n"
        f'<summary>Background command "{what}" {verb}</summary>\n'
        "</task-notification>"
    )
