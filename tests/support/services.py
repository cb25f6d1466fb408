"""The daemon's Services (agentd/tools/services.py) for tests that call a tool or the
executor without a daemon: the one place tests build them, with every part the daemon
gives, so a tool under test runs as it does in the daemon (searches sandboxed, file work
as the session's sandbox identity)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.changes.service import ChangeTracker
from agentd.foundation.config import Config
from agentd.foundation.offload import Offload
from agentd.permissions.asker import Asker
from agentd.runs.command import Commands, CwdChanged
from agentd.runs.output.registry import Outputs
from agentd.runs.shim.spawn import Forkserver
from agentd.runs.tasks import TaskManager
from agentd.sandboxing import runtime
from agentd.sandboxing.runtime import SandboxRuntime
from agentd.sessions.session import Session, SessionManager
from agentd.sessions.store import Store
from agentd.tools.services import Services, TodosChanged

# One forkserver and one pool of workers for every test of a run: each would be a
# process of its own.
FORKSERVER = Forkserver()
OFFLOAD = Offload()


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
    sandbox: SandboxRuntime | None = None,
    on_todos_changed: TodosChanged = _todos_unwatched,
    on_cwd_changed: CwdChanged = _cwd_unwatched,
) -> Services:
    """Services over `store` (the caller closes it), as daemon.py assembles them.
    `sandbox`: the daemon's network, ssh-agent and groups a test made itself; by default
    none of them (runtime.bare(): proxied sessions have no network), said here."""
    sandbox = sandbox if sandbox is not None else runtime.bare()
    sessions = SessionManager(store, config)
    tasks = TaskManager(store, lambda *a: None, config.task_max_seconds)
    outputs = Outputs(config, store)
    changes = ChangeTracker(config, Asker(sessions, 60))
    return Services(
        config=config,
        tasks=tasks,
        outputs=outputs,
        on_todos_changed=on_todos_changed,
        commands=Commands(
            config, sessions, sandbox, FORKSERVER, tasks, outputs, changes, on_cwd_changed
        ),
        sandbox=sandbox,
        temp_ledger=None,
        offload=OFFLOAD,
    )
