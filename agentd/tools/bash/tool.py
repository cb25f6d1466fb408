"""Bash: one command in the session's sandbox, output live, cwd carried between calls."""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Callable
from typing import Any, ClassVar, NotRequired, TypedDict

from agentd.changes.prompt import made_by
from agentd.changes.tracked import Tracked
from agentd.foundation.errors import InputError
from agentd.fs import identity as fsidentity
from agentd.network import service as network_service
from agentd.runs import launch
from agentd.runs.channels import Channels, contained_cwd
from agentd.runs.output.file import PROGRESS_INTERVAL, head_and_tail
from agentd.runs.output.registry import sandbox_path
from agentd.runs.run import Output, Run
from agentd.runs.tasks import Task
from agentd.sandboxing import policy as sandbox_policy
from agentd.sandboxing.mode import SandboxMode
from agentd.tools.base import Hints, Tool, ToolContext, ToolResult
from agentd.tools.bash import result as bash_result
from agentd.tools.bash.result import MAX_OUTPUT_CHARS

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
# Seconds between progress updates of a command that prints nothing.
HEARTBEAT = 1.0

DESCRIPTION = """\
Runs a bash command in the session's sandbox and returns its output (stdout and \
stderr interleaved as written).

- The working directory carries over between calls while it stays inside the \
workspace; a cd outside is undone. Shell variables and exports do not carry over.
- Only the workspace and a per-session temp dir ($TMPDIR) are writable; the \
network is off unless the session allows it.
- A command that runs without anyone's approval because it only reads runs with \
the workspace read-only and no network. If it turns out to need to write, ask the \
user to allow it rather than retrying.
- dangerouslyDisableSandbox: true runs the command outside the sandbox, only in a \
session that allows it and only after the user approves that call.
- timeout is in milliseconds (default 120000, at most 600000). A command still \
running at its timeout moves to the background: read its output file with Read, \
stop it with TaskStop.
- run_in_background: true returns at once with a task id and an output file; you \
are told when it ends.
- Output over 30000 characters is saved to a file you can Read, and a 2KB preview \
is shown (a failed command's head and tail).
- Prefer the Read, Edit, Write, Glob and Grep tools to cat, sed, echo > and find \
for files: they are faster and keep edits safe."""

_BARE_SLEEP = re.compile(r"\s*sleep\s+[0-9.]+[smhd]?\s*")


class BashInput(TypedDict):
    command: str
    timeout: NotRequired[float]
    description: NotRequired[str]
    run_in_background: NotRequired[bool]
    dangerouslyDisableSandbox: NotRequired[bool]


class BashTool(Tool[BashInput]):
    name = "Bash"
    # Runs anything; the network too in a session that allows it.
    hints = Hints(open_world=True)
    description = DESCRIPTION
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "timeout": {"type": "number"},
            "description": {"type": "string"},
            "run_in_background": {"type": "boolean"},
            "dangerouslyDisableSandbox": {"type": "boolean"},
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    # Bash cuts its own output to head and tail, with the full text in a file.
    max_result_chars = 10 * MAX_OUTPUT_CHARS

    async def validate_input(self, args: BashInput, ctx: ToolContext) -> None:
        # An empty command runs (and prints nothing), as in the reference.
        if "\0" in args["command"]:
            raise InputError("The command contains a NUL byte.")
        if args.get("dangerouslyDisableSandbox") and not ctx.session.allow_unsandboxed:
            raise InputError(
                "This session does not allow commands outside the sandbox; run the command "
                "sandboxed (drop dangerouslyDisableSandbox), or create a session whose policy "
                "allows unsandboxed commands."
            )

    async def call(self, args: BashInput, ctx: ToolContext) -> ToolResult:
        command: str = args["command"]
        notices = _cwd_that_exists(ctx)
        # Before the command can run: what it changes is named afterwards.
        before = _read_files_state(ctx.session)
        tracked = await _track(ctx)
        network = network_service.current()
        net_call = network.begin_call(ctx.session.id, ctx.tool_use_id, command) if network else None
        try:
            started = await _start(command, ctx, tracked)
        except BaseException:
            _untrack(ctx, tracked)
            if network is not None and net_call is not None:
                network.end_call(ctx.session.id, net_call)
            raise
        if tracked is not None:
            if started.watched:
                tracked.handed_over()
            tracked.release_group()
        task = Task(
            id=started.task_id,
            session_id=ctx.session.id,
            command=command,
            description=args.get("description", ""),
            output_path=started.run.output.path,
            tool_use_id=ctx.tool_use_id,
        )
        if args.get("run_in_background"):
            if network is not None and net_call is not None:
                network.end_call(ctx.session.id, net_call)
            _to_background(ctx, task, started, tracked)
            return _background_result(task)
        timeout_ms = effective_timeout_ms(args.get("timeout"))
        try:
            outcome = await _follow(started.run, ctx, timeout_ms / 1000)
        finally:
            refused = network.end_call(ctx.session.id, net_call) if network and net_call else []
        if refused:
            notices.append(_refused_notice(refused))
        if outcome == "timeout" and not _BARE_SLEEP.fullmatch(command):
            _to_background(ctx, task, started, tracked)
            return _moved_to_background(task, started.run.output, timeout_ms)
        run = started.run
        if outcome != "done":
            run.kill()
        code = await run.done
        run.output.finish(None)
        reported_cwd = started.channels.reported_cwd()
        started.cleanup()
        if held := await _settle(ctx, tracked, command):
            notices.append(held)
        if reported_cwd is not None:
            notices += _apply_cwd(ctx, reported_cwd)
        if changed := _changed_files(ctx.session, before):
            notices.append(
                "This command changed files you have read: "
                + ", ".join(changed)
                + ". Read them again before editing them."
            )
        read_only = ctx.sandbox is SandboxMode.READ_ONLY
        seen_at = sandbox_path(task.id)
        return bash_result.finished(
            command, code, outcome, run.output, notices, seen_at, timeout_ms, read_only
        )


