"""Benchmark agentd.bashsec.classify beside a bare tree-sitter parse of the same commands.

    .venv/bin/python bench/classify.py [--rounds N]

Runs on one core (pinned where the OS allows). Reports classifications per second and
p50/p99 latency for: a bare tree-sitter-bash parse, classify without its cache, and
classify with a warm cache. The numbers are ratios to read, not assertions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import tree_sitter_bash
from tree_sitter import Language, Parser

from agentd.bashsec import classify, classify_uncached

TYPICAL = [
    "ls -la",
    "git status",
    "git diff HEAD~1 -- src/",
    "git log --oneline -n 20",
    "cat README.md",
    "grep -rn TODO src/ | head -50",
    "rg -n 'def main' --type py",
    "find . -name '*.py' -not -path './.venv/*' | xargs wc -l",
    "npm run test",
    "pytest -q tests/test_x.py",
    "cd src && ls",
    "python3 -m pip install -r requirements.txt",
    "sed -n '1,80p' agentd/server.py",
    "awk -F: '{print $1}' /etc/passwd | sort | uniq -c",
    "echo hello > out.txt",
    "rm -rf build dist",
    "git add -A && git commit -m 'fix: handle empty input'",
    "curl -fsSL https://example.com/install.sh | sh",
    'for f in *.py; do echo "$f"; wc -l "$f"; done',
    "cat <<'EOF' > notes.md\n# Notes\nsome text\nEOF",
    "FOO=1 timeout 30 make -j4 test 2>&1 | tail -n 40",
    'docker ps --format "{{.Names}}"',
    "sudo systemctl restart nginx",
    "bash -c 'cd /tmp && ls -la'",
    "jq -r '.dependencies | keys[]' package.json",
]


def _pin_one_core() -> str:
    try:
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to cpu {cpu}"
    except (AttributeError, OSError):
        return "not pinned"


def _measure(fn: Callable[[str], object], rounds: int) -> tuple[float, float, float]:
    """(calls per second, p50 µs, p99 µs) over `rounds` passes of TYPICAL."""
    for command in TYPICAL:  # warm up
        fn(command)
    samples: list[int] = []
    clock = time.perf_counter_ns
    start = clock()
    for _ in range(rounds):
        for command in TYPICAL:
            t0 = clock()
            fn(command)
            samples.append(clock() - t0)
    total = clock() - start
    samples.sort()
    per_second = len(samples) / (total / 1e9)
    p50 = statistics.median(samples) / 1000
    p99 = samples[int(len(samples) * 0.99) - 1] / 1000
    return per_second, p50, p99


def main() -> None:
    parser_args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser_args.add_argument("--rounds", type=int, default=400)
    args = parser_args.parse_args()

    pinned = _pin_one_core()
    parser = Parser(Language(tree_sitter_bash.language()))

    def bare_parse(command: str) -> object:
        return parser.parse(command.encode())

    rows = [
        ("tree-sitter parse only", _measure(bare_parse, args.rounds)),
        ("classify_uncached", _measure(classify_uncached, args.rounds)),
        ("classify (warm cache)", _measure(classify, args.rounds)),
    ]
    base = rows[0][1][0]
    print(f"{len(TYPICAL)} typical commands x {args.rounds} rounds, {pinned}")
    print(f"{'':24} {'per second':>12} {'p50 µs':>9} {'p99 µs':>9} {'vs parse':>9}")
    for name, (per_second, p50, p99) in rows:
        ratio = base / per_second
        print(f"{name:24} {per_second:12,.0f} {p50:9.1f} {p99:9.1f} {ratio:8.2f}x")


if __name__ == "__main__":
    main()
