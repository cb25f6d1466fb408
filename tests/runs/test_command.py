"""A command's run and what it did (agentd/runs/command.py), without a daemon: the cwd it
moved, the files it changed that the session had read, a cwd gone before it ran, and
the task it becomes in the background."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentd.runs.command import CommandRequest, Commands
from agentd.sandboxing import policy as sandbox_policy
from agentd.sandboxing.mode import SandboxMode
from agentd.sessions import dirs as session_dirs
from agentd.sessions.session import FileState, Session
from agentd.sessions.store import Store
from tests.support.services import config_under, make_services

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")


@dataclass
class World:
    commands: Commands
    session: Session
    ws: Path
    moves: list[tuple[str, str]] = field(default_factory=list)

    def request(self, command: str) -> CommandRequest:
        config = self.commands.config
        return CommandRequest(
            session=self.session,
            command=command,
            tool_use_id="toolu_cmd",
            mode=SandboxMode.NORMAL,
            identity=sandbox_policy.fs_identity(self.session, config),
        )

    async def finished(self, command: str) -> list[str]:
        run = await self.commands.start(self.request(command))
        outcome = await run.follow(60, asyncio.Event(), _no_progress)
        assert outcome == "done"
        done = await run.finish(outcome, asyncio.Event())
        assert done.code == 0, bytes(done.output.head)
        return done.notices


async def _no_progress(**where: object) -> None:
    pass


@pytest.fixture
async def world(workspace: Path, tmp_path: Path) -> AsyncIterator[World]:
    config = config_under(tmp_path)
    store = Store(str(tmp_path / "a.db"))
    moves: list[tuple[str, str]] = []
    services = make_services(
        config, store, on_cwd_changed=lambda s, cwd, previous: moves.append((cwd, previous))
    )
    session = Session(id="s-command", workspace_roots=[str(workspace)], cwd=str(workspace))
    yield World(services.commands, session, workspace, moves)
    store.close()
    session_dirs.of(config.state_dir).remove_all()


async def test_the_cwd_it_moved_to_is_the_sessions(world: World) -> None:
    (world.ws / "sub").mkdir()
    os.chown(world.ws / "sub", *_owner(world.ws))
    notices = await world.finished("cd sub")
    assert world.session.cwd == str(world.ws / "sub")
    assert world.moves == [(str(world.ws / "sub"), str(world.ws))]
    assert notices == []


async def test_a_cwd_outside_the_workspace_is_undone(world: World) -> None:
    notices = await world.finished("cd /")
    assert world.session.cwd == str(world.ws)
    assert notices == [f"Shell cwd was reset to {world.ws}"]
    assert world.moves == []


async def test_files_read_earlier_that_it_changed_are_named(world: World) -> None:
    read = world.ws / "read.txt"
    read.write_text("before\n")
    os.chown(read, *_owner(world.ws))
    world.session.read_state[str(read)] = FileState("", 0, 7, False)
    notices = await world.finished("echo after >> read.txt")
    assert notices == [
        "This command changed files you have read: read.txt. Read them again before editing them."
    ]


async def test_a_cwd_gone_is_the_workspace_before_it_runs(world: World) -> None:
    world.session.cwd = str(world.ws / "gone")
    notices = await world.finished("true")
    assert world.session.cwd == str(world.ws)
    assert notices == [
        f"The working directory {world.ws / 'gone'} no longer exists; the command ran in "
        f"{world.ws}."
    ]


async def test_in_the_background_it_is_a_task_of_the_session(world: World) -> None:
    run = await world.commands.start(world.request("echo in the background"))
    run.to_background()
    tasks = world.commands.tasks
    assert tasks.get(world.session.id, run.task.id) is run.task
    assert await run.run.done == 0
    assert b"in the background" in bytes(run.output.head)


def _owner(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_uid, st.st_gid


async def test_a_run_followed_past_its_timeout_or_cancelled_is_said_so(world: World) -> None:
    """agentd/runs/progress.py: the outcome, then a run not done is killed at its finish."""
    updates: list[dict[str, object]] = []

    async def progress(**where: object) -> None:
        updates.append(where)

    run = await world.commands.start(world.request("echo begun; sleep 7331.5"))
    assert await run.follow(1.5, asyncio.Event(), progress) == "timeout"
    cancelled = asyncio.Event()
    cancelled.set()
    assert await run.follow(60, cancelled, progress) == "cancelled"
    done = await run.finish("cancelled", cancelled)
    assert done.code != 0
    assert b"begun" in bytes(done.output.head)
    assert updates and all(u["output_id"] == run.output.id for u in updates)
