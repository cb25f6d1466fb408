"""What review mode costs: the same Bash call changing 3 files in a session of one
daemon with review mode and in one without, on two equal workspaces, interleaved in one
run; then applying a pending 3-file change set (ResolvePendingChanges) beside it.

    .venv/bin/python bench/review.py [--files N] [--rounds N]

Rows (p50 and p90, ms): the call without review mode, with it (an overlay mounted,
the upper read and stored, the overlay removed), the difference; the apply.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from _common import percentile, workspace
from checkpoints import make_tree, row, timed

from agentd_client import Client
from tests.support.daemon import start_daemon


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="agentd-bench-review-"))
    ws_plain, ws_review = workspace(), workspace()
    daemon = None
    try:
        for ws in (ws_plain, ws_review):
            make_tree(ws, args.files)
        daemon = start_daemon(base / "d")
        c = Client(daemon.socket, timeout=300)
        plain = c.create_session(ws_plain, permission_mode="bypassPermissions").id
        review = c.create_session(ws_review, permission_mode="bypassPermissions", review=True).id
        samples: dict[str, list[float]] = {"without review": [], "with review": [], "apply": []}
        for i in range(args.rounds):
            three = f"for f in d0/s0/f1.txt d0/s1/f2.txt d1/s2/f3.txt; do echo {i} >> $f; done"
            for key, sid in (("without review", plain), ("with review", review)):
                samples[key].append(
                    timed(lambda s=sid, t=three: c.run_tool(s, "Bash", {"command": t}))
                )
            pending = c.list_pending_changes(review, fmt="names").id
            samples["apply"].append(
                timed(lambda p=pending: c.resolve_pending_changes(review, p, "apply"))
            )
        for key, values in samples.items():
            print(row(f"3 files changed, {key}" if key != "apply" else "apply 3 files", values))
        a = percentile(samples["with review"], 50)
        b = percentile(samples["without review"], 50)
        print(f"{'  review mode per 3-file call':44} p50 {a - b:+8.1f} ms ({a / b:.2f}x)")
    finally:
        if daemon is not None:
            daemon.stop()
        for path in (ws_plain, ws_review, str(base)):
            shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
