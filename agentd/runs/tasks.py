"""Runs of commands and the background tasks among them.

Every Bash call is a run (agentd/runs/run.py) whose merged stdout/stderr is copied to a
bounded output file (agentd/runs/output/file.py): a sandboxed run under a shim of its own
(agentd/runs/shim/client.py, ShimRun), an unsandboxed one (or one on a machine without
setpriv/prlimit) by a reader thread in the daemon (InProcessRun). A foreground call
waits for its run; a background task, or a foreground call that reached its timeout, is
the same run registered with the TaskManager, and under a shim it outlives the daemon
(agentd/runs/shim/adopt.py).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import fcntl
import json
import logging
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentd.foundation import metrics
from agentd.foundation.errors import StorageFull
from agentd.runs.output.file import OutputFile
from agentd.runs.run import Run, Supervised
from agentd.sessions.event_types import EventBody, TaskFinished, TaskPayload, TaskStarted
from agentd.sessions.store import Store

log = logging.getLogger(__name__)

_F_SETPIPE_SZ = 1031
_READ_SIZE = 1 << 20


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

    def to_dict(self) -> TaskPayload:
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


class InProcessRun:
    """A process the daemon supervises itself, and the thread copying its output to an
    OutputFile (a Run that cannot outlive the daemon)."""

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
        emit: Callable[[str, EventBody], None],
        max_seconds: float,
        shim_root: str | None = None,
    ) -> None:
        self._store = store
        self._emit = emit
        self._max_seconds = max_seconds
        # Where the shims of tasks keep their socket and status (agentd/runs/shim/adopt.py); None:
        # tasks do not outlive the daemon.
        self.shim_root = shim_root
        self._tasks: dict[str, Task] = {}
        self._runs: dict[str, Run] = {}
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

    def adopt(self, task: Task, run: Run) -> None:
        """Make `run` a background task: tracked, evented, stopped with its session; a
        run under a shim also outlives this daemon (see agentd/runs/shim/adopt.py)."""
        if self.shim_root is not None and isinstance(run, Supervised):
            directory = os.path.join(self.shim_root, task.id)
            os.makedirs(self.shim_root, mode=0o700, exist_ok=True)
            os.mkdir(directory, 0o700)
            with open(os.path.join(directory, "task.json"), "x", encoding="utf-8") as f:
                json.dump(task.to_dict(), f)
            run.make_task(directory)
        self._emit(task.session_id, TaskStarted(task=task.to_dict()))
        metrics.task_started()
        self.follow(task, run)
        self._store.flush()  # the record of a task that may outlive us is on disk now

    def follow(self, task: Task, run: Run) -> None:
        """Track a running task (a new one, or one a previous daemon left) to its end."""
        self._tasks[task.id] = task
        self._runs[task.id] = run
        self._finished[task.id] = asyncio.Event()
        self._save(task)
        asyncio.ensure_future(self._watch(task, run))

    async def _watch(self, task: Task, run: Run) -> None:
        left = self._max_seconds - (time.time() * 1000 - task.started_ms) / 1000
        try:
            code = await asyncio.wait_for(asyncio.shield(run.done), max(left, 0.001))
        except TimeoutError:
            run.kill()
            code = await run.done
            task.status = "killed"
        run.output.finish(code)
        self._runs.pop(task.id, None)
        ended_ms = run.ended_ms if isinstance(run, Supervised) else 0
        self.record_end(task, code, run.killed, ended_ms or int(time.time() * 1000))
        self._finished.pop(task.id).set()

    def record_end(self, task: Task, code: int | None, killed: bool, ended_ms: int) -> None:
        """The end of a task, however learnt: stored, evented, told to the model."""
        task.exit_code = code
        if task.status == "running":
            task.status = "killed" if killed else ("completed" if code == 0 else "failed")
        task.ended_ms = ended_ms
        self._save(task)
        with contextlib.suppress(Exception):  # its session may be gone from the store
            self._emit(task.session_id, TaskFinished(task=task.to_dict()))
        if task.status != "killed":
            self._notices.setdefault(task.session_id, []).append(_notification(task))
        if self.shim_root is not None:
            self._store.flush()  # recorded for good before the shim's own record goes
            shutil.rmtree(os.path.join(self.shim_root, task.id), ignore_errors=True)

    def _save(self, task: Task) -> None:
        # On a full state disk the task runs on and is saved with its next change (its
        # shim's own record keeps it across a restart meanwhile); the store logs it.
        with contextlib.suppress(StorageFull):
            self._store.save_task(task.id, task.session_id, task.to_dict())

    def get(self, session_id: str, task_id: str) -> Task | None:
        task = self._tasks.get(task_id)
        return task if task is not None and task.session_id == session_id else None

    def is_running(self, task_id: str) -> bool:
        return task_id in self._runs

    def run_of(self, task: Task) -> Run | None:
        """The run of a running task (its input, signals, size: agentd/api/handlers/task_io.py)."""
        return self._runs.get(task.id)

    def list(self, session_id: str, include_finished: bool = True) -> list[TaskPayload]:
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
            if isinstance(run, Supervised) and self.shim_root is not None:
                run.detach()
                self._runs.pop(tid)
        await self.stop_all()

    def add_notice(self, session_id: str, text: str) -> None:
        """A notification for the model, added to the session's next result."""
        self._notices.setdefault(session_id, []).append(text)

    # builtins.list: in this class `list` is the method above.
    def take_notices(self, session_id: str) -> builtins.list[str]:
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
