"""A command's run and what it did: the one owner of both, for every caller.

Bash (agentd/tools/bash/), StartTask (through Bash's permission path,
agentd/calls/tasks.py) and the next daemon taking over a task (Commands.readopt, with
agentd/runs/shim/adopt.py) all run a command through here, so each run is followed the
same way: the session's cwd made to exist, the files the session has read looked at
before and after, what it changes tracked (agentd/changes/: begin, hand the watch to
the shim, hold and ask at the end, or follow it as a task), its connections counted
by the session's proxy (the hosts refused named), its output followed with progress,
its reported cwd applied and kept inside the workspace. What the model reads of it
(timeouts, the text of a result) is the tool's.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from agentd.changes.prompt import made_by
from agentd.changes.review import Opened
from agentd.changes.service import ChangeTracker
from agentd.changes.tracked import Tracked
from agentd.foundation.config import Config
from agentd.foundation.errors import SessionNotFound, ToolError
from agentd.fs import identity as fsidentity
from agentd.fs.identity import FsIdentity
from agentd.network.state import CallNet
from agentd.runs import launch
from agentd.runs.channels import Channels, contained_cwd
from agentd.runs.launch import Interactive
from agentd.runs.output.registry import Outputs
from agentd.runs.plans import PlanCache
from agentd.runs.progress import Outcome, Progress, follow_run
from agentd.runs.run import Output, Run
from agentd.runs.shim import adopt
from agentd.runs.shim.client import ShimRun
from agentd.runs.shim.spawn import Forkserver
from agentd.runs.tasks import Task, TaskManager
from agentd.sandboxing import policy as sandbox_policy
from agentd.sandboxing.mode import SandboxMode
from agentd.sandboxing.runtime import SandboxRuntime
from agentd.sessions.session import Session, SessionManager, network_mode

log = logging.getLogger(__name__)

# The files the session has read that are looked at before and after a command.
READ_FILES_LOOKED_AT = 500

# A command moved the session's cwd (session, new cwd, previous cwd).
CwdChanged = Callable[[Session, str, str], None]


@dataclass(frozen=True, slots=True)
class CommandRequest:
    """One command to run in a session's sandbox, as its permission decision says."""

    session: Session
    command: str
    # The call it belongs to (its output is registered and its changes named by it).
    tool_use_id: str
    # How its sandbox is built (Decision.sandbox).
    mode: SandboxMode
    # Whose rights the daemon's file work for it has (ToolContext.fs_identity).
    identity: FsIdentity | None
    description: str = ""
    # A person drives it (StartTask): a PTY or an open stdin from its shim.
    interactive: Interactive | None = None


@dataclass(frozen=True, slots=True)
class Finished:
    """A command that ended while its caller waited."""

    code: int
    output: Output
    # What the model is told besides the output (cwd moved, held changes, files read
    # earlier now changed, hosts the proxy refused), in order.
    notices: list[str]


