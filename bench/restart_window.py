"""The restart window as a sandboxed client sees it: a background task connects to its
session's proxy every 50 ms while the daemon is killed (-9) and started again.

    .venv/bin/python bench/restart_window.py [--rounds N]

Each round runs twice on the same machine, interleaved: as agentd runs (the proxy's
listening sockets held across the restart by agentd/foundation/holder.py) and with the
holder killed together with the daemon (the sockets die with it, as before the holder).
Rows: connections refused, and seconds from the kill to the restarted daemon serving;
beside them, a client connecting to the API's socket every 50 ms (its listening socket
is held too, agentd/api/handover.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import tempfile
import time
from pathlib import Path

from _common import workspace

from agentd_client import Client
from tests.support.daemon import start_daemon
from tests.support.knocker import PROXY_LOOP, Knocker, proxy_log
from tests.support.processes import processes_with
from tests.support.waiting import wait_until

Round = tuple[int, int, float, int, int]


def _round(held: bool) -> Round:
    """(refused, connections, seconds from the kill to serving again, API refused, API
    connections)."""
    base = Path(tempfile.mkdtemp(prefix="agentd-bench-"))
    ws = Path(workspace())
    try:
        daemon = start_daemon(base, keep_tasks=True)
        with Client(daemon.socket, timeout=60) as c:
            sid = c.create_session(str(ws), permission_mode="bypassPermissions").id
            c.run_tool(sid, "Bash", {"command": PROXY_LOOP, "run_in_background": True})
        wait_until(lambda: len(proxy_log(ws)) >= 20, 60, "the loop's first connections")
        before = len(proxy_log(ws))
        api = Knocker(daemon.socket, every=0.05)
        killed = time.monotonic()
        daemon.stop(signal.SIGKILL)
        if not held:
            for pid in processes_with(str(base / "state" / "sockets-held")):
                os.kill(pid, signal.SIGKILL)
        again = start_daemon(base)
        window = time.monotonic() - killed
        wait_until(lambda: len(proxy_log(ws)) >= before + 40, 60, "connections after the restart")
        (ws / "stop").touch()
        counts = api.stop()
        again.stop()
        lines = proxy_log(ws)
        return lines.count("refused"), len(lines), window, counts["refused"], sum(counts.values())
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[Round]] = {"held (agentd)": [], "not held": []}
    for _ in range(args.rounds):
        rows["held (agentd)"].append(_round(True))
        rows["not held"].append(_round(False))
    print(f"kill -9 and restart under a sandboxed connection loop, {args.rounds} rounds each:")
    for label, results in rows.items():
        refused = sum(r[0] for r in results)
        total = sum(r[1] for r in results)
        window = statistics.median(r[2] for r in results)
        api_refused = sum(r[3] for r in results)
        api_total = sum(r[4] for r in results)
        print(
            f"  {label:14} refused {refused:5d} of {total:5d} connections; "
            f"kill to serving {window:5.1f} s (median); "
            f"API refused {api_refused:5d} of {api_total:5d}"
        )


if __name__ == "__main__":
    main()
