"""A person's task (agentd/calls/tasks.py): a Bash call in the background through the
executor and the real permission engine, answered with the task itself, or with why it
did not start; the person's terminal reaches the run through the call's context."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentd.calls.executor import Executor
from agentd.calls.tasks import MAX_COMMAND, TaskNotStarted, TaskRequest, TaskStarter
from agentd.foundation.errors import InvalidRequest
from agentd.permissions import PermissionEngine
from agentd.runs.launch import Interactive
from agentd.runs.shim.client import ShimRun
from agentd.sessions import dirs as session_dirs
from agentd.sessions.session import Session, SessionManager
from agentd.sessions.store import Store
from agentd.tools import default_registry
from agentd.tools.services import Services
from tests.support.services import config_under, make_services


@dataclass
class World:
    starter: TaskStarter
    services: Services
    session: Session


@pytest.fixture
async def world(workspace: Path, tmp_path: Path) -> AsyncIterator[World]:
    config = config_under(tmp_path, deny_rules=["Bash(echo denied:*)"])
    store = Store(str(tmp_path / "a.db"))
    sessions = SessionManager(store, config)
    services = make_services(config, store)
    executor = Executor(
        default_registry(), sessions, config, PermissionEngine(config, sessions), services
    )
    session = sessions.create([str(workspace)], permission_mode="bypassPermissions")
    yield World(TaskStarter(executor), services, session)
    store.close()
    session_dirs.of(config.state_dir).remove_all()


@pytest.mark.parametrize(
    "request_",
    [
        TaskRequest(command=""),
        TaskRequest(command="x" * (MAX_COMMAND + 1)),
        TaskRequest(command="true", tool_use_id="not/an id"),
    ],
)
async def test_a_request_no_call_can_be_made_of_is_refused(
    world: World, request_: TaskRequest
) -> None:
    with pytest.raises(InvalidRequest):
        await world.starter.start(world.session, request_)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
async def test_the_task_started_is_the_sessions(world: World) -> None:
    task = await world.starter.start(
        world.session, TaskRequest(command="echo started", description="d", tool_use_id="t-1")
    )
    assert world.services.tasks.get(world.session.id, task.id) is task
    assert (task.command, task.description, task.tool_use_id) == ("echo started", "d", "t-1")
    run = world.services.tasks.run_of(task)
    if run is not None:  # the test's loop sees it end, not the fixture's
        await asyncio.wait_for(run.done, 60)


async def test_a_denied_call_says_why_it_did_not_start(world: World) -> None:
    with pytest.raises(TaskNotStarted, match="denied"):
        await world.starter.start(world.session, TaskRequest(command="echo denied now"))
    assert world.services.tasks.list(world.session.id) == []


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
async def test_a_persons_terminal_reaches_the_run(world: World) -> None:
    task = await world.starter.start(
        world.session,
        TaskRequest(command="sleep 30", interactive=Interactive(pty=(24, 80), stdin=True)),
    )
    run = world.services.tasks.run_of(task)
    if not isinstance(run, ShimRun):
        pytest.skip("this machine's sandbox chain runs commands in the daemon's process")
    try:
        assert run.pty == (24, 80) and run.stdin_open
    finally:
        run.kill()
        await asyncio.wait_for(run.done, 60)
