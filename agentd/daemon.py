"""The daemon's parts, assembled: store, sessions, tools, executor, servicer, server."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import agentd_sandbox
from agentd.config import Config
from agentd.executor import Executor
from agentd.outputs import Outputs
from agentd.permissions import Asker, PermissionEngine, SettingsLoader, TrustStore, parse_rule
from agentd.server import Server
from agentd.service import Servicer
from agentd.sessions import Session, SessionManager
from agentd.store import Store
from agentd.tasks import TaskManager
from agentd.tools import default_registry

log = logging.getLogger(__name__)


def _sandbox_report() -> dict[str, Any]:
    """What the sandbox can enforce here, for `agentctl status`; never fatal."""
    try:
        return agentd_sandbox.check()
    except Exception as exc:  # a broken probe must not stop the daemon
        log.warning("sandbox check failed: %s", exc)
        return {"error": str(exc)}


class Daemon:
    def __init__(self, config: Config) -> None:
        self.config = config
        os.makedirs(config.state_dir, mode=0o700, exist_ok=True)
        os.chmod(config.state_dir, 0o700)
        self.store = Store(config.db_path)
        self.sessions = SessionManager(self.store, config)
        self.tasks = TaskManager(self.store, self._emit, config.task_max_seconds)
        self.services: dict[str, Any] = {
            "config": config,
            "tasks": self.tasks,
            "outputs": Outputs(config),
            "on_todos_changed": self._todos_changed,
            "on_cwd_changed": self._cwd_changed,
            "sandbox_report": _sandbox_report(),
        }
        self.sessions.on_close.append(lambda s: self.tasks.stop_session(s.id))
        self.executor = Executor(default_registry(), self.sessions, config, services=self.services)
        # Closing a session ends its running calls too, not only its background tasks.
        self.sessions.on_close.append(lambda s: self.executor.cancel_all(session_id=s.id))
        asker = Asker(self.sessions, config.permission_timeout_seconds)
        settings = SettingsLoader(config, TrustStore(config, self.store))
        self.executor.permissions = PermissionEngine(
            config, self.sessions, asker, settings=settings
        )
        self.services["asker"] = asker
        self.services["trust"] = self.executor.permissions.approvals
        self.services["parse_rule"] = parse_rule
        self.servicer = Servicer(
            self.sessions,
            self.executor,
            socket_path=config.socket_path,
            state_dir=config.state_dir,
            services=self.services,
        )
        self.server: Server | None = None
        self._stopped = asyncio.Event()

    async def _todos_changed(self, session: Session, todos: list[dict[str, Any]]) -> None:
        self.sessions.log(session.id).emit("todos_changed", todos=todos)

    def _emit(self, session_id: str, kind: str, payload: dict[str, Any]) -> None:
        self.sessions.log(session_id).emit(kind, **payload)

    def _cwd_changed(self, session: Session, cwd: str, previous: str) -> None:
        self.sessions.log(session.id).emit("cwd_changed", cwd=cwd, previous=previous)

    async def start(self) -> None:
        self.server = Server(self.config, self.servicer)
        await self.server.start()

    async def stop(self) -> None:
        if self._stopped.is_set():
            return
        log.info("agentd shutting down")
        # New calls are refused while running ones end now (their sandboxes with them)
        # and their callers get what was printed; then the background tasks stop.
        stopping = [self.executor.cancel_all()]
        if self.server is not None:
            stopping.append(self.server.stop())
        await asyncio.gather(*stopping)
        await self.tasks.stop_all()
        self.store.close()
        self._stopped.set()

    async def wait(self) -> None:
        await self._stopped.wait()
