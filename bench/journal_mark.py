"""The cost of the journal's commit count (agentd/sessions/commit_mark.py) on Write calls.

    .venv/bin/python bench/journal_mark.py [--quick]

Write calls through `Executor.run_one` in-process with a real Store (each a commit its
reply waits for, as in the daemon), in rounds that alternate between the store as it is
(the count in the commit, then written to STATE/journal-commits and fsynced on a thread)
and the same store with the count turned off; calls/s and p50/p99 of each, and the
ratio, all measured in this run on the same disk.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

from _common import percentile, workspace


async def _nothing(*_: Any, **__: Any) -> None:
    return None


class _NoMark:
    """The store's mark, turned off (the baseline)."""

    def set(self, journal_id: str, commits: int) -> None:
        pass

    def close(self) -> None:
        pass


async def _run(ws: str, state: str, rounds: int, per_round: int) -> dict[str, list[float]]:
    from agentd.calls.executor import ToolUse
    from agentd.daemon import Daemon
    from agentd.foundation.config import Config

    config = Config(
        socket_path=os.path.join(state, "run", "agentd.sock"),
        state_dir=os.path.join(state, "daemon"),
    )
    d = Daemon(config)
    store = d.store
    with_mark = (store._mark, store._count_commit)
    without = (_NoMark(), lambda: None)
    s = d.sessions.create([ws], permission_mode="bypassPermissions")
    samples: dict[str, list[float]] = {"with the count": [], "without": []}
    n = 0
    for r in range(rounds * 2):
        label = "with the count" if r % 2 == 0 else "without"
        store._mark, store._count_commit = with_mark if label == "with the count" else without  # type: ignore[assignment,method-assign]
        for _ in range(per_round):
            n += 1
            use = ToolUse(
                f"toolu_{n}",
                "Write",
                {"file_path": f"{ws}/f{n % 50}.txt", "content": f"v{n}\n" * 20},
            )
            t0 = time.perf_counter()
            result = await d.executor.run_one(s, use, _nothing)
            samples[label].append((time.perf_counter() - t0) * 1000)
            assert not result.is_error, result.content
    store._mark, store._count_commit = with_mark  # type: ignore[method-assign]
    await d.stop()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds, per_round = (4, 50) if args.quick else (10, 200)
    ws = workspace()
    state = tempfile.mkdtemp(prefix="agentd-bench-state-")
    try:
        samples = asyncio.run(_run(ws, state, rounds, per_round))
    finally:
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)
    base = statistics.fmean(samples["without"])
    print(f"Write calls in-process, {rounds} interleaved rounds of {per_round} each:")
    for label, ms in samples.items():
        mean = statistics.fmean(ms)
        print(
            f"  {label:15} {1000 / mean:8.0f} calls/s  p50 {percentile(ms, 50):6.3f} ms  "
            f"p99 {percentile(ms, 99):6.3f} ms  ({mean / base:.3f}x the time of without)"
        )


if __name__ == "__main__":
    main()