def _refused_notice(refused: list[str]) -> str:
    """The hosts the sandbox's proxy refused, and why: the model can ask for the right
    thing (a host allowed) rather than retry without the sandbox."""
    return (
        "The sandbox's network proxy refused connections while this command ran: "
        + "; ".join(refused)
        + ". Only allowed hosts can be reached. If the command needs one, ask the user to "
        "allow it (a sandbox.network.allowedDomains entry or a WebFetch(domain:HOST) rule)."
    )


async def _start(command: str, ctx: ToolContext, tracked: Tracked | None) -> launch.Started:
    """The command planned (agentd/runs/launch.py) as the permission decision says, and
    started, its output registered for the session's watchers (and what it changes
    followed, when `tracked`)."""
    session, config, outputs = ctx.session, ctx.services.config, ctx.services.outputs
    tmp_dir = sandbox_policy.session_tmp_dir(session, config)
    readers = _output_readers(session, config)
    tasks_dir = outputs.make_tasks_dir(session.id, readers)

    async def plan(channels: Channels) -> launch.LaunchPlan:
        return await launch.plan_bash(
            session,
            config,
            ctx.sandbox,
            command,
            tmp_dir=tmp_dir,
            tasks_dir=tasks_dir,
            bash_env=channels.bash_env,
        )

    return await launch.start_bash(
        plan,
        tasks_dir,
        readers,
        config.task_output_bytes,
        lambda output: outputs.add(session.id, ctx.tool_use_id, output),
        tracked.watch_fds() if tracked is not None else None,
    )


async def _track(ctx: ToolContext) -> Tracked | None:
    """Follow what the command changes (agentd/changes/) when it may write the workspace
    in the sandbox. A command a person let run outside it is theirs."""
    if ctx.sandbox in (SandboxMode.READ_ONLY, SandboxMode.UNSANDBOXED):
        return None
    return await ctx.services.changes.begin(ctx.session, ctx.fs_identity())


def _untrack(ctx: ToolContext, tracked: Tracked | None) -> None:
    if tracked is not None:
        ctx.services.changes.close(tracked)


async def _settle(ctx: ToolContext, tracked: Tracked | None, command: str) -> str:
    """Hold what the finished command changed that makes code run later; ask a person.
    The text says what happened (empty: nothing held)."""
    if tracked is None:
        return ""
    tracker = ctx.services.changes
    try:
        held = await tracker.hold(tracked)
        return await tracker.decide(
            ctx.session,
            tracked,
            held,
            made_by=made_by(command),
            tool_use_id=ctx.tool_use_id,
            cancelled=ctx.cancelled,
        )
    finally:
        tracker.close(tracked)


def _cwd_that_exists(ctx: ToolContext) -> list[str]:
    """A cwd that no longer exists is moved to the first workspace root; the notice."""
    session = ctx.session
    if os.path.isdir(session.cwd):
        return []
    gone = session.cwd
    _apply_cwd(ctx, session.workspace_roots[0])
    return [f"The working directory {gone} no longer exists; the command ran in {session.cwd}."]


def _to_background(
    ctx: ToolContext, task: Task, started: launch.Started, tracked: Tracked | None
) -> None:
    """The run goes on as a background task; its channels go once it ends; what it
    changes is checked while it runs and at its end."""
    ctx.services.tasks.adopt(task, started.run)
    if tracked is not None:
        ctx.services.changes.follow(
            ctx.session,
            tracked,
            started.run.done,
            task_id=task.id,
            made_by=made_by(task.command),
            tool_use_id=ctx.tool_use_id,
            notify=ctx.services.tasks.add_notice,
        )
    asyncio.ensure_future(_after(started.run, started.cleanup))


