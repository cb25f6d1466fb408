"""How long the event loop was kept from running, measured by the daemon itself.

A timer asks to run every INTERVAL seconds; how late it runs is how long something
held the loop (a callback doing CPU work, a blocking call). Each delay goes to the
`agentd_event_loop_delay_seconds` histogram and the longest since start to a gauge,
so an operator sees a stall as a number, not only as every session slowing at once.
"""

from __future__ import annotations

import asyncio
import time

from agentd.foundation import metrics

INTERVAL = 0.05


class LoopWatch:
    def __init__(self, interval: float = INTERVAL) -> None:
        self.interval = interval
        self.longest = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-watch")

    async def _run(self) -> None:
        while True:
            asked = time.monotonic()
            await asyncio.sleep(self.interval)
            late = max(0.0, time.monotonic() - asked - self.interval)
            self.longest = max(self.longest, late)
            metrics.loop_delay(late)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
