"""Worker processes: below the daemon's CPU priority, so the event loop's turns win a core."""

from __future__ import annotations

import os

from agentd.foundation import offload


async def test_workers_run_below_the_loops_priority() -> None:
    """Niced and SCHED_BATCH: on a machine with more runnable processes than cores, a long
    patch waits for the loop's short turns, not the loop for the patch."""
    pool = offload.Offload(workers=1)
    try:
        niceness = await pool.run("s", os.nice, 0)
        policy = await pool.run("s", os.sched_getscheduler, 0)
    finally:
        pool.close()
    assert niceness == min(19, os.nice(0) + offload.WORKER_NICE)
    assert policy == os.SCHED_BATCH
