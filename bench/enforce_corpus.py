"""Enforced versus unenforced: the read-only part of the bashsec corpus, run both ways.

Every corpus command the classifier calls read-only runs in the sandbox twice without
enforcement (to find commands whose output varies from run to run: dates, pids...) and
once enforced (workspace read-only, no network, git configs cut to inert keys), each
way in its own identical copy of a small git repository. It reports how many commands
behave differently (exit code or output) under enforcement, and why: the enforced
output names the reason (a refused write, no network) or the difference is listed.

    .venv/bin/python bench/enforce_corpus.py
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.security.corpus_runner import Outcome, Runner, make_repo, read_only_commands  # noqa: E402
from tests.security.hostile import snapshot  # noqa: E402

SANDBOX_UID = 65534


def _copy() -> Path:
    ws = Path(tempfile.mkdtemp(prefix="agentd-enf-", dir="/tmp"))
    ws.chmod(0o755)
    make_repo(ws, SANDBOX_UID if os.geteuid() == 0 else None)
    return ws


def _norm(o: Outcome, runner: Runner, ws: Path) -> tuple[int, str]:
    text = o.output.replace(str(ws), "$WS").replace(runner.tmp_dir, "$TMP")
    return o.code, text


def _reason(plain: tuple[int, str], enforced: tuple[int, str]) -> str:
    out = enforced[1]
    if "GIT_CONFIG_COUNT" in out or "core.fsmonitor=false" in out:
        return "shows the read-only run's own git settings (environment, -c overrides)"
    if "Read-only file system" in out:
        return "tried to write in the read-only workspace"
    if any(s in out for s in ("Network is unreachable", "Could not resolve", "Temporary failure")):
        return "no network"
    return "other"


async def main() -> int:
    commands = read_only_commands()
    spaces = [_copy() for _ in range(3)]
    try:
        runs = [
            Runner(spaces[0], read_only=False),
            Runner(spaces[1], read_only=False),
            Runner(spaces[2], read_only=True),
        ]
        before = [snapshot(ws) for ws in spaces]
        started = time.monotonic()
        results = []
        timings = []
        for r in runs:
            t0 = time.monotonic()
            results.append(await r.run_all(commands))
            timings.append(time.monotonic() - t0)
        elapsed = time.monotonic() - started
        after = [snapshot(ws) for ws in spaces]
        a, b, e = (
            [_norm(o, r, ws) for o in res] for res, r, ws in zip(results, runs, spaces, strict=True)
        )
        varying = [i for i in range(len(commands)) if a[i] != b[i]]
        differ = [i for i in range(len(commands)) if i not in varying and a[i] != e[i]]
        reasons = Counter(_reason(a[i], e[i]) for i in differ)
        print(f"{len(commands)} read-only corpus commands, each run 3 times in {elapsed:.1f}s")
        plain_t = min(timings[:2])
        print(
            f"  wall time for the whole set: unenforced {plain_t:.2f}s, enforced "
            f"{timings[2]:.2f}s (ratio {timings[2] / plain_t:.2f})"
        )
        print(f"  output varies between two unenforced runs (not compared): {len(varying)}")
        for i in varying:
            print(f"    {commands[i]!r}")
        print(f"  behave differently enforced: {len(differ)} of {len(commands) - len(varying)}")
        for reason, n in reasons.most_common():
            print(f"    {n} {reason}")
        for i in differ:
            print(f"  - {commands[i]!r} [{_reason(a[i], e[i])}]")
            print(f"      unenforced: exit {a[i][0]}: {a[i][1][:200]!r}")
            print(f"      enforced:   exit {e[i][0]}: {e[i][1][:200]!r}")
        for label, i in (("unenforced", 0), ("enforced", 2)):
            changed = sorted(k for k in before[i].keys() | after[i].keys()
                             if before[i].get(k) != after[i].get(k))  # fmt: skip
            print(f"  workspace paths changed by the {label} run: {len(changed)} {changed[:10]}")
        return 0
    finally:
        for ws in spaces:
            shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
