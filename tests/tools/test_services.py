"""The daemon's Services are typed and all required: a call's context cannot be made
without them, so no tool can fall back to an unsandboxed search or to file work as the
daemon's own identity because the assembly forgot a part."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from agentd.fs.identity import FsIdentity
from agentd.sessions.session import Session
from agentd.tools.base import ToolContext
from agentd.tools.search import ripgrep
from agentd.tools.services import Services
from tests.conftest import SANDBOX_UID


async def _progress(**kw: object) -> None:
    pass


def _ctx(session: Session, services: Services, state: Path) -> ToolContext:
    return ToolContext(
        session=session,
        tool_use_id="toolu_1",
        state_dir=str(state),
        progress=_progress,
        services=services,
    )


def test_a_context_needs_the_services(session: Session, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="services"):
        ToolContext(  # type: ignore[call-arg]
            session=session, tool_use_id="toolu_1", state_dir=str(tmp_path), progress=_progress
        )


def test_services_need_every_part_and_stay_as_built(tool_services: Services) -> None:
    parts = {f.name: getattr(tool_services, f.name) for f in dataclasses.fields(Services)}
    for name in parts:
        with pytest.raises(TypeError, match=name):
            Services(**{k: v for k, v in parts.items() if k != name})
    with pytest.raises(dataclasses.FrozenInstanceError):
        tool_services.config = tool_services.config  # type: ignore[misc]


@pytest.mark.skipif(os.geteuid() != 0, reason="a daemon that is not root has one identity")
def test_file_work_is_the_sandbox_identity(
    session: Session, tool_services: Services, tmp_path: Path
) -> None:
    ctx = _ctx(session, tool_services, tmp_path)
    assert ctx.fs_identity() == FsIdentity(SANDBOX_UID, SANDBOX_UID)


def test_a_search_of_the_workspace_is_sandboxed(
    session: Session, tool_services: Services, tmp_path: Path
) -> None:
    ctx = _ctx(session, tool_services, tmp_path)
    root = ripgrep.search_root(None, ctx)
    assert root.sandbox is not None
    assert root.sandbox.writable == [] and not root.sandbox.network
