"""Taking over the tasks a previous daemon left running under their shim_client.

Each task that may outlive the daemon has a directory `<state_dir>/shims/<task id>/`
(0700, the daemon's): `task.json` (the task, written by the daemon when it became one),
`shim.json` (the shim's pid and start time) and `ctl.sock` (written by the shim), and
`status.json` once the command ended (exit code, end time). At start, before serving,
every such directory is settled: an ended task gets its real exit code and end time and
its task_finished event; a running one is followed again (status, BashOutput, TaskStop,
ReadOutput, the notification); one whose session is closed or gone is stopped; one
whose shim vanished is recorded killed. Nothing is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from collections.abc import Callable
from typing import Any

from agentd.foundation import metrics
from agentd.runs.shim import client as shim_client
from agentd.runs.shim import protocol
from agentd.runs.tasks import Task, TaskManager, task_from

log = logging.getLogger(__name__)

_TASK_ID = re.compile(r"b[0-9a-f]{8}")
# Seconds to wait for the status of a shim that is ending as we look.
_ENDING_GRACE = 2.0


async def readopt(
    tasks: TaskManager,
    outputs: Any,
    session_open: Callable[[str], bool],
    on_follow: Callable[[Task, shim_client.ShimRun], Any] | None = None,
    session_known: Callable[[str], bool] | None = None,
) -> int:
    """Settle every shim directory; the number of running tasks taken over.
    `on_follow(task, run)` for each one taken over (what else follows it: its changes).
    A task of a session the database does not know (`session_known`) is left running,
    untouched, and reported: the database may have lost the session."""
    root = tasks.shim_root
    adopted = 0
    left: list[str] = []
    if root is not None and os.path.isdir(root):
        for name in sorted(os.listdir(root)):
            path = os.path.join(root, name)
            if not _TASK_ID.fullmatch(name):
                continue
            try:
                dir_fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if _of_unknown_session(tasks, dir_fd, name, session_open, session_known):
                    left.append(name)
                    continue
                adopted += await _settle(tasks, outputs, session_open, path, dir_fd, on_follow)
            except Exception:  # one broken directory must not keep the daemon down
                log.exception("cannot take over task %s", name)
            finally:
                os.close(dir_fd)
    tasks.end_orphans()
    if left:
        log.warning(
            "left %d task(s) of sessions the state database does not know running, in %s "
            "(%s): not stopped, in case they are of sessions a lost or restored journal no "
            "longer holds; stop them by hand once sure",
            len(left),
            root,
            ", ".join(left[:5]),
        )
    return adopted


def _of_unknown_session(
    tasks: TaskManager,
    dir_fd: int,
    name: str,
    session_open: Callable[[str], bool],
    session_known: Callable[[str], bool] | None,
) -> bool:
    """Whether the shim in `dir_fd` carries a task neither the database nor its session
    is known to (one the database knows is settled as usual)."""
    if session_known is None or any(t.id == name for t in tasks.tasks()):
        return False
    body = protocol.read_json(dir_fd, "task.json")
    session_id = body.get("session_id") if body else None
    return (
        isinstance(session_id, str)
        and not session_open(session_id)
        and not session_known(session_id)
    )


async def _settle(
    tasks: TaskManager,
    outputs: Any,
    session_open: Callable[[str], bool],
    path: str,
    dir_fd: int,
    on_follow: Callable[[Task, shim_client.ShimRun], Any] | None = None,
) -> int:
    name = os.path.basename(path)
    known = {t.id: t for t in tasks.tasks()}
    body = protocol.read_json(dir_fd, "task.json")
    task = known.get(name) or (task_from(body) if body and body.get("id") == name else None)
    if task is None or task.status != "running":
        shim_client.kill_stray(dir_fd)  # no task (or one already ended) for it: reap
        shim_client.remove_dir(path)
        return 0
    tasks.remember(task)
    sock = await shim_client.reconnect(path, dir_fd)
    if sock is None:
        _record_status(tasks, task, dir_fd, await _wait_status(dir_fd))
        return 0
    try:
        fd = os.open(task.output_path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        fd = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    output = shim_client.ShimOutput(task.output_path, fd, {"size": os.fstat(fd).st_size})
    run = shim_client.ShimRun(sock, output)
    run._op({"op": "hello"})
    # Its answer says whether it has a terminal (and its size): known before anyone asks.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(run.stated.wait(), _ENDING_GRACE)
    if not session_open(task.session_id):
        # Its session was closed while no daemon ran: stopped now, as closing does.
        task.status = "killed"
        run.kill()
        code = await run.done
        tasks.record_end(task, code, True, run.ended_ms)
        log.info("task %s of closed session %s stopped", task.id, task.session_id)
        return 0
    outputs.add(task.session_id, task.tool_use_id, output)
    tasks.follow(task, run)
    if on_follow is not None:
        await on_follow(task, run)
    metrics.task_readopted()
    return 1


async def _wait_status(dir_fd: int) -> dict[str, Any] | None:
    """status.json, waiting a little if the shim is alive (it is ending right now); a
    shim alive but silent past that is killed (its sandbox with it)."""
    deadline = time.monotonic() + _ENDING_GRACE
    while (status := protocol.read_json(dir_fd, protocol.STATUS_NAME)) is None:
        info = protocol.read_json(dir_fd, protocol.SHIM_NAME) or {}
        pid = info.get("pid")
        alive = isinstance(pid, int) and protocol.start_time(pid) == info.get("start")
        if not alive or time.monotonic() > deadline:
            shim_client.kill_stray(dir_fd)
            return None
        await asyncio.sleep(0.05)
    return status


def _record_status(
    tasks: TaskManager, task: Task, dir_fd: int, status: dict[str, Any] | None
) -> None:
    """A task that ended while no daemon ran: its real exit code and end time."""
    if status is None:
        tasks.record_end(task, None, True, int(time.time() * 1000))
        return
    code = status.get("code")
    ended = status.get("ended_ms")
    with contextlib.suppress(Exception):
        tasks.record_end(
            task,
            code if isinstance(code, int) else None,
            bool(status.get("killed")),
            ended if isinstance(ended, int) else int(time.time() * 1000),
        )
