"""A command's launch: the plan (what runs, in which sandbox) apart from the start.

plan_bash and plan_search (on search_policy) build a LaunchPlan and start nothing: the
sandbox policy, the read-only staging (sanitised git configs bound over the real ones),
the argv and the environment, from the session, the config and the permission
decision's SandboxMode. Each can be tested alone, as codex-rs builds its exec request.

start runs attempts of a launch until one started: a sandbox that ended before its
command ran (bwrap could not mount a host socket or a listed path that vanished after
the plan listed it, as on a busy machine) is planned and started again; nothing of the
command ran, so that is safe. Bash, Grep/Glob and the hooks all start this way.
start_bash is Bash's start: its output file, the channels bash reports through, and the
hand-off to a shim (agentd/runs/shim/spawn.py), or to the daemon's own process where the
machine's chain needs a step only subprocess can do, or the command runs unsandboxed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from agentd.changes.reader import Watch
from agentd.foundation import metrics
from agentd.foundation.config import Config
from agentd.foundation.errors import ToolError
from agentd.runs import unsandboxed
from agentd.runs.channels import Channels
from agentd.runs.output.file import OutputFile, open_output
from agentd.runs.output.registry import TASKS_MOUNT
from agentd.runs.plans import PlanCache
from agentd.runs.run import Output, Run
from agentd.runs.shim import client as shim_client
from agentd.runs.shim import spawn as shim_spawn
from agentd.runs.shim import terminal
from agentd.runs.tasks import InProcessRun, new_task_id
from agentd.sandboxing import policy as sandbox_policy
from agentd.sandboxing import readonly
from agentd.sandboxing.mode import SandboxMode
from agentd.sandboxing.runtime import SandboxRuntime
from agentd.sessions.session import Session
from agentd_sandbox import PathGone, SandboxPolicy, SandboxUnavailable, shell_argv, spawn

log = logging.getLogger(__name__)

T = TypeVar("T")

# Starts of a sandbox that failed before its command ran.
START_ATTEMPTS = 3
# A start refused for want of a resource (EAGAIN: the sandbox identity's processes or
# namespaces at their limit, as while another of its sandboxes forks hard) is tried
# again after each of these pauses too: such a limit frees as those processes end.
BUSY_PAUSES = (0.1, 0.4, 1.6)
_BUSY = "Resource temporarily unavailable"


@dataclass(frozen=True)
class Interactive:
    """A command a person will drive: on a PTY of (rows, cols), or with its stdin open.
    Only a person asks for one (StartTask, in the call's ToolContext), never the model:
    Bash's schema has no such field."""

    pty: tuple[int, int] | None = None
    stdin: bool = False


@dataclass
class LaunchPlan:
    """What will run and how: built without starting anything."""

    policy: SandboxPolicy
    argv: list[str]
    # False: outside the sandbox (a person approved dangerouslyDisableSandbox).
    sandboxed: bool = True
    # Sanitised git configs bound over the real ones: removed once the command ended.
    staged: readonly.Staged = field(default_factory=readonly.Staged)


async def plan_bash(
    session: Session,
    config: Config,
    runtime: SandboxRuntime,
    mode: SandboxMode,
    command: str,
    *,
    tmp_dir: str,
    tasks_dir: str,
    bash_env: str,
    plans: PlanCache | None = None,
    views: dict[str, str] | None = None,
) -> LaunchPlan:
    """A Bash command's launch: the session's sandbox as `mode` says (read-only and
    neutralised runs get their git configs staged), the session's output files
    read-only at TASKS_MOUNT, and `bash_env` sourced first (agentd/runs/channels.py).
    The command's text goes in through the environment, never on a command line.
    `plans`: what the session's earlier plans found in its workspace, kept while it
    holds (agentd/runs/plans.py). `views`: review mode's overlay of each root."""
    read_only = mode is SandboxMode.READ_ONLY
    if runtime.masks is not None:  # masked credentials' values, fetched off the loop
        await runtime.masks.prepare(session)
    # On a thread: it walks the workspace's git directories and, on the session's first
    # networked call, makes its network namespace (the event loop serves on meanwhile).
    protection = plans.for_session(session.id) if plans is not None else None
    policy = await asyncio.to_thread(
        functools.partial(
            sandbox_policy.policy_for,
            session,
            config,
            tmp_dir,
            runtime,
            read_only=read_only,
            protection=protection,
        )
    )
    policy.env = {**policy.env, "BASH_ENV": bash_env}
    if views and not read_only:
        _review_views(policy, views, tmp_dir)
    staged = readonly.Staged()
    if mode in (SandboxMode.READ_ONLY, SandboxMode.NEUTRALISED):
        staged = await readonly.enforce(
            policy, session, config, command, runtime.staging, read_only=read_only
        )
    sandboxed = mode is not SandboxMode.UNSANDBOXED
    if sandboxed:
        # The session's output files, read-only at a fixed path (`tail -f` works).
        policy.ro_binds = [*policy.ro_binds, (tasks_dir, TASKS_MOUNT)]
    return LaunchPlan(policy, shell_argv(policy, command), sandboxed, staged)


def _review_views(policy: SandboxPolicy, views: dict[str, str], tmp_dir: str) -> None:
    """Review mode: each root seen through its copy-on-write view. The git directories
    the policy pins writable onto themselves would write the real ones, past the view:
    here they are read-only (a command cannot write git's state; a person commits after
    applying), and the missing hooks directories inside them need no cover."""
    pinned = [p for p in policy.writable if p not in views and p != tmp_dir]
    policy.writable = [p for p in policy.writable if p not in pinned]
    policy.read_only = [*pinned, *policy.read_only]
    policy.ensure_dirs = [
        d for d in policy.ensure_dirs if not any(d.startswith(p.rstrip("/") + "/") for p in pinned)
    ]
    policy.views = dict(views)


def search_policy(
    session: Session, config: Config, runtime: SandboxRuntime, readable: list[str]
) -> SandboxPolicy:
    """The session's sandbox narrowed for a search (Grep, Glob): `readable` shown
    read-only where it is, nothing writable, no network, none of the session's env."""
    tmp_dir = sandbox_policy.session_tmp_dir(session, config, runtime)
    base = sandbox_policy.policy_for(session, config, tmp_dir, runtime, search=True)
    return dataclasses.replace(
        base,
        writable=[],
        read_only=readable,
        ro_binds=[],
        ro_files=[],
        network=False,
        netns=None,
        env={},
        home=None,
    )


def plan_search(policy: SandboxPolicy, cwd: str, argv: list[str]) -> LaunchPlan:
    """A search's launch: `argv` in `cwd`, in `policy` (search_policy's)."""
    return LaunchPlan(dataclasses.replace(policy, cwd=cwd), argv)


async def start(attempt: Callable[[], Awaitable[tuple[T, bool]]], what: str) -> T:
    """Run `attempt()` (which plans and starts anew, and says whether the command ran)
    until one ran: at most START_ATTEMPTS failures, not counting those for want of a
    resource, each tried again after a pause (BUSY_PAUSES); the last attempt's outcome."""
    pauses = iter(BUSY_PAUSES)
    number = failed = 0
    while True:
        number += 1
        outcome, ran = await attempt()
        if ran:
            return outcome
        log.info("%s: its sandbox ended before it ran (attempt %d)", what, number)
        busy = isinstance(outcome, str) and _BUSY in outcome
        if busy and (pause := next(pauses, None)) is not None:
            await asyncio.sleep(pause)
            continue
        failed += 1
        if failed >= START_ATTEMPTS:
            return outcome


@dataclass
class Started:
    """A Bash command that started: its run, the task id its output is named by, and
    what goes once it has ended."""

    task_id: str
    run: Run
    channels: Channels
    plan: LaunchPlan
    # Its change reader runs (agentd/changes/reader.py): the shim took the watch fds.
    watched: bool = False

    def cleanup(self) -> None:
        self.plan.staged.cleanup()
        self.channels.close()


async def start_bash(
    plan: Callable[[Channels], Awaitable[LaunchPlan]],
    tasks_dir: str,
    readers: int | None,
    output_limit: int,
    register: Callable[[Output], None],
    forkserver: shim_spawn.Forkserver,
    watch: Watch | None = None,
    interactive: Interactive | None = None,
) -> Started:
    """Start a Bash command: each attempt opens its output file in `tasks_dir` (readable
    by the `readers` group), its channels, and its `plan`, hands the command to a shim,
    and `register`s the output; it counts as started once bash ran (its BASH_ENV script
    wrote into the channel). Raises ToolError when the sandbox could not start. `watch`:
    the fanotify group and change log of the call (agentd/changes/), for the shim's
    reader; `interactive`: a person drives it (a PTY or stdin from its shim)."""

    async def attempt() -> tuple[Started | str, bool]:
        task_id = new_task_id()
        output_path = os.path.join(tasks_dir, f"{task_id}.output")
        output_fd = open_output(output_path, readers)
        channels = Channels.open()
        staged = readonly.Staged()
        try:
            launch = await plan(channels)
            staged = launch.staged
            spawned = time.monotonic()
            run = await _spawn(
                launch,
                output_path,
                output_fd,
                output_limit,
                channels,
                forkserver,
                watch,
                interactive,
            )
            metrics.sandbox_started(time.monotonic() - spawned)
        except BaseException as exc:
            # Nothing started: nothing of this attempt stays behind.
            staged.cleanup()
            channels.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(output_path)
            if isinstance(exc, PathGone):
                return str(exc), False  # planned again: it may be there (or gone) now
            if isinstance(exc, SandboxUnavailable):
                raise ToolError(
                    f"The sandbox could not start, so the command did not run: {exc}"
                ) from None
            raise
        finally:
            os.close(output_fd)
            channels.started()
        watched = watch is not None and isinstance(run, shim_client.ShimRun)
        started = Started(task_id, run, channels, launch, watched)
        register(run.output)
        try:
            ran = await channels.wait_started(run.done)
        except BaseException:
            run.kill()
            started.cleanup()
            raise
        if ran:
            return started, True
        # The sandbox ended before bash ran: nothing of the command ran.
        await run.done
        run.output.finish(None)
        failure = bytes(run.output.head).decode(errors="replace").strip()
        started.cleanup()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(run.output.path)
        return failure, False

    outcome = await start(attempt, "a Bash command")
    if isinstance(outcome, str):
        raise ToolError(f"The sandbox could not start, so the command did not run: {outcome}")
    return outcome


async def _spawn(
    plan: LaunchPlan,
    output_path: str,
    output_fd: int,
    limit: int,
    channels: Channels,
    forkserver: shim_spawn.Forkserver,
    watch: Watch | None = None,
    interactive: Interactive | None = None,
) -> Run:
    """The command started: under a shim (agentd/runs/shim/supervisor.py, forked from
    `forkserver`) when sandboxed, so that it can outlive the daemon as a task; in the
    daemon's process otherwise. A run a person drives (`interactive`) has its PTY or
    stdin from its shim, so only there."""
    if plan.sandboxed:
        pty = interactive.pty if interactive else None
        run = await shim_spawn.spawn(
            forkserver,
            plan.policy,
            [*terminal.CTTY_ARGV, *plan.argv] if pty else plan.argv,
            output_path,
            output_fd,
            limit,
            channels.pass_fds,
            (channels.cwd_read,),
            watch,
            pty=pty,
            stdin=bool(interactive and interactive.stdin),
        )
        if run is not None:
            return run
    if interactive is not None:
        raise SandboxUnavailable(
            "a terminal or stdin needs the command sandboxed under its shim, which this "
            "machine's sandbox chain (no setpriv or prlimit) or this call cannot have"
        )
    launch = spawn if plan.sandboxed else unsandboxed.spawn
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    try:
        process = await launch(
            plan.policy, plan.argv, stdout=write_fd, stderr=write_fd, pass_fds=channels.pass_fds
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    output = OutputFile(output_path, limit, fd=os.dup(output_fd))
    return InProcessRun(process, read_fd, output)
