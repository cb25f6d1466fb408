"""Fixtures for the permission engine: a real Store, SessionManager and EventLog on a tmp
SQLite file, a session on a tmp workspace, and `decide` to ask the engine about one call.

The tools here are stand-ins (`Stub*`) with the names and permission hints of the real
tools, so these tests do not depend on the tool modules being written in parallel.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agentd.foundation.config import Config
from agentd.permissions import Asker, PermissionEngine, SettingsLoader, TrustStore
from agentd.permissions.decision import Decision
from agentd.permissions.trust import SETTINGS_FILES
from agentd.sessions.events import Event, EventLog
from agentd.sessions.session import Session, SessionManager
from agentd.sessions.store import Store
from agentd.tools.base import FileAccess, Tool, ToolContext
from agentd.tools.services import Services
from tests.support.services import make_services


class StubTool(Tool):
    description: ClassVar[str] = "test double"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    read_only: ClassVar[bool] = False
    access: ClassVar[str] = ""  # "read" or "write": file_access from args["file_path"/"path"]

    def is_read_only(self, args: dict[str, Any]) -> bool:
        return self.read_only

    def file_access(self, args: dict[str, Any]) -> FileAccess | None:
        if not self.access:
            return None
        path = args.get("file_path") or args.get("path") or "."
        return FileAccess(self.access, path)  # type: ignore[arg-type]


def stub(name: str, *, read_only: bool = False, access: str = "") -> StubTool:
    cls = type(f"Stub{name}", (StubTool,), {"name": name, "read_only": read_only, "access": access})
    return cls()


TOOLS: dict[str, StubTool] = {
    "Bash": stub("Bash"),
    "Read": stub("Read", read_only=True, access="read"),
    "LS": stub("LS", read_only=True, access="read"),
    "Grep": stub("Grep", read_only=True, access="read"),
    "Edit": stub("Edit", access="write"),
    "Write": stub("Write", access="write"),
    "MultiEdit": stub("MultiEdit", access="write"),
    "WebFetch": stub("WebFetch", read_only=True),
    "TodoWrite": stub("TodoWrite"),
    "Frobnicate": stub("Frobnicate"),
}


@dataclass
class Env:
    tmp: Path
    ws: Path
    home: Path
    config: Config
    store: Store
    sessions: SessionManager
    session: Session
    engine: PermissionEngine
    services: Services
    progress: list[dict[str, Any]] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=itertools.count)

    @property
    def log(self) -> EventLog:
        return self.sessions.log(self.session.id)

    def ctx(self) -> ToolContext:
        async def record(**kw: Any) -> None:
            self.progress.append(kw)

        state = self.tmp / "state" / "sessions" / self.session.id
        state.mkdir(parents=True, exist_ok=True)
        return ToolContext(
            session=self.session,
            tool_use_id=f"toolu_{next(self._ids)}",
            state_dir=str(state),
            progress=record,
            services=self.services,
        )

    async def decide(
        self, tool: str, args: dict[str, Any], ctx: ToolContext | None = None
    ) -> Decision:
        return await self.engine.decide(self.session, TOOLS[tool], args, ctx or self.ctx())

    async def bash(self, command: str) -> Decision:
        return await self.decide("Bash", {"command": command})

    def settings(self, body: dict[str, Any], name: str = "settings.json") -> Path:
        d = self.ws / ".claude"
        d.mkdir(exist_ok=True)
        path = d / name
        path.write_text(json.dumps(body))
        return path

    def trust(self, name: str = "settings.json") -> str:
        """Approve the settings file's current content, as a person would; its sha256."""
        import hashlib

        path = self.ws / ".claude" / name
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        self.engine.settings.trust.approve(str(path), sha, "test person")
        return sha

    def trust_all(self) -> None:
        for name in SETTINGS_FILES:
            if (self.ws / name).is_file():
                self.trust(os.path.basename(name))

    def events(self, kind: str) -> list[dict[str, Any]]:
        rows = self.store.events_after(self.session.id, 0, self.log.last_seq)
        return [payload for _, _, k, payload, _ in rows if k == kind]

    def decided(self) -> list[dict[str, Any]]:
        rows = self.store.events_after(self.session.id, 0, self.log.last_seq)
        return [payload for _, _, kind, payload, _ in rows if kind == "permission_decided"]


# The uid a root daemon's sandbox (and so a hook) runs as in a workspace root owns.
SANDBOX_UID = 65534


@pytest.fixture
def make_env(tmp_path: Path) -> Iterator[Callable[..., Env]]:
    stores: list[Store] = []
    # Hooks run in the session's sandbox, as the sandbox uid: the workspace must be
    # reachable by it (pytest's tmp_path sits in a 0700 directory of root's).
    base = Path(tempfile.mkdtemp(prefix="agentd-perm-", dir="/tmp"))
    base.chmod(0o755)
    ws = base / "ws"
    ws.mkdir(mode=0o755)
    if os.geteuid() == 0:
        os.chown(ws, SANDBOX_UID, SANDBOX_UID)

    def make(**config: Any) -> Env:
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        cfg = Config(
            socket_path=str(tmp_path / "sock"), state_dir=str(tmp_path / "state"), **config
        )
        store = Store(str(tmp_path / "agentd.db"))
        stores.append(store)
        sessions = SessionManager(store, cfg)
        session = sessions.create([str(ws)])
        session.home = str(home)
        settings = SettingsLoader(cfg, TrustStore(cfg, store))
        engine = PermissionEngine(cfg, sessions, settings=settings)
        services = make_services(cfg, store)
        return Env(tmp_path, ws, home, cfg, store, sessions, session, engine, services)

    yield make
    for store in stores:
        store.close()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def env(make_env: Callable[..., Env]) -> Env:
    return make_env()


class Watcher:
    """An attached client: follows the session's events from now on."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.events: asyncio.Queue[Event] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> Watcher:
        after = self.log.last_seq
        counted = asyncio.Event()

        async def registered() -> None:
            counted.set()

        async def follow() -> None:
            async for event in self.log.subscribe(after, registered):
                self.events.put_nowait(event)

        self._task = asyncio.ensure_future(follow())
        await asyncio.wait_for(counted.wait(), 10)  # from here on it misses nothing
        return self

    async def next(self, kind: str, timeout: float = 10) -> Event:
        async def find() -> Event:
            while (event := await self.events.get()).kind != kind:
                pass
            return event

        return await asyncio.wait_for(find(), timeout)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


@contextlib.asynccontextmanager
async def attached(log: EventLog) -> AsyncIterator[Watcher]:
    """A client attached to the session for the duration of the block."""
    watcher = await Watcher(log).start()
    try:
        yield watcher
    finally:
        await watcher.stop()


def write_hook(dir_: Path, name: str, body: str) -> str:
    """A Python hook script in `dir_` (the workspace: hooks run in the session's sandbox);
    returns the command that runs it."""
    path = dir_ / name
    path.write_text("import json, sys\nevent = json.load(sys.stdin)\n" + body)
    path.chmod(0o644)
    return f"/usr/bin/python3 {path}"


__all__ = ["Asker", "Env", "TOOLS", "Watcher", "attached", "write_hook"]
