"""A command printing 1 GiB through the daemon, beside the same command writing to /dev/null.

    .venv/bin/python bench/bash_output.py [--quick]

Rows, interleaved in this run, each a RunTool(Bash) over gRPC to a daemon process (same
session, same sandbox, same spawn):
- `head -c N /dev/zero > /dev/null` (the baseline: no output crosses the pipe),
- `head -c N /dev/zero | cat > /dev/null` (the cost of any pipe at all, for reference),
- `head -c N /dev/zero` (N bytes through the pipe, the reader thread and the bounded
  output file).
Then the daemon's memory (VmRSS, VmHWM from /proc) before and after.
Goals (the issue): time <= 1.5x the baseline; the daemon's RSS grows <= 50 MB.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time

from _common import daemon, memory_kb, verdict, workspace

GIB = 1 << 30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run")
    args = parser.parse_args()
    size, rounds = (GIB // 4, 2) if args.quick else (GIB, 3)

    ws = workspace()
    try:
        with daemon() as d:
            from agentd_client import Client

            pid = d.proc.pid
            with Client(d.socket) as c:
                session = c.create_session(ws, permission_mode="bypassPermissions")

                def bash(command: str) -> float:
                    t0 = time.perf_counter()
                    r = c.run_tool(session.id, "Bash", {"command": command, "timeout": 600_000})
                    elapsed = time.perf_counter() - t0
                    assert not r.is_error, r.text[:500]
                    return elapsed

                commands = {
                    "> /dev/null (baseline)": f"head -c {size} /dev/zero > /dev/null",
                    "| cat > /dev/null (pipe)": f"head -c {size} /dev/zero | cat > /dev/null",
                    "through the daemon": f"head -c {size} /dev/zero",
                }
                # Warm: the daemon's code paths, the sandbox probe, a small output.
                for _ in range(3):
                    bash("head -c 1048576 /dev/zero")
                    bash("true")
                before = memory_kb(pid)
                seconds: dict[str, list[float]] = {name: [] for name in commands}
                for _ in range(rounds):
                    for name, command in commands.items():
                        seconds[name].append(bash(command))
                after = memory_kb(pid)
    finally:
        shutil.rmtree(ws, ignore_errors=True)

    base = statistics.median(seconds["> /dev/null (baseline)"])
    print(f"{size / GIB:g} GiB of output, {rounds} interleaved rounds (median)")
    print(f"{'':24} {'seconds':>8} {'GiB/s':>7} {'vs base':>8}")
    for name, s in seconds.items():
        m = statistics.median(s)
        print(f"{name:24} {m:8.3f} {size / GIB / m:7.2f} {m / base:7.2f}x")
    ratio = statistics.median(seconds["through the daemon"]) / base
    rss_growth = (after["VmRSS"] - before["VmRSS"]) / 1024
    peak_growth = (after["VmHWM"] - before["VmRSS"]) / 1024
    print(
        f"daemon memory: VmRSS {before['VmRSS'] / 1024:.1f} -> {after['VmRSS'] / 1024:.1f} MB "
        f"(+{rss_growth:.1f}), VmHWM {before['VmHWM'] / 1024:.1f} -> "
        f"{after['VmHWM'] / 1024:.1f} MB (peak +{peak_growth:.1f} over the RSS before)"
    )
    print(
        f"goals: time <= 1.5x: {verdict(ratio <= 1.5)} ({ratio:.2f}x); "
        f"RSS growth <= 50 MB: {verdict(max(rss_growth, peak_growth) <= 50)} "
        f"(+{max(rss_growth, peak_growth):.1f} MB at peak)"
    )


if __name__ == "__main__":
    main()
