"""Bash: one command in the session's sandbox, output live, cwd carried between calls."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from typing import Any, ClassVar

from agentd.changes.prompt import made_by
from agentd.changes.tracked import Tracked
from agentd.foundation import metrics
from agentd.foundation.errors import InputError, ToolError
from agentd.fs import identity as fsidentity
from agentd.runs import unsandboxed
from agentd.runs.output.registry import TASKS_MOUNT, Outputs, sandbox_path
from agentd.runs.tasks import (
    PROGRESS_INTERVAL,
    OutputFile,
    Run,
    Task,
    head_and_tail,
    new_task_id,
    open_output,
)
from agentd.sandboxing import policy as sandbox_policy
from agentd.sandboxing import readonly
from agentd.shim import client as shim_client
from agentd.shim.client import ShimRun
from agentd.tools.base import Tool, ToolContext, ToolResult
from agentd.tools.bash import result as bash_result
from agentd.tools.bash.channels import Channels, contained_cwd
from agentd.tools.bash.result import MAX_OUTPUT_CHARS
from agentd_sandbox import SandboxUnavailable, shell_argv, spawn

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

# Starts of a sandbox that failed before bash ran (a mount source vanished meanwhile).
_START_ATTEMPTS = 3


class BashTool(Tool):
    name = "Bash"
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

    async def validate_input(self, args: dict[str, Any], ctx: ToolContext) -> None:
        # An empty command runs (and prints nothing), as in the reference.
        if "\0" in args["command"]:
            raise InputError("The command contains a NUL byte.")
        if args.get("dangerouslyDisableSandbox") and not ctx.session.allow_unsandboxed:
            raise InputError(
                "This session does not allow commands outside the sandbox; run the command "
                "sandboxed (drop dangerouslyDisableSandbox), or create a session whose policy "
                "allows unsandboxed commands."
            )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        tasks = ctx.services["tasks"]
        config = ctx.services["config"]
        session = ctx.session
        command: str = args["command"]
        tmp_dir = sandbox_policy.session_tmp_dir(session, config)
        outputs = ctx.services.get("outputs") or Outputs(config)
        readers = _output_readers(session, config)
        tasks_dir = outputs.make_tasks_dir(session.id, readers)
        start_notices: list[str] = []
        if not os.path.isdir(session.cwd):
            gone = session.cwd
            _apply_cwd(ctx, session.workspace_roots[0])
            start_notices.append(
                f"The working directory {gone} no longer exists; the command ran in {session.cwd}."
            )
        # Before the command can run: what it changes is named afterwards.
        before = _read_files_state(session)
        read_only = ctx.sandbox == "read_only"
        tracked = await _track(ctx, writes=not read_only and ctx.sandbox != "unsandboxed")
        failure = ""
        for _attempt in range(_START_ATTEMPTS):
            task_id = new_task_id()
            output_path = os.path.join(tasks_dir, f"{task_id}.output")
            output_fd = open_output(output_path, readers)
            seen_at = sandbox_path(task_id)
            channels = Channels.open()
            policy = sandbox_policy.policy_for(session, config, tmp_dir, read_only=read_only)
            policy.env = {**policy.env, "BASH_ENV": channels.bash_env}
            staged = readonly.Staged()
            if read_only or ctx.sandbox == "neutralised":
                staged = await readonly.enforce(
                    policy, session, config, command, read_only=read_only
                )
            launch = unsandboxed.spawn if ctx.sandbox == "unsandboxed" else spawn
            if launch is spawn:
                # The session's output files, read-only at a fixed path (`tail -f` works).
                policy.ro_binds = [*policy.ro_binds, (tasks_dir, TASKS_MOUNT)]
            try:
                argv = shell_argv(policy, command)  # the text stays out of host `ps`
                spawned = time.monotonic()
                watch = tracked.watch_fds() if tracked is not None else None
                run = await _start(
                    launch, policy, argv, output_path, output_fd, config, channels, watch
                )
                if watch is not None and isinstance(run, ShimRun):
                    tracked.handed_over()  # type: ignore[union-attr]
                metrics.sandbox_started(time.monotonic() - spawned)
            except SandboxUnavailable as exc:
                staged.cleanup()
                channels.close()
                os.unlink(output_path)
                _untrack(ctx, tracked)
                raise ToolError(
                    f"The sandbox could not start, so the command did not run: {exc}"
                ) from None
            finally:
                os.close(output_fd)
                channels.started()
            output = run.output
            outputs.add(session.id, ctx.tool_use_id, output)
            try:
                started = await channels.wait_started(run.done)
            except BaseException:
                run.kill()
                cleanup_now = (staged.cleanup, channels.close)
                for step in cleanup_now:
                    step()
                _untrack(ctx, tracked)
                raise
            if started:
                break
            # The sandbox ended before bash ran: bwrap could not set it up, e.g. a path it
            # was to mount over (a host socket, an allow-listed file) vanished after the
            # policy listed it. Nothing of the command ran, so it is safe to build again.
            await run.done
            output.finish(None)
            failure = bytes(output.head).decode(errors="replace").strip()
            staged.cleanup()
            channels.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(output.path)
        else:
            _untrack(ctx, tracked)
            raise ToolError(f"The sandbox could not start, so the command did not run: {failure}")
        if tracked is not None:
            tracked.release_group()

        def cleanup() -> None:
            staged.cleanup()
            channels.close()

        def as_task() -> Task:
            return Task(
                id=task_id,
                session_id=session.id,
                command=command,
                description=args.get("description", ""),
                output_path=output.path,
                tool_use_id=ctx.tool_use_id,
            )

        if args.get("run_in_background"):
            tasks.adopt(as_task(), run)
            _follow_task(ctx, tracked, run, task_id, command)
            asyncio.ensure_future(_after(run, cleanup))
            return ToolResult.text(
                f"Command running in background with ID: {task_id}. Output is being written "
                f"to: {output.path} (in Bash commands: {seen_at}). You will be told when it "
                "finishes. Read that file (or `tail` it in Bash) to see its output so far, or "
                "use BashOutput; stop it with TaskStop.",
                data={
                    "stdout": "",
                    "stderr": "",
                    "interrupted": False,
                    "backgroundTaskId": task_id,
                },
            )

        timeout_ms = effective_timeout_ms(args.get("timeout"))
        outcome = await _follow(run, ctx, timeout_ms / 1000)
        if outcome == "timeout" and not _BARE_SLEEP.fullmatch(command):
            tasks.adopt(as_task(), run)
            _follow_task(ctx, tracked, run, task_id, command)
            asyncio.ensure_future(_after(run, cleanup))
            shown, _ = head_and_tail(output, MAX_OUTPUT_CHARS)
            seconds = f"{timeout_ms / 1000:g}s"
            text = (f"{shown.rstrip(chr(10))}\n" if shown.strip() else "") + (
                f"Command did not finish within its {seconds} timeout and was moved to the "
                f"background (ID: {task_id}). Output is being written to: {output.path} "
                f"(in Bash commands: {seen_at}). You will be told when it finishes. It is "
                "still running: do not start it again. Stop it with TaskStop if it is no longer "
                "needed; Read that file to "
                "see its output so far."
            )
            return ToolResult.text(
                text,
                data={
                    "stdout": shown,
                    "stderr": "",
                    "interrupted": False,
                    "backgroundTaskId": task_id,
                    "timedOutAfterMs": timeout_ms,
                },
            )

        if outcome != "done":
            run.kill()
        code = await run.done
        output.finish(None)
        reported_cwd = channels.reported_cwd()
        cleanup()
        notices: list[str] = start_notices
        if held := await _settle(ctx, tracked, command):
            notices.append(held)
        if reported_cwd is not None:
            notices += _apply_cwd(ctx, reported_cwd)
        changed = _changed_files(session, before)
        if changed:
            notices.append(
                "This command changed files you have read: "
                + ", ".join(changed)
                + ". Read them again before editing them."
            )
        return bash_result.finished(
            command, code, outcome, output, notices, seen_at, timeout_ms, read_only
        )


def effective_timeout_ms(timeout: float | None) -> float:
    """The reference's leniency: no timeout, 0 or less is the default, above the most is
    the most."""
    if timeout is None or timeout <= 0:
        return DEFAULT_TIMEOUT_MS
    return min(timeout, MAX_TIMEOUT_MS)


async def _start(
    launch: Any,
    policy: Any,
    argv: list[str],
    output_path: str,
    output_fd: int,
    config: Any,
    channels: Channels,
    watch: tuple[int, int] | None = None,
) -> Run | ShimRun:
    """The command started: under a shim (agentd/shim/supervisor.py) when sandboxed, so that it can
    outlive the daemon as a task; in the daemon's process otherwise. `watch`: the fds the
    shim's change reader needs (agentd/changes/)."""
    limit = config.task_output_bytes
    if launch is spawn:
        run = await shim_client.spawn(
            policy,
            argv,
            output_path,
            output_fd,
            limit,
            channels.pass_fds,
            (channels.cwd_read,),
            watch,
        )
        if run is not None:
            return run
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    try:
        process = await launch(
            policy, argv, stdout=write_fd, stderr=write_fd, pass_fds=channels.pass_fds
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    output = OutputFile(output_path, limit, fd=os.dup(output_fd))
    return Run(process, read_fd, output)


async def _follow(run: Run | ShimRun, ctx: ToolContext, timeout: float) -> str:
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
            done, _ = await asyncio.wait(
                {run.done, cancelled},
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


def _where(out: Any) -> dict[str, Any]:
    return {"output_id": out.id, "output_size": out.size, "last_line": out.last_line}


def _output_readers(session: Any, config: Any) -> int | None:
    """The group that may read the session's output files: its sandbox identity's."""
    ident = sandbox_policy.run_as(session, config)
    return ident[1] if ident else None


async def _after(run: Run | ShimRun, cleanup: Any) -> None:
    await run.done
    cleanup()


async def _track(ctx: ToolContext, *, writes: bool) -> Tracked | None:
    """Follow what the command changes (agentd/changes/), when it may write the workspace
    in the sandbox. A command a person let run outside it is theirs."""
    tracker = ctx.services.get("changes")
    if tracker is None or not writes:
        return None
    tracked: Tracked = await tracker.begin(ctx.session, fsidentity.of_session(ctx))
    return tracked


def _untrack(ctx: ToolContext, tracked: Tracked | None) -> None:
    if tracked is not None:
        ctx.services["changes"].close(tracked)


async def _settle(ctx: ToolContext, tracked: Tracked | None, command: str) -> str:
    """Hold what the finished command changed that makes code run later; ask a person.
    The text says what happened (empty: nothing held)."""
    if tracked is None:
        return ""
    tracker = ctx.services["changes"]
    try:
        held = await tracker.hold(tracked)
        return str(
            await tracker.decide(
                ctx.session,
                tracked,
                held,
                made_by=made_by(command),
                tool_use_id=ctx.tool_use_id,
                cancelled=ctx.cancelled,
            )
        )
    finally:
        tracker.close(tracked)


def _follow_task(
    ctx: ToolContext, tracked: Tracked | None, run: Run | ShimRun, task_id: str, command: str
) -> None:
    if tracked is None:
        return
    ctx.services["changes"].follow(
        ctx.session,
        tracked,
        run.done,
        task_id=task_id,
        made_by=made_by(command),
        tool_use_id=ctx.tool_use_id,
        notify=ctx.services["tasks"].add_notice,
    )


def _apply_cwd(ctx: ToolContext, new_cwd: str) -> list[str]:
    session = ctx.session
    if new_cwd == session.cwd:
        return []
    with fsidentity.acting_as(fsidentity.of_session(ctx)):
        checked = contained_cwd(new_cwd, session.workspace_roots)
    previous = session.cwd
    emit = ctx.services.get("on_cwd_changed")
    if checked is not None:
        session.cwd = checked
        notices: list[str] = []
    else:
        session.cwd = session.workspace_roots[0]
        notices = [f"Shell cwd was reset to {session.cwd}"]
    if emit is not None and session.cwd != previous:
        emit(session, session.cwd, previous)
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
