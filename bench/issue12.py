"""Every row of issue 12's table in one run, each beside its baseline measured alongside.

    .venv/bin/python bench/issue12.py [--quick] [--files N]

Ratios, not absolute times (the machine is shared; the load is printed with them):
1. a sandboxed `true` through the daemon vs the minimal bwrap sandbox (bash_rtt.py),
2. Glob `**/*` on an N-file tree vs `rg --files` (search.py),
3. Grep on that tree vs rg direct (search.py),
4. run_tool(Read) p50 vs an empty GetStatus over the same socket (read_rtt.py),
5. 16 clients' Read throughput vs 16 clients' GetStatus throughput (read_rtt.py).
"""

from __future__ import annotations

import argparse
import os

import bash_rtt
import read_rtt
import search
from _common import percentile, verdict


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (noisier)")
    parser.add_argument("--files", type=int, default=100_000)
    args = parser.parse_args()
    rounds, warm = (40, 5) if args.quick else (150, 15)
    n, read_warm, per_client = (300, 50, 60) if args.quick else (1500, 150, 200)
    runs = 5 if args.quick else 9

    table: list[tuple[str, float, str, bool]] = []
    loads = [_load()]

    bash = bash_rtt.measure(rounds, warm)
    ratio = percentile(bash[bash_rtt.DAEMON], 50) / percentile(bash[bash_rtt.MINIMAL_ROW], 50)
    table.append(("sandboxed `true` via daemon vs minimal bwrap", ratio, "<= 1.3x", ratio <= 1.3))
    loads.append(_load())

    rows = {name: (base, ours) for name, base, ours, _ in search.measure(args.files, runs, False)}
    base, ours = rows["Glob **/*"]
    table.append((f"Glob **/* on {args.files} files vs rg --files", ours / base, "<= 1.5x",
                  ours / base <= 1.5))  # fmt: skip
    for name in ("Grep files_with_matches", "Grep content"):
        base, ours = rows[name]
        table.append((f"{name} vs rg direct", ours / base, "<= 1.2x", ours / base <= 1.2))
    loads.append(_load())

    m = read_rtt.measure(n, read_warm, per_client)
    p50 = percentile(m["rows"]["run_tool(Read) over gRPC"], 50)
    floor = percentile(m["rows"]["GetStatus over gRPC (floor)"], 50)
    ratio = p50 / floor
    table.append(("run_tool(Read) p50 vs GetStatus p50", ratio, "<= 1.3x", ratio <= 1.3))
    share = m["per_second"] / m["floor_per_second"]
    table.append((f"{read_rtt.CLIENTS} clients' Read vs GetStatus throughput", share, ">= 80%",
                  share >= 0.8))  # fmt: skip
    loads.append(_load())

    print(f"issue 12, {os.cpu_count()} cpus; load average (1/5/15 min) per stage: "
          + " | ".join(loads))  # fmt: skip
    print(f"| {'what':<52} | {'now':>6} | {'goal':<8} | |")
    print(f"|{'-' * 54}|{'-' * 8}|{'-' * 10}|---|")
    for what, value, goal, ok in table:
        shown = f"{value:.0%}" if goal.endswith("%") else f"{value:.2f}x"
        print(f"| {what:<52} | {shown:>6} | {goal:<8} | {verdict(ok)} |")


if __name__ == "__main__":
    main()
