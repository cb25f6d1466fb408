"""Fixtures for tool tests: a workspace, a session on it, and `call` to run a tool."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentd.foundation.config import Config
from agentd.foundation.errors import InputError, ToolError
from agentd.sessions import dirs as session_dirs
from agentd.sessions.session import Session
from agentd.sessions.store import Store
from agentd.tools import default_registry
from agentd.tools.base import ImageBlock, TextBlock, ToolContext, ToolResult
from agentd.tools.services import Services
from tests.conftest import SANDBOX_UID
from tests.support.services import config_under, make_services


@dataclass
class CallResult:
    """What a client sees of a tool call."""

    content: list[TextBlock | ImageBlock]
    is_error: bool
    data: Any

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


@pytest.fixture
def ws(workspace: Path) -> Path:
    """The session's workspace: one the sandbox identity can reach and owns (conftest's),
    as a root daemon's sessions have; the tools act as that identity on it."""
    return workspace


@pytest.fixture
def session(ws: Path) -> Iterator[Session]:
    home = ws.parent / f"{ws.name}-home"
    home.mkdir()
    if os.geteuid() == 0:
        os.chown(home, SANDBOX_UID, SANDBOX_UID)
    yield Session(id="s-test", workspace_roots=[str(ws)], cwd=str(ws), home=str(home))
    shutil.rmtree(home, ignore_errors=True)


Call = Callable[..., Awaitable[CallResult]]


@pytest.fixture
def tool_config(tmp_path: Path) -> Config:
    """The daemon's config for `call`; a test module overrides it (WebFetch's hosts)."""
    return config_under(tmp_path / "daemon")


@pytest.fixture
def tool_services(tool_config: Config, tmp_path: Path) -> Iterator[Services]:
    """ToolContext.services for `call`, as the daemon gives them."""
    store = Store(str(tmp_path / "services.db"))
    yield make_services(tool_config, store)
    store.close()
    # Its sessions' temp and output dirs under a base in /tmp (agentd/sessions/dirs.py).
    session_dirs.of(tool_config.state_dir).remove_all()


@pytest.fixture
def call(session: Session, tmp_path: Path, tool_services: Services) -> Call:
    registry = default_registry()
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    progress: list[dict[str, Any]] = []

    async def record(**kw: Any) -> None:
        progress.append(kw)

    async def run(name: str, args: dict[str, Any]) -> CallResult:
        tool = registry.get(name)
        assert tool is not None, f"no tool {name}"
        ctx = ToolContext(
            session=session,
            tool_use_id="toolu_1",
            state_dir=str(state_dir),
            progress=record,
            services=tool_services,
        )
        args = tool.lenient_input(args)  # as the executor does before its schema check
        try:
            await tool.validate_input(args, ctx)
            result: ToolResult = await tool.call(args, ctx)
        except InputError as exc:
            result = ToolResult.error(str(exc), input_error=True)
        except ToolError as exc:
            result = ToolResult.error(str(exc))
        json.dumps(result.data)  # structured data must be JSON
        return CallResult(result.content, result.is_error, result.data)

    run.progress = progress  # type: ignore[attr-defined]
    return run
