"""The workspace part of planning a Bash command, walked each time beside kept between
plans (agentd/runs/plans.py), interleaved in one run.

    .venv/bin/python bench/launch_plan.py [--rounds N]

Rows, on a workspace with a git dir, two submodules and a few protected names:
- walk: sandbox_protection, what every plan did before (the root's protected names and
  its git dirs looked up beneath the root's descriptor),
- kept: PlanCache.protection for the same root once its answer is kept (a stat of each
  directory the answer rests on).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from _common import percentile

from agentd.runs.plans import PlanCache
from agentd.sandboxing.protected import sandbox_protection


def _workspace() -> str:
    root = Path(tempfile.mkdtemp(prefix="agentd-bench-plan-"))
    for git in (root / ".git", root / ".git/modules/a", root / ".git/modules/b"):
        (git / "hooks").mkdir(parents=True)
        (git / "HEAD").write_text("ref: refs/heads/main\n")
        (git / "config").write_text("[core]\n")
    for name in (".envrc", ".npmrc", ".vscode/settings.json"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x\n")
    old = time.time() - 60
    for path, dirs, _ in os.walk(root):
        for d in (path, *(os.path.join(path, x) for x in dirs)):
            os.utime(d, (old, old))
    return str(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    root = _workspace()
    # The tree's change times are now: a clock past the racy margin lets it be kept.
    cache = PlanCache(clock=lambda: time.time_ns() + 10**10)
    try:
        cache.protection("s", root, None)
        rows = {
            "walk (sandbox_protection)": lambda: sandbox_protection(root),
            "kept (PlanCache.protection)": lambda: cache.protection("s", root, None),
        }
        samples: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.rounds):
            for name, fn in rows.items():
                t0 = time.perf_counter()
                fn()
                samples[name].append((time.perf_counter() - t0) * 1e6)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert cache.walked == 1, cache.walked
    base = percentile(samples["walk (sandbox_protection)"], 50)
    print(f"{'row':32} {'p50 us':>8} {'p90 us':>8} {'x walk':>7}")
    for name, values in samples.items():
        p50 = percentile(values, 50)
        print(f"{name:32} {p50:8.1f} {percentile(values, 90):8.1f} {p50 / base:7.2f}")


if __name__ == "__main__":
    main()
