"""A command's launch plan, built alone (nothing starts): the sandbox each SandboxMode
gives, the staging of a repository's git config, where the command's text goes; and
start's retry of attempts whose sandbox never ran the command."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd.foundation.config import Config
from agentd.foundation.errors import ToolError
from agentd.fs.identity import FsIdentity
from agentd.runs import launch
from agentd.runs.channels import Channels
from agentd.runs.output.registry import TASKS_MOUNT
from agentd.runs.shim import spawn as shim_spawn
from agentd.sandboxing import policy as sandbox_policy
from agentd.sandboxing import runtime
from agentd.sandboxing.mode import SandboxMode
from agentd.sessions import dirs as session_dirs
from agentd.sessions.session import Session
from agentd_sandbox import Limits, SandboxPolicy, shell_argv
from tests.support.services import config_under

COMMAND = "echo the-command-text > out.txt"
SESSION_ID = "s-launch"


@pytest.fixture
def config(tmp_path: Path) -> Iterator[Config]:
    config = config_under(tmp_path)
    yield config
    # The session's directory under the base in /tmp (agentd/sessions/dirs.py), and the base.
    dirs = session_dirs.of(config.state_dir)
    dirs.remove_session(SESSION_ID)
    dirs.remove_base()


@pytest.fixture
def session(workspace: Path) -> Session:
    """A session on a git repository, network allowed (a read-only plan takes it away)."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    return Session(
        id=SESSION_ID, workspace_roots=[str(workspace)], cwd=str(workspace), allow_network=True
    )


MakePlan = Callable[[SandboxMode], Awaitable[launch.LaunchPlan]]


@pytest.fixture
def plan(session: Session, config: Config, tmp_path: Path) -> Iterator[MakePlan]:
    """Plans a Bash command as `mode` says; the staging of each goes after the test."""
    made: list[launch.LaunchPlan] = []

    bare = runtime.bare()

    async def make(mode: SandboxMode) -> launch.LaunchPlan:
        tmp_dir = sandbox_policy.session_tmp_dir(session, config, bare)
        made.append(
            await launch.plan_bash(
                session,
                config,
                bare,
                mode,
                COMMAND,
                tmp_dir=tmp_dir,
                tasks_dir=str(tmp_path / "tasks"),
                bash_env="/proc/self/fd/9",
            )
        )
        return made[-1]

    yield make
    for p in made:
        p.staged.cleanup()


def _git_config(session: Session) -> str:
    return os.path.join(session.workspace_roots[0], ".git", "config")


async def test_a_normal_plan_is_the_sessions_sandbox(plan: MakePlan, session: Session) -> None:
    p = await plan(SandboxMode.NORMAL)
    ws = session.workspace_roots[0]
    assert p.sandboxed
    assert ws in p.policy.writable and p.policy.network
    assert p.staged.ro_binds == [] and p.staged.files == []
    assert p.policy.ro_binds[-1][1] == TASKS_MOUNT
    assert p.policy.env["BASH_ENV"] == "/proc/self/fd/9"
    # The command's text is in the environment, never on a command line.
    assert not any("the-command-text" in arg for arg in p.argv)
    assert any("the-command-text" in value for value in p.policy.env.values())


async def test_a_read_only_plan_holds_the_classifiers_verdict(
    plan: MakePlan, session: Session
) -> None:
    p = await plan(SandboxMode.READ_ONLY)
    ws = session.workspace_roots[0]
    assert ws not in p.policy.writable and ws in p.policy.read_only
    assert not p.policy.network
    assert p.policy.env["GIT_OPTIONAL_LOCKS"] == "0"
    staged = {dest: src for src, dest in p.staged.ro_binds}
    assert _git_config(session) in staged
    assert _git_config(session) in [dest for _, dest in p.policy.ro_binds]
    p.staged.cleanup()
    assert not any(os.path.exists(f) for f in staged.values())


async def test_a_neutralised_plan_keeps_the_workspace_writable(
    plan: MakePlan, session: Session
) -> None:
    p = await plan(SandboxMode.NEUTRALISED)
    assert session.workspace_roots[0] in p.policy.writable and p.policy.network
    assert _git_config(session) in [dest for _, dest in p.staged.ro_binds]


async def test_an_unsandboxed_plan_mounts_nothing(plan: MakePlan) -> None:
    p = await plan(SandboxMode.UNSANDBOXED)
    assert not p.sandboxed
    assert TASKS_MOUNT not in [dest for _, dest in p.policy.ro_binds]
    assert p.staged.ro_binds == []


def test_a_search_plan_only_reads(session: Session, config: Config) -> None:
    ws = session.workspace_roots[0]
    policy = launch.search_policy(session, config, runtime.bare(), [ws])
    p = launch.plan_search(policy, os.path.join(ws, "sub"), ["/usr/bin/rg", "x"])
    assert p.sandboxed and p.argv == ["/usr/bin/rg", "x"]
    assert p.policy.writable == [] and p.policy.read_only == [ws]
    assert not p.policy.network and p.policy.env == {} and p.policy.home is None
    assert p.policy.cwd == os.path.join(ws, "sub")


