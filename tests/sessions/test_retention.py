"""A collection a person asks for (`agentctl session gc`): the configured times unless
given, and given ones checked before anything is collected."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.foundation.errors import InvalidRequest
from agentd.runs.output.registry import Outputs
from agentd.runs.tasks import TaskManager
from agentd.sessions.retention import Reaper
from agentd.sessions.session import SessionManager
from agentd.sessions.store import Store
from tests.support.services import config_under


@pytest.fixture
def parts(tmp_path: Path, workspace: Path) -> Iterator[tuple[Reaper, SessionManager]]:
    config = config_under(tmp_path)
    store = Store(str(tmp_path / "agentd.db"))
    sessions = SessionManager(store, config)
    tasks = TaskManager(store, lambda *a: None, config.task_max_seconds)
    reaper = Reaper(
        config, sessions, tasks, Outputs(config, store), lambda s: str(tmp_path / "tmp" / s.id)
    )
    yield reaper, sessions
    store.close()


@pytest.mark.parametrize(
    "given", [{"idle_seconds": -1}, {"reap_after_seconds": 1e10}, {"idle_seconds": float("nan")}]
)
async def test_times_out_of_range_are_refused(
    parts: tuple[Reaper, SessionManager], workspace: Path, given: dict[str, float]
) -> None:
    reaper, sessions = parts
    session = sessions.create([str(workspace)])
    with pytest.raises(InvalidRequest, match="must be between 0 and 1e9"):
        await reaper.collect_asked(**given)
    assert not sessions.get(session.id).closed


async def test_the_configured_times_unless_given(
    parts: tuple[Reaper, SessionManager], workspace: Path
) -> None:
    reaper, sessions = parts
    open_ = sessions.create([str(workspace)])
    closed = sessions.create([str(workspace)])
    await sessions.close(closed.id)
    # Configured: a week idle, a week of retention; both sessions are recent.
    actions = {c.id: c.action for c in await reaper.collect_asked(dry_run=True)}
    assert actions == {open_.id: "kept", closed.id: "kept"}
    # Given: nothing counts as recent.
    given = await reaper.collect_asked(0, 0, dry_run=True)
    assert {c.id: c.action for c in given} == {open_.id: "closed", closed.id: "reaped"}
    assert not sessions.get(open_.id).closed  # a dry run changes nothing