class Commands:
    """Runs commands: made once by the assembly (agentd/daemon.py), in the Services."""

    def __init__(
        self,
        config: Config,
        sessions: SessionManager,
        sandbox: SandboxRuntime,
        forkserver: Forkserver,
        tasks: TaskManager,
        outputs: Outputs,
        changes: ChangeTracker,
        on_cwd_changed: CwdChanged,
    ) -> None:
        self.config = config
        self.sessions = sessions
        self.sandbox = sandbox
        self.forkserver = forkserver
        self.tasks = tasks
        self.outputs = outputs
        self.changes = changes
        self.on_cwd_changed = on_cwd_changed
        # What plans found in each session's workspace, kept while it holds.
        self.plans = PlanCache()

    async def start(self, request: CommandRequest) -> CommandRun:
        """Start the command; raises ToolError when its sandbox could not start."""
        session = request.session
        notices = self._cwd_that_exists(request)
        # Before the command can run: what it changes is named afterwards.
        before = _read_files_state(session)
        opened = await self._open_review(request)
        # A review run writes no workspace: its change set is its view's upper dir.
        tracked = None if opened is not None else await self._track(request)
        network = self.sandbox.network
        net_call = (
            network.begin_call(session.id, request.tool_use_id, request.command)
            if network is not None
            else None
        )
        try:
            started = await self._launch(request, tracked, opened)
        except BaseException:
            if opened is not None and self.changes.reviews is not None:
                await asyncio.to_thread(self.changes.reviews.abandon, request.session, opened)
            if tracked is not None:
                self.changes.close(tracked)
            if network is not None and net_call is not None:
                network.end_call(session.id, net_call)
            raise
        if tracked is not None:
            if started.watched:
                tracked.handed_over()
            tracked.release_group()
        task = Task(
            id=started.task_id,
            session_id=session.id,
            command=request.command,
            description=request.description,
            output_path=started.run.output.path,
            tool_use_id=request.tool_use_id,
        )
        run = CommandRun(self, request, started, task, tracked, net_call, before, notices)
        run.review = opened
        return run

    async def readopt(
        self,
        session_open: Callable[[str], bool],
        session_known: Callable[[str], bool] | None = None,
    ) -> int:
        """Take over the tasks a previous daemon left running (agentd/runs/shim/adopt.py):
        their changes followed again, their proxy and ssh-agent served at once, not only
        after their session's next call; the number taken over. Those of sessions
        `session_known` denies are left running."""
        adopted = await adopt.readopt(
            self.tasks, self.outputs, session_open, self._readopted, session_known
        )
        running = [t for t in self.tasks.tasks() if self.tasks.is_running(t.id)]
        # A task left running untaken (of a session the database does not know) keeps
        # its change log: so does every task whose shim directory is still there.
        root = self.tasks.shim_root
        shims = set(os.listdir(root)) if root is not None and os.path.isdir(root) else set()
        self.changes.sweep({t.id for t in running} | shims)
        self._serve_kept({t.session_id for t in running})
        return adopted

    # --- pieces ---------------------------------------------------------------------------

    async def _open_review(self, request: CommandRequest) -> Opened | None:
        """A writing run of a session in review mode gets a copy-on-write view of each
        root (agentd/changes/review.py); ToolError when it cannot have one."""
        reviews = self.changes.reviews
        if not request.session.review or request.mode is SandboxMode.READ_ONLY:
            return None
        if request.mode is SandboxMode.UNSANDBOXED:
            raise ToolError("review mode runs no command outside the sandbox")
        if reviews is None:
            raise ToolError(
                "review mode needs checkpoints, which this daemon keeps none of "
                "(checkpoints = false); ask its operator"
            )
        gid = sandbox_policy.session_group(request.session, self.config)
        try:
            return await reviews.open(request.session, gid)
        except OSError as exc:
            raise ToolError(
                f"review mode could not make a view of the workspace ({exc.strerror or exc}); "
                "the command did not run"
            ) from None

    async def _launch(
        self, request: CommandRequest, tracked: Tracked | None, opened: Opened | None = None
    ) -> launch.Started:
        """The command planned (agentd/runs/launch.py) as the permission decision says,
        and started, its output registered for the session's watchers (and what it
        changes followed, when `tracked`)."""
        session, config, outputs = request.session, self.config, self.outputs
        tmp_dir = sandbox_policy.session_tmp_dir(session, config, self.sandbox)
        # The group that may read the session's output files: the session's own.
        readers = sandbox_policy.session_group(session, config)
        tasks_dir = outputs.make_tasks_dir(session.id, readers)

        async def plan(channels: Channels) -> launch.LaunchPlan:
            return await launch.plan_bash(
                session,
                config,
                self.sandbox,
                request.mode,
                request.command,
                tmp_dir=tmp_dir,
                tasks_dir=tasks_dir,
                bash_env=channels.bash_env,
                plans=self.plans,
                views=opened.binds() if opened is not None else None,
            )

        return await launch.start_bash(
            plan,
            tasks_dir,
            readers,
            config.task_output_bytes,
            lambda output: outputs.add(session.id, request.tool_use_id, output),
            self.forkserver,
            tracked.watch() if tracked is not None else None,
            request.interactive,
        )

    async def _track(self, request: CommandRequest) -> Tracked | None:
        """Follow what the command changes (agentd/changes/) when it may write the
        workspace in the sandbox. A command a person let run outside it is theirs."""
        if request.mode in (SandboxMode.READ_ONLY, SandboxMode.UNSANDBOXED):
            return None
        return await self.changes.begin(request.session, request.identity)

    def _cwd_that_exists(self, request: CommandRequest) -> list[str]:
        """A cwd that no longer exists is moved to the first workspace root; the notice."""
        session = request.session
        if os.path.isdir(session.cwd):
            return []
        gone = session.cwd
        self.apply_cwd(request, session.workspace_roots[0])
        return [f"The working directory {gone} no longer exists; the command ran in {session.cwd}."]

    def apply_cwd(self, request: CommandRequest, new_cwd: str) -> list[str]:
        """The session's cwd moved to `new_cwd` if it is inside the workspace (checked as
        the session's identity), else reset to the first root; the notices."""
        session = request.session
        if new_cwd == session.cwd:
            return []
        with fsidentity.acting_as(request.identity):
            checked = contained_cwd(new_cwd, session.workspace_roots)
        previous = session.cwd
        if checked is not None:
            session.cwd = checked
            notices: list[str] = []
        else:
            session.cwd = session.workspace_roots[0]
            notices = [f"Shell cwd was reset to {session.cwd}"]
        if session.cwd != previous:
            self.on_cwd_changed(session, session.cwd, previous)
        return notices

    async def _readopted(self, task: Task, run: ShimRun) -> None:
        """A task taken over: its changes are followed again (agentd/changes/)."""
        try:
            session = self.sessions.get(task.session_id)
        except SessionNotFound:
            return
        ident = sandbox_policy.run_as(session, self.config)
        await self.changes.readopt(
            session,
            FsIdentity(*ident) if ident else None,
            run.done,
            task_id=task.id,
            made_by=made_by(task.command),
            tool_use_id=task.tool_use_id,
            notify=self.tasks.add_notice,
        )

    def _serve_kept(self, session_ids: set[str]) -> None:
        """The tasks taken over reach their proxy and their ssh-agent through this
        daemon at once."""
        network, agent = self.sandbox.network, self.sandbox.ssh_agent
        for session_id in session_ids:
            try:
                session = self.sessions.get(session_id)
                if network_mode(session) == "proxied" and network and network.available():
                    network.access(session)
            except (SessionNotFound, OSError) as exc:
                log.warning("session %s: its proxy cannot listen again: %s", session_id, exc)
        if agent is not None and (served := agent.serve_kept(session_ids)):
            log.info("serving the ssh-agent of %d session(s) with tasks taken over", served)