async def test_start_tries_again_until_the_command_ran() -> None:
    tries: list[int] = []

    async def ran_on_second() -> tuple[int, bool]:
        tries.append(len(tries) + 1)
        return tries[-1], tries[-1] == 2

    assert await launch.start(ran_on_second, "test") == 2
    assert tries == [1, 2]


async def test_start_gives_up_with_the_last_attempt() -> None:
    tries: list[int] = []

    async def never() -> tuple[int, bool]:
        tries.append(len(tries) + 1)
        return tries[-1], False

    assert await launch.start(never, "test") == launch.START_ATTEMPTS
    assert len(tries) == launch.START_ATTEMPTS


def _hostile_modules(workspace: Path, plain: int) -> None:
    """A .git/modules tree of 48 git directories and `plain` other directories (a
    workspace's own making: the walk of the protected paths goes through every one)."""
    modules = workspace / ".git" / "modules"
    for n in range(48):
        sub = modules / f"git{n}"
        (sub / "hooks").mkdir(parents=True)
        (sub / "HEAD").write_text("ref: refs/heads/main\n")
        (sub / "config").write_text("[core]\n")
    for n in range(plain):
        (modules / f"d{n // 256}" / f"e{n // 16 % 16}" / f"f{n % 16}").mkdir(parents=True)


async def test_the_plan_walks_off_the_event_loop(
    plan: MakePlan, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk of a hostile workspace's git directories (and, in the same step, the first
    making of the session's network namespace) runs while the event loop serves on: the
    walk waits, after its real work, for a callback only a free loop can run."""
    _hostile_modules(Path(session.workspace_roots[0]), 2048)
    loop_ran = threading.Event()
    answered: list[bool] = []
    real = sandbox_policy.sandbox_protection

    def walk_then_wait(root: str, identity: FsIdentity | None = None) -> Any:
        found = real(root, identity)
        assert len(found.pinned) > 48  # the nested git directories were walked
        loop.call_soon_threadsafe(loop_ran.set)
        answered.append(loop_ran.wait(10))
        return found

    loop = asyncio.get_running_loop()
    monkeypatch.setattr(sandbox_policy, "sandbox_protection", walk_then_wait)
    await plan(SandboxMode.NORMAL)
    assert answered == [True], "the event loop was held while the workspace was walked"


@pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox under a shim drops from root")
async def test_a_start_whose_control_group_cannot_be_joined_is_a_clear_error(
    tmp_path: Path, workspace: Path
) -> None:
    """The chain in front of bwrap (agentd-launch, or the argv chain's `sh`) cannot join
    the session's group: nothing of the command runs, and the call's error says why."""
    forkserver = shim_spawn.Forkserver()
    forkserver.start()
    missing = str(tmp_path / "gone" / "cgroup.procs")
    tasks_dir = tmp_path / "tasks"
    tasks_dir.mkdir()

    async def plan(channels: Channels) -> launch.LaunchPlan:
        policy = SandboxPolicy(
            writable=[str(workspace)],
            cwd=str(workspace),
            env={"BASH_ENV": channels.bash_env},
            limits=Limits(wall_seconds=60),
            cgroup_procs=[missing],
        )
        return launch.LaunchPlan(policy, shell_argv(policy, f"touch {workspace}/ran"))

    try:
        with pytest.raises(ToolError) as caught:
            await launch.start_bash(plan, str(tasks_dir), None, 1 << 20, lambda _: None, forkserver)
    finally:
        forkserver.close()
    assert "The sandbox could not start" in str(caught.value)
    assert "cannot join the session's control group" in str(caught.value)
    assert not (workspace / "ran").exists()


class _Starts:
    """Attempts that fail with the given outcomes, then run."""

    def __init__(self, failures: list[str]) -> None:
        self.failures = failures
        self.made = 0

    async def __call__(self) -> tuple[str, bool]:
        self.made += 1
        if self.failures:
            return self.failures.pop(0), False
        return "ran", True


_BUSY = "bwrap: Creating new namespace failed: Resource temporarily unavailable"


async def test_a_start_refused_for_want_of_a_resource_is_tried_again_after_a_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(launch, "BUSY_PAUSES", (0.01, 0.01, 0.01))
    # Three busy failures (each after a pause) and two others, then one that runs.
    starts = _Starts([_BUSY, _BUSY, "bwrap: Can't find source path /x", _BUSY, "gone"])
    assert await launch.start(starts, "a test") == "ran"
    assert starts.made == 6
    # A fourth busy failure has no pause left: it counts as any other.
    starts = _Starts([_BUSY] * 3 + ["one", _BUSY, "two", "three"])
    assert await launch.start(starts, "a test") == "two"


async def test_other_failures_end_after_start_attempts() -> None:
    starts = _Starts(["first", "second", "third", "fourth"])
    assert await launch.start(starts, "a test") == "third"
    assert starts.made == launch.START_ATTEMPTS
