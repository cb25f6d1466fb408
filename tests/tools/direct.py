"""The Bash tool called directly, without a daemon: the context the executor would build."""

from __future__ import annotations

from pathlib import Path

from agentd.fs import tmpfs
from agentd.sandboxing.mode import SandboxMode
from agentd.sessions import dirs as session_dirs
from agentd.sessions.session import Session
from agentd.sessions.store import Store
from agentd.tools.base import ToolContext, ToolResult
from agentd.tools.bash.tool import BashTool
from tests.support.services import config_under, make_services


async def call_bash(
    ws: Path,
    tmp_path: Path,
    command: str,
    *,
    sandbox: str = "normal",
    session_id: str = "s-direct",
    tool_use_id: str = "toolu_direct",
) -> ToolResult:
    """Run `command` as a Bash call of a fresh session on `ws`, as `sandbox` says
    (ToolContext.sandbox); a ToolError propagates (the executor would make it is_error)."""
    config = config_under(tmp_path)
    store = Store(str(tmp_path / "a.db"))
    try:
        session = Session(id=session_id, workspace_roots=[str(ws)], cwd=str(ws))
        state = tmp_path / "state"
        state.mkdir(exist_ok=True)

        async def progress(**kw: object) -> None:
            pass

        ctx = ToolContext(
            session=session,
            tool_use_id=tool_use_id,
            state_dir=str(state),
            progress=progress,
            services=make_services(config, store),
        )
        ctx.sandbox = SandboxMode(sandbox)
        return await BashTool().call({"command": command}, ctx)
    finally:
        store.close()
        # The session's temp and output dirs under the daemon's base in /tmp, and the base
        # (agentd/sessions/dirs.py): no daemon is there to reap them.
        dirs = session_dirs.of(config.state_dir)
        tmpfs.unmount(dirs.tmp_path(session_id))
        dirs.remove_session(session_id)
        dirs.remove_base()
