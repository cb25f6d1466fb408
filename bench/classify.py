"""Benchmark agentd.bashsec.classify beside a bare tree-sitter parse of the same commands.

    .venv/bin/python bench/classify.py [--rounds N]

Runs on one core (pinned where the OS allows). Reports classifications per second and
p50/p99 latency for: a bare tree-sitter-bash parse, classify without its cache, and
classify with a warm cache. Then, for every command of the typical set and of the test
corpus, the parse and the uncached classification are timed side by side (best of
--reps, interleaved, so load on the machine hits both alike): the p50 of the per-command
ratios and the ratio of the totals. The numbers are ratios to read, not assertions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

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
    "sed -n '1,80p' agentd/api/server.py",
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


CORPUS = Path(__file__).resolve().parent.parent / "tests" / "bashsec" / "corpus.toml"


def _corpus() -> list[str]:
    cases = tomllib.loads(CORPUS.read_text("utf-8"))["case"]
    return [c["command"] for c in cases if "command" in c and len(c["command"]) < 5000]


def _best(fn: Callable[[str], object], command: str, reps: int) -> int:
    clock = time.perf_counter_ns
    best = 1 << 62
    for _ in range(reps):
        t0 = clock()
        fn(command)
        best = min(best, clock() - t0)
    return best


def _side_by_side(
    parse: Callable[[str], object], commands: list[str], reps: int
) -> tuple[float, float, int]:
    """(p50 of per-command classify/parse ratios, ratio of totals, commands)."""
    ratios: list[float] = []
    total_parse = total_classify = 0
    for command in commands:
        p = c = 1 << 62
        for _ in range(reps):  # interleaved: the same load hits both
            p = min(p, _best(parse, command, 1))
            c = min(c, _best(classify_uncached, command, 1))
        ratios.append(c / max(p, 1))
        total_parse += p
        total_classify += c
    return statistics.median(ratios), total_classify / total_parse, len(commands)


def main() -> None:
    parser_args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser_args.add_argument("--rounds", type=int, default=400)
    parser_args.add_argument("--reps", type=int, default=15)
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
    print()
    print("classify_uncached / tree-sitter parse, per command, side by side (budget: 3x)")
    for label, commands in (("typical", TYPICAL), ("corpus", _corpus())):
        p50, total, count = _side_by_side(bare_parse, commands, args.reps)
        print(f"{label:10} {count:5} commands   p50 {p50:5.2f}x   total {total:5.2f}x")


if __name__ == "__main__":
    main()
