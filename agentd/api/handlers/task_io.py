"""Processes a person drives: a task started with a PTY or an open stdin, input
written to it, its stdin closed, signals, its terminal's size.

StartTask is a Bash call (classified, permission-checked, sandboxed and journaled like
any) made in the background with a terminal (agentd/calls/tasks.py); the model's Bash
schema is unchanged. The others reach a task only through its own session
(a task id of another session is not found), and each is a session event that names who
did it (the client's identity, as permission answers record it). Input is a client
stream: one event per stream, its bytes counted, so typing does not flood the journal;
it waits for the shim's acknowledgements (agentd/runs/shim/terminal.py), so a client
that floods is held back by gRPC's flow control and costs bounded memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from agentd.api.handlers.rpc import client_identity, require, unary
from agentd.api.terminals.tokens import TOKEN_SECONDS, TerminalTokens
from agentd.calls.tasks import TaskNotStarted, TaskRequest, TaskStarter
from agentd.foundation.errors import FailedPrecondition, InvalidRequest, NotFound
from agentd.runs.launch import Interactive
from agentd.runs.shim.client import ShimRun
from agentd.runs.shim.terminal import MAX_SIDE, SIGNALS
from agentd.runs.tasks import Task, TaskManager
from agentd.sessions import event_types as events
from agentd.sessions.session import SessionManager
from agentd_client.v1 import agentd_pb2 as pb

log = logging.getLogger(__name__)

# An `agentctl exec` whose client dropped: SIGHUP, then SIGKILL if it is still running.
HANGUP_GRACE_SECONDS = 2.0


class NotStarted(FailedPrecondition):
    """The Bash call behind StartTask failed: denied, or the sandbox could not start
    (calls/tasks.py's TaskNotStarted, at the API's edge)."""


class NoInput(FailedPrecondition):
    """The task cannot take what was sent: it is not running, has no stdin or no terminal."""


def _size(size: pb.TerminalSize, what: str) -> tuple[int, int]:
    if not (0 < size.rows <= MAX_SIDE and 0 < size.cols <= MAX_SIDE):
        raise InvalidRequest(f"{what} must have rows and cols between 1 and {MAX_SIDE}")
    return size.rows, size.cols


def _signal_name(raw: str) -> str:
    name = raw.strip().upper().removeprefix("SIG")
    if name not in SIGNALS:
        raise InvalidRequest(f"signal must be one of {', '.join(SIGNALS)}, not {raw[:20]!r}")
    return name


async def _pump(
    run: ShimRun, first: pb.TaskInput, requests: AsyncIterator[pb.TaskInput], written: list[int]
) -> str:
    """Copy the stream to the task until it ends ("closed", "detached") or the task does
    ("ended"), counting in `written[0]`; a stream cut off raises CancelledError. One
    copier for the whole stream, raced once against the task's end (not a wait set up
    per message: a keystroke is a message)."""

    async def copy() -> str:
        message: pb.TaskInput | None = first
        while message is not None:
            if message.detach:
                return "detached"
            if message.data:
                if not await run.write(message.data):
                    return "ended"
                written[0] += len(message.data)
            if message.close_stdin:
                run.close_input()
            message = await anext(aiter(requests), None)
        return "closed"

    copier = asyncio.ensure_future(copy())
    ended: asyncio.Future[Any] = asyncio.ensure_future(asyncio.shield(run.done))
    try:
        done, _ = await asyncio.wait({copier, ended}, return_when=asyncio.FIRST_COMPLETED)
        if copier in done:
            return copier.result()
        return "ended"
    finally:
        ended.cancel()
        copier.cancel()


class TaskIOHandlers:
    def __init__(
        self,
        sessions: SessionManager,
        starter: TaskStarter,
        tasks: TaskManager,
        emit: Callable[[str, events.EventBody], None],
        terminals: TerminalTokens | None = None,
        terminal_socket: str = "",
    ) -> None:
        self.sessions = sessions
        self.starter = starter
        self.tasks = tasks
        self._emit = emit
        # The terminal socket (api/terminals/) and its tokens; without them OpenTerminal
        # offers nothing and clients use WriteInput and ReadOutput.
        self.terminals = terminals
        self.terminal_socket = terminal_socket
        self._hangups: set[asyncio.Task[None]] = set()

    # what they share
    def _task(self, session_id: str, task_id: str) -> Task:
        self.sessions.get(require(session_id, "session_id"))
        task = self.tasks.get(session_id, require(task_id, "task_id"))
        if task is None:
            raise NotFound(f"no task {task_id[:40]!r} in session {session_id[:40]!r}")
        return task

    def _running(self, session_id: str, task_id: str) -> tuple[Task, ShimRun]:
        task = self._task(session_id, task_id)
        run = self.tasks.run_of(task)
        if run is None:
            raise NoInput(f"task {task.id} is not running (it is {task.status})")
        if not isinstance(run, ShimRun):
            raise NoInput(
                f"task {task.id} runs in the daemon's own process (outside the sandbox, or "
                "on a machine without setpriv and prlimit): it takes no input or signals; "
                "stop it with TaskStop"
            )
        return task, run

    def _terminal(self, task: Task) -> pb.TaskTerminal:
        run = self.tasks.run_of(task)
        out = pb.TaskTerminal(task_id=task.id, status=task.status, output_id=task.id)
        if isinstance(run, ShimRun) and not run.done.done():
            out.pty = run.pty is not None
            if run.pty is not None:
                out.size.rows, out.size.cols = run.pty
            out.stdin_open = run.stdin_open
        if task.exit_code is not None:
            out.exit_code, out.has_exit_code = task.exit_code, True
        return out

    def _event(self, task: Task, action: str, context: Any, **fields: Any) -> None:
        self.record(task, action, client_identity(context), **fields)

    # what the terminal socket's connections ask (api/terminals/channel.py TaskControl)
    def record(self, task: Task, action: str, by: str, **fields: Any) -> None:
        self._emit(
            task.session_id,
            events.TaskControlled(task_id=task.id, action=action, by=by, **fields),
        )

    def running(self, session_id: str, task_id: str) -> tuple[Task, ShimRun]:
        return self._running(session_id, task_id)

    def resize(self, task: Task, run: ShimRun, rows: int, cols: int, by: str) -> None:
        rows, cols = _size(pb.TerminalSize(rows=rows, cols=cols), "size")
        if run.pty is not None and run.pty != (rows, cols) and not run.done.done():
            run.resize(rows, cols)
            self.record(task, "resized", by, size=(rows, cols))

    def hang_up(self, task: Task, run: ShimRun) -> None:
        self._hang_up(task, run)

    # the RPCs
    @unary
    async def StartTask(self, request: pb.StartTaskRequest, context: Any) -> pb.TaskTerminal:
        session = self.sessions.get(require(request.session_id, "session_id"), open_only=True)
        pty = _size(request.pty, "pty") if request.HasField("pty") else None
        wanted = TaskRequest(
            command=require(request.command, "command"),
            description=request.description,
            tool_use_id=request.tool_use_id,
            interactive=Interactive(pty, request.stdin),
        )
        try:
            task = await self.starter.start(session, wanted)
        except TaskNotStarted as exc:
            raise NotStarted(str(exc)) from None
        self._event(
            task, "opened", context, size=(pty[0], pty[1]) if pty else None, stdin=request.stdin
        )
        return self._terminal(task)

    @unary
    async def GetTaskTerminal(self, request: pb.TaskRef, context: Any) -> pb.TaskTerminal:
        return self._terminal(self._task(request.session_id, request.task_id))

    @unary
    async def WriteInput(
        self, requests: AsyncIterator[pb.TaskInput], context: Any
    ) -> pb.WriteInputResponse:
        first = await anext(aiter(requests), None)
        if first is None:
            raise InvalidRequest("the first message must name the task (session_id, task_id)")
        task, run = self._running(first.session_id, first.task_id)
        # A stream that only holds the task to its client (`agentctl exec` without -i) is
        # allowed on a task that takes no input.
        if not run.stdin_open and not first.hangup_on_drop:
            raise NoInput(
                f"task {task.id} takes no input (started without a terminal or stdin, or closed)"
            )
        written, reason = [0], "dropped"
        try:
            reason = await _pump(run, first, requests, written)
        finally:
            self._event(task, "input", context, bytes=written[0], reason=reason)
            if first.hangup_on_drop and reason in ("dropped", "closed"):
                self._hang_up(task, run)
        return pb.WriteInputResponse(bytes=written[0], reason=reason)

    @unary
    async def OpenTerminal(
        self, request: pb.OpenTerminalRequest, context: Any
    ) -> pb.TerminalChannel:
        if request.input or request.hangup_on_drop:
            task, run = self._running(request.session_id, request.task_id)
            if request.input and not run.stdin_open:
                raise NoInput(
                    f"task {task.id} takes no input (started without a terminal or stdin, "
                    "or closed)"
                )
        else:
            task = self._task(request.session_id, request.task_id)
        # Offered only to a caller on this machine's API socket: the terminal socket is
        # beside it, with its permissions.
        if self.terminals is None or not str(context.peer()).startswith("unix:"):
            return pb.TerminalChannel()
        token = self.terminals.issue(
            task.session_id,
            task.id,
            request.uid,
            offset=request.offset,
            input=request.input,
            hangup_on_drop=request.hangup_on_drop,
            by=client_identity(context),
        )
        return pb.TerminalChannel(
            path=self.terminal_socket, token=token, expires_ms=int(TOKEN_SECONDS * 1000)
        )

    def _hang_up(self, task: Task, run: ShimRun) -> None:
        """The client that started it is gone without detaching: as a terminal's hang-up."""
        if run.done.done():
            return

        async def hang_up() -> None:
            run.signal("HUP")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(run.done), HANGUP_GRACE_SECONDS)
                return
            run.kill()

        job = asyncio.ensure_future(hang_up())
        self._hangups.add(job)
        job.add_done_callback(self._hangups.discard)
        log.info("task %s: its client dropped; hung up", task.id)

    @unary
    async def CloseInput(self, request: pb.TaskRef, context: Any) -> pb.TaskTerminal:
        task, run = self._running(request.session_id, request.task_id)
        run.close_input()
        self._event(task, "input_closed", context)
        return self._terminal(task)

    @unary
    async def SignalTask(self, request: pb.SignalTaskRequest, context: Any) -> pb.TaskTerminal:
        name = _signal_name(request.signal)
        task, run = self._running(request.session_id, request.task_id)
        if name == "KILL":
            task.status = "killed"
        run.signal(name)
        self._event(task, "signalled", context, signal=name)
        return self._terminal(task)

    @unary
    async def ResizeTask(self, request: pb.ResizeTaskRequest, context: Any) -> pb.TaskTerminal:
        rows, cols = _size(request.size, "size")
        task, run = self._running(request.session_id, request.task_id)
        if run.pty is None:
            raise NoInput(f"task {task.id} has no terminal to resize")
        if run.pty != (rows, cols):
            run.resize(rows, cols)
            self._event(task, "resized", context, size=(rows, cols))
        return self._terminal(task)
