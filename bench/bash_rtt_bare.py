"""Spawn cost of the sandbox: `bwrap <our argv> true` beside a bare `sh -c true`."""

from __future__ import annotations

import statistics
import subprocess
import time

from agentd_sandbox import SandboxPolicy
from agentd_sandbox.runner import prepare

RUNS = 50


def _time(spawn_once) -> list[float]:
    samples = []
    for _ in range(RUNS):
        started = time.perf_counter()
        spawn_once()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _sandboxed() -> None:
    launch = prepare(SandboxPolicy(), ["true"])
    try:
        proc = subprocess.Popen(launch.argv, stdin=subprocess.DEVNULL, **launch.popen_kwargs)
    finally:
        launch.close()
    assert proc.wait() == 0


def _bare() -> None:
    assert subprocess.run(["sh", "-c", "true"], stdin=subprocess.DEVNULL).returncode == 0


def main() -> None:
    _sandboxed()  # warm the filter and the bwrap probe
    for name, fn in [("sh -c true", _bare), ("bwrap <policy> true", _sandboxed)]:
        ms = _time(fn)
        print(
            f"{name:<22} median {statistics.median(ms):6.2f} ms  p95 "
            f"{sorted(ms)[int(len(ms) * 0.95) - 1]:6.2f} ms  ({RUNS} runs)"
        )


if __name__ == "__main__":
    main()
