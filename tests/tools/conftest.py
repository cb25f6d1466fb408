"""Fixtures for tool tests: a workspace, a session on it, and `call` to run a tool."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentd.foundation.errors import InputError, ToolError
from agentd.sessions.session import Session
from agentd.tools import default_registry
from agentd.tools.base import ImageBlock, TextBlock, ToolContext, ToolResult


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
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def session(ws: Path, tmp_path: Path) -> Session:
    home = tmp_path / "home"
    home.mkdir()
    return Session(id="s-test", workspace_roots=[str(ws)], cwd=str(ws), home=str(home))


Call = Callable[..., Awaitable[CallResult]]


@pytest.fixture
def tool_services() -> dict[str, Any]:
    """ToolContext.services for `call`; a test module overrides it (WebFetch's config)."""
    return {}


@pytest.fixture
def call(session: Session, tmp_path: Path, tool_services: dict[str, Any]) -> Call:
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