class CommandRun:
    """A command that started: follow it to its end, or let it go on as a task."""

    def __init__(
        self,
        commands: Commands,
        request: CommandRequest,
        started: launch.Started,
        task: Task,
        tracked: Tracked | None,
        net_call: CallNet | None,
        read_before: dict[str, tuple[int, int]],
        notices: list[str],
    ) -> None:
        self._commands = commands
        self.request = request
        self._started = started
        # The task it is, or becomes once in the background (its id names the output).
        self.task = task
        self._tracked = tracked
        self._net_call = net_call
        self._read_before = read_before
        self.notices = notices
        # Review mode's views: what it wrote waits for a person (settled at its end).
        self.review: Opened | None = None

    @property
    def run(self) -> Run:
        return self._started.run

    @property
    def output(self) -> Output:
        return self._started.run.output

    async def follow(self, timeout: float, cancelled: asyncio.Event, progress: Progress) -> Outcome:
        """Report progress until the run ends ("done"), times out, or is cancelled
        (agentd/runs/progress.py); its connections' accounting ends here (the hosts
        refused become a notice)."""
        try:
            return await follow_run(self.run, timeout, cancelled, progress)
        finally:
            if refused := self._end_net_call():
                self.notices.append(_refused_notice(refused))

    def to_background(self) -> None:
        """The run goes on as a background task; its channels go once it ends; what it
        changes is checked while it runs and at its end."""
        self._end_net_call()
        commands, task, run = self._commands, self.task, self.run
        commands.tasks.adopt(task, run)
        if self._tracked is not None:
            commands.changes.follow(
                self.request.session,
                self._tracked,
                run.done,
                task_id=task.id,
                made_by=made_by(task.command),
                tool_use_id=self.request.tool_use_id,
                notify=commands.tasks.add_notice,
            )
        asyncio.ensure_future(_after(run, self._started.cleanup))

    async def finish(self, outcome: Outcome, cancelled: asyncio.Event) -> Finished:
        """Wait for its end (killed first unless it is "done"), then settle what it did:
        changes held and asked about, its cwd applied, the files read earlier that it
        changed named."""
        run, commands, request = self.run, self._commands, self.request
        self._end_net_call()
        if outcome != "done":
            run.kill()
        code = await run.done
        run.output.finish(None)
        reported_cwd = self._started.channels.reported_cwd()
        self._started.cleanup()
        notices = self.notices
        if held := await self._settle(cancelled):
            notices.append(held)
        if reported_cwd is not None:
            notices += commands.apply_cwd(request, reported_cwd)
        if changed := _changed_files(request.session, self._read_before):
            notices.append(
                "This command changed files you have read: "
                + ", ".join(changed)
                + ". Read them again before editing them."
            )
        return Finished(code, run.output, notices)

    def _end_net_call(self) -> list[str]:
        network, net_call = self._commands.sandbox.network, self._net_call
        if network is None or net_call is None:
            return []
        self._net_call = None
        return network.end_call(self.request.session.id, net_call)

    async def _settle(self, cancelled: asyncio.Event) -> str:
        """Hold what the finished command changed that makes code run later; ask a
        person. The text says what happened (empty: nothing held)."""
        tracked = self._tracked
        tracker, request = self._commands.changes, self.request
        if self.review is not None and tracker.reviews is not None:
            opened, self.review = self.review, None
            return await tracker.reviews.close(
                request.session,
                opened,
                request.identity,
                tool_use_id=request.tool_use_id,
                command=request.command,
            )
        if tracked is None:
            return ""
        try:
            known = await tracker.known_before(tracked)
            held = await tracker.hold(tracked)
            text = await tracker.decide(
                request.session,
                tracked,
                held,
                made_by=made_by(request.command),
                tool_use_id=request.tool_use_id,
                cancelled=cancelled,
            )
            await tracker.checkpoint(
                request.session, tracked, known, tool_use_id=request.tool_use_id, tool_name="Bash"
            )
            return text
        finally:
            tracker.close(tracked)


def _refused_notice(refused: list[str]) -> str:
    """The hosts the sandbox's proxy refused, and why: the model can ask for the right
    thing (a host allowed) rather than retry without the sandbox."""
    return (
        "The sandbox's network proxy refused connections while this command ran: "
        + "; ".join(refused)
        + ". Only allowed hosts can be reached. If the command needs one of them, ask the "
        "user for what its line names; do not retry without the sandbox."
    )


async def _after(run: Run, cleanup: Callable[[], None]) -> None:
    await run.done
    cleanup()


def _read_files_state(session: Session) -> dict[str, tuple[int, int]]:
    state: dict[str, tuple[int, int]] = {}
    for path in list(session.read_state)[:READ_FILES_LOOKED_AT]:
        try:
            st = os.stat(path)
        except OSError:
            state[path] = (-1, -1)
            continue
        state[path] = (st.st_mtime_ns, st.st_size)
    return state


def _changed_files(session: Session, before: dict[str, tuple[int, int]]) -> list[str]:
    after = _read_files_state(session)
    return sorted(
        os.path.relpath(p, session.cwd) if p.startswith(session.cwd + "/") else p
        for p, v in after.items()
        if before.get(p, v) != v
    )
