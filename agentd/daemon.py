"""The daemon's parts, assembled: store, sessions, tools, executor, servicer, server."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from agentd.config import Config
from agentd.executor import Executor
from agentd.server import Server
from agentd.service import Servicer
from agentd.sessions import Session, SessionManager
from agentd.store import Store
from agentd.tools import default_registry

log = logging.getLogger(__name__)


class Daemon:
    def __init__(self, config: Config) -> None:
        self.config = config
        os.makedirs(config.state_dir, mode=0o700, exist_ok=True)
        os.chmod(config.state_dir, 0o700)
        self.store = Store(config.db_path)
        self.sessions = SessionManager(self.store, config)
        self.services: dict[str, Any] = {"on_todos_changed": self._todos_changed}
        self.executor = Executor(default_registry(), self.sessions, config, services=self.services)
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

    async def start(self) -> None:
        self.server = Server(self.config, self.servicer)
        await self.server.start()

    async def stop(self) -> None:
        if self._stopped.is_set():
            return
        log.info("agentd shutting down")
        if self.server is not None:
            await self.server.stop()
        self.store.close()
        self._stopped.set()

    async def wait(self) -> None:
        await self._stopped.wait()
