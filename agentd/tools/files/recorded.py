"""The file tools' write, recorded as the call's checkpoint (agentd/changes/checkpoints.py):
what it overwrote is its pre-image, the file as written its post-image."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

from agentd.foundation.errors import PathOutsideWorkspace, ToolError
from agentd.fs import access as fsaccess
from agentd.tools.files import filestate

if TYPE_CHECKING:
    from agentd.tools.base import ToolContext

log = logging.getLogger(__name__)


def _written(loc: fsaccess.Located) -> fsaccess.Located:
    """The file a write to `loc` changes: a link inside the root is written through
    (fs/access.py), so its target is what changed, and what a restore puts back."""
    try:
        fd = fsaccess.open_beneath(loc, os.O_PATH)
    except (OSError, PathOutsideWorkspace):
        return loc  # a new file, or one the write refuses anyway
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
    if real == loc.path:
        return loc
    try:
        return fsaccess.locate(real, [loc.root], loc.identity)
    except PathOutsideWorkspace:
        return loc


async def write(
    ctx: ToolContext,
    tool_name: str,
    loc: fsaccess.Located,
    data: bytes,
    current: filestate.Current | None,
) -> None:
    """Write `data` atomically over `current` (None: a new file), then record it."""
    reviews = ctx.services.commands.changes.reviews
    if ctx.session.review and reviews is not None and reviews.busy(ctx.session.id):
        raise ToolError(
            "This session is in review mode and a command's changes are being made or "
            "wait for a person's review; files cannot be written until they are applied "
            "or discarded. Ask the user to review them (agentctl review SESSION)."
        )
    checkpoints = ctx.services.commands.changes.checkpoints
    written = await asyncio.to_thread(_written, loc) if checkpoints is not None else loc
    await asyncio.to_thread(filestate.write, loc, data, ctx.services.temp_ledger)
    if checkpoints is None or written.rel in (".", ""):
        return
    before = (current.data, current.st.st_mode) if current is not None else None
    try:
        await checkpoints.record_file(
            ctx.session,
            tool_use_id=ctx.tool_use_id,
            tool_name=tool_name,
            root=written.root,
            rel=written.rel,
            identity=written.identity,
            before=before,
        )
    except Exception:
        log.exception(
            "session %s: the checkpoint of call %s failed", ctx.session.id, ctx.tool_use_id
        )