def _background_result(task: Task) -> ToolResult:
    return ToolResult.text(
        f"Command running in background with ID: {task.id}. Output is being written "
        f"to: {task.output_path} (in Bash commands: {sandbox_path(task.id)}). You will be "
        "told when it finishes. Read that file (or `tail` it in Bash) to see its output so "
        "far, or use BashOutput; stop it with TaskStop.",
        data={
            "stdout": "",
            "stderr": "",
            "interrupted": False,
            "backgroundTaskId": task.id,
        },
    )


def _moved_to_background(task: Task, output: Output, timeout_ms: float) -> ToolResult:
    shown, _ = head_and_tail(output, MAX_OUTPUT_CHARS)
    seconds = f"{timeout_ms / 1000:g}s"
    text = (f"{shown.rstrip(chr(10))}\n" if shown.strip() else "") + (
        f"Command did not finish within its {seconds} timeout and was moved to the "
        f"background (ID: {task.id}). Output is being written to: {output.path} "
        f"(in Bash commands: {sandbox_path(task.id)}). You will be told when it finishes. "
        "It is still running: do not start it again. Stop it with TaskStop if it is no "
        "longer needed; Read that file to see its output so far."
    )
    return ToolResult.text(
        text,
        data={
            "stdout": shown,
            "stderr": "",
            "interrupted": False,
            "backgroundTaskId": task.id,
            "timedOutAfterMs": timeout_ms,
        },
    )


def effective_timeout_ms(timeout: float | None) -> float:
    """The reference's leniency: no timeout, 0 or less is the default, above the most is
    the most."""
    if timeout is None or timeout <= 0:
        return DEFAULT_TIMEOUT_MS
    return min(timeout, MAX_TIMEOUT_MS)


async def _follow(run: Run, ctx: ToolContext, timeout: float) -> str:
    """Report progress until the run ends ("done"), times out, or is cancelled.

    Progress carries where the output file stands (its id and size) and the last line,
    never the bytes: watchers read those from the file (ReadOutput), every one of them.
    An update goes out when the output grew, else once every HEARTBEAT seconds.
    """
    deadline = time.monotonic() + timeout
    cancelled = asyncio.ensure_future(ctx.cancelled.wait())
    started = time.monotonic()
    out = run.output
    sent_size, sent_at = -1, started
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            waiting: set[asyncio.Future[Any]] = {run.done, cancelled}
            done, _ = await asyncio.wait(
                waiting,
                timeout=min(PROGRESS_INTERVAL, remaining),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if run.done in done:
                if out.size != sent_size:
                    await ctx.progress(**_where(out))
                return "done"
            if cancelled in done:
                return "cancelled"
            now = time.monotonic()
            if out.size == sent_size and now - sent_at < HEARTBEAT:
                continue
            sent_size, sent_at = out.size, now
            await ctx.progress(message=f"running {now - started:.0f}s", **_where(out))
    finally:
        cancelled.cancel()


def _where(out: Output) -> dict[str, Any]:
    return {"output_id": out.id, "output_size": out.size, "last_line": out.last_line}


def _output_readers(session: Any, config: Any) -> int | None:
    """The group that may read the session's output files: the session's own."""
    return sandbox_policy.session_group(session, config)


async def _after(run: Run, cleanup: Callable[[], None]) -> None:
    await run.done
    cleanup()


def _apply_cwd(ctx: ToolContext, new_cwd: str) -> list[str]:
    session = ctx.session
    if new_cwd == session.cwd:
        return []
    with fsidentity.acting_as(ctx.fs_identity()):
        checked = contained_cwd(new_cwd, session.workspace_roots)
    previous = session.cwd
    if checked is not None:
        session.cwd = checked
        notices: list[str] = []
    else:
        session.cwd = session.workspace_roots[0]
        notices = [f"Shell cwd was reset to {session.cwd}"]
    if session.cwd != previous:
        ctx.services.on_cwd_changed(session, session.cwd, previous)
    return notices


def _read_files_state(session: Any) -> dict[str, tuple[int, int]]:
    state: dict[str, tuple[int, int]] = {}
    for path in list(session.read_state)[:500]:
        try:
            st = os.stat(path)
        except OSError:
            state[path] = (-1, -1)
            continue
        state[path] = (st.st_mtime_ns, st.st_size)
    return state


def _changed_files(session: Any, before: dict[str, tuple[int, int]]) -> list[str]:
    after = _read_files_state(session)
    return sorted(
        os.path.relpath(p, session.cwd) if p.startswith(session.cwd + "/") else p
        for p, v in after.items()
        if before.get(p, v) != v
    )


TOOL = BashTool
