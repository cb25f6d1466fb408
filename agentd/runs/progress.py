"""A run followed to its end with progress for its caller's watchers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from agentd.runs.output.file import PROGRESS_INTERVAL
from agentd.runs.run import Output, Run

# Seconds between progress updates of a command that prints nothing.
HEARTBEAT = 1.0

# Where a run's output stands, for its caller's watchers (output_id, output_size,
# last_line; message).
Progress = Callable[..., Awaitable[None]]
Outcome = Literal["done", "timeout", "cancelled"]


async def follow_run(
    run: Run, timeout: float, cancelled_event: asyncio.Event, progress: Progress
) -> Outcome:
    """Report progress until the run ends ("done"), times out, or `cancelled_event` is
    set ("cancelled").

    Progress carries where the output file stands (its id and size) and the last line,
    never the bytes: watchers read those from the file (ReadOutput), every one of them.
    An update goes out when the output grew, else once every HEARTBEAT seconds.
    """
    deadline = time.monotonic() + timeout
    cancelled = asyncio.ensure_future(cancelled_event.wait())
    started = time.monotonic()
    out = run.output
    sent_size, sent_at = -1, started
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            waiting: set[asyncio.Future[Any]] = {run.done, cancelled}
            done, _ = await asyncio.wait(
                waiting,
                timeout=min(PROGRESS_INTERVAL, remaining),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if run.done in done:
                if out.size != sent_size:
                    await progress(**_where(out))
                return "done"
            if cancelled in done:
                return "cancelled"
            now = time.monotonic()
            if out.size == sent_size and now - sent_at < HEARTBEAT:
                continue
            sent_size, sent_at = out.size, now
            await progress(message=f"running {now - started:.0f}s", **_where(out))
    finally:
        cancelled.cancel()


def _where(out: Output) -> dict[str, Any]:
    return {"output_id": out.id, "output_size": out.size, "last_line": out.last_line}
