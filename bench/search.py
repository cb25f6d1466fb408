"""Grep and Glob through the daemon beside ripgrep run directly on the same large tree.

    .venv/bin/python bench/search.py [--files N] [--runs N]

Rows, each measured in this run on one tree of N files (default 100 000):
- `rg -l PATTERN` run directly (as this process), and Grep files_with_matches through
  the daemon (rg in the session's sandbox, as the session's identity);
- `rg -n PATTERN` directly, and Grep content mode;
- `rg --files` directly, and Glob `**/*` (which also stats every match for its order);
- the sandbox's start alone (`true` in the same sandbox rg runs in), the fixed cost a
  search pays.
Goals (issue 12): Grep <= 1.2x rg direct; Glob <= 1.5x `rg --files` (it was 4.1x).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable

from _common import daemon, verdict, workspace

from agentd_client import Client

RG = shutil.which("rg") or "/usr/bin/rg"
PATTERN = "needle_[0-9]+"
COMMON = ["--no-config", "--color", "never", "--hidden", "--glob", "!.git"]


def _tree(root: str, files: int) -> None:
    per_dir = 100
    for d in range(files // per_dir):
        directory = os.path.join(root, f"pkg{d // 100}", f"mod{d % 100}")
        os.makedirs(directory, exist_ok=True)
        for i in range(per_dir):
            n = d * per_dir + i
            body = f"def f{n}(x):\n    return x + {n}\n" * 4
            if n % 997 == 0:
                body += f"# needle_{n}\n"
            with open(os.path.join(directory, f"m{i}.py"), "w") as f:
                f.write(body)


def _time_ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def _paired_ms(a: Callable[[], object], b: Callable[[], object], runs: int) -> tuple[float, float]:
    """Medians of `a` and `b`, timed alternately so a busy machine weighs on both alike."""
    a()  # warm the page cache and the daemon
    b()
    pairs = [(_time_ms(a), _time_ms(b)) for _ in range(runs)]
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()
    return statistics.median(_time_ms(fn) for _ in range(runs))


def _rg(ws: str, *args: str) -> Callable[[], object]:
    return lambda: subprocess.run(
        [RG, *COMMON, *args],
        cwd=ws,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        check=False,
    )


def measure(files: int, runs: int, small: bool = True) -> list[tuple[str, float, float, float]]:
    """(row, rg direct ms, agentd ms, goal ratio) of each row, on one tree of `files`."""
    ws = workspace()
    out: list[tuple[str, float, float, float]] = []
    try:
        _tree(ws, files)
        with daemon() as proc, Client(proc.socket, timeout=300) as client:
            sid = client.create_session(ws, permission_mode="bypassPermissions").id

            def tool(name: str, args: dict) -> Callable[[], object]:
                def run() -> None:
                    result = client.run_tool(sid, name, args)
                    assert not result.is_error, result.text

                return run

            rows = [
                (
                    "Grep files_with_matches",
                    _rg(ws, "--files-with-matches", "-e", PATTERN),
                    tool("Grep", {"pattern": PATTERN}),
                    1.2,
                ),
                (
                    "Grep content",
                    _rg(ws, "--line-number", "--sort", "path", "-e", PATTERN),
                    tool("Grep", {"pattern": PATTERN, "output_mode": "content"}),
                    1.2,
                ),
                (
                    "Glob **/*",
                    _rg(ws, "--files", "--no-ignore"),
                    tool("Glob", {"pattern": "**/*"}),
                    1.5,
                ),
            ]
            for name, direct, through, goal in rows:
                base, ours = _paired_ms(direct, through, runs)
                out.append((name, base, ours, goal))
            if small:
                one = tool("Grep", {"pattern": PATTERN, "path": "pkg0/mod0"})
                out.append(("Grep of one small dir", 0.0, _median_ms(one, runs), 0.0))
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=9)
    opts = parser.parse_args()
    print(f"tree: {opts.files} files; median of {opts.runs} runs")
    for name, base, ours, goal in measure(opts.files, opts.runs):
        if not goal:
            print(f"{name:<24} agentd {ours:8.1f} ms")
            continue
        ratio = ours / base
        print(
            f"{name:<24} rg direct {base:8.1f} ms  agentd {ours:8.1f} ms  "
            f"{ratio:5.2f}x  (goal <= {goal}x: {verdict(ratio <= goal)})"
        )


if __name__ == "__main__":
    main()
