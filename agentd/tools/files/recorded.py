"""The file tools' write, recorded as the call's checkpoint (agentd/changes/checkpoints.py):
what it overwrote is its pre-image, the file as written its post-image."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from agentd.fs import access as fsaccess
from agentd.tools.files import filestate

if TYPE_CHECKING:
    from agentd.tools.base import ToolContext

log = logging.getLogger(__name__)


async def write(
    ctx: ToolContext,
    tool_name: str,
    loc: fsaccess.Located,
    data: bytes,
    current: filestate.Current | None,
) -> None:
    """Write `data` atomically over `current` (None: a new file), then record it."""
    await asyncio.to_thread(filestate.write, loc, data, ctx.services.temp_ledger)
    checkpoints = ctx.services.commands.changes.checkpoints
    if checkpoints is None or loc.rel in (".", ""):
        return
    before = (current.data, current.st.st_mode) if current is not None else None
    try:
        await checkpoints.record_file(
            ctx.session,
            tool_use_id=ctx.tool_use_id,
            tool_name=tool_name,
            root=loc.root,
            rel=loc.rel,
            identity=loc.identity,
            before=before,
        )
    except Exception:
        log.exception(
            "session %s: the checkpoint of call %s failed", ctx.session.id, ctx.tool_use_id
        )
