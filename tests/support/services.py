"""The daemon's Services (agentd/tools/services.py) for tests that call a tool or the
executor without a daemon: the one place tests build them, with every part the daemon
gives, so a tool under test runs as it does in the daemon (searches sandboxed, file work
as the session's sandbox identity)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.changes.service import ChangeTracker
from agentd.foundation.config import Config
from agentd.permissions.asker import Asker
from agentd.runs.output.registry import Outputs
from agentd.runs.tasks import TaskManager
from agentd.sessions.session import Session, SessionManager
from agentd.sessions.store import Store
from agentd.tools.services import CwdChanged, Services, TodosChanged


def config_under(tmp: Path, **settings: Any) -> Config:
    """A config whose socket and state dir are under `tmp`."""
    return Config(socket_path=str(tmp / "agentd.sock"), state_dir=str(tmp / "state"), **settings)


async def _todos_unwatched(session: Session, todos: list[dict[str, Any]]) -> None:
    """No client is attached in a test without a daemon."""


def _cwd_unwatched(session: Session, cwd: str, previous: str) -> None:
    """No client is attached in a test without a daemon."""


def make_services(
    config: Config,
    store: Store,
    *,
    on_todos_changed: TodosChanged = _todos_unwatched,
    on_cwd_changed: CwdChanged = _cwd_unwatched,
) -> Services:
    """Services over `store` (the caller closes it), as daemon.py assembles them."""
    return Services(
        config=config,
        tasks=TaskManager(store, lambda *a: None, config.task_max_seconds),
        outputs=Outputs(config, store),
        on_todos_changed=on_todos_changed,
        on_cwd_changed=on_cwd_changed,
        changes=ChangeTracker(config, Asker(SessionManager(store, config), 60)),
    )
