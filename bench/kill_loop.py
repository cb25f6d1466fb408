"""kill -9 the daemon N times while background tasks print a numbered line every 10 ms.

    .venv/bin/python bench/kill_loop.py [--kills 20] [--tasks 2]

One daemon on one state dir; `--tasks` background tasks each print `<task>-<n>` every
10 ms for the whole run. The daemon is SIGKILLed and started again `--kills` times, at
random moments. Reported: how many running tasks each new daemon took over (goal: all,
every time), lines lost or repeated in each task's output file (goal 0), the time from
starting the daemon to serving (p50/max), and that TaskStop after the last takeover
leaves no process of the tasks.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import percentile, verdict, workspace  # noqa: E402

from agentd_client import Client  # noqa: E402
from tests.support.daemon import start_daemon  # noqa: E402


def _pids_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=2)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="agentd-kill-loop-")) / "d"
    ws = workspace()
    tag = f"kl{random.randrange(10**6)}"
    d = start_daemon(base, keep_tasks=True)
    with Client(d.socket, timeout=60) as c:
        sid = c.create_session(ws, permission_mode="bypassPermissions").id
        ids = []
        for t in range(args.tasks):
            # Runs until stopped: a line every 10 ms (the marker names it in `ps`).
            cmd = f"i=0; while :; do i=$((i+1)); echo {tag}t{t}-$i; sleep 0.01; done"
            r = c.run_tool(sid, "Bash", {"command": cmd, "run_in_background": True})
            assert not r.is_error, r.text
            ids.append(r.data["backgroundTaskId"])
    adopted: list[int] = []
    serving: list[float] = []
    takeover: list[float] = []  # of that, settling the shims' directories (the log says)
    try:
        for _ in range(args.kills):
            time.sleep(random.uniform(0.2, 0.8))
            d.stop(signal.SIGKILL)
            t0 = time.monotonic()
            d = start_daemon(base, keep_tasks=True)
            serving.append(time.monotonic() - t0)
            took = re.search(r"took over \d+ running task\(s\) in ([0-9.]+)s", d.log)
            takeover.append(float(took.group(1)) if took else float("nan"))
            with Client(d.socket, timeout=60) as c:
                running = {t.id for t in c.list_tasks(sid) if t.status == "running"}
                adopted.append(len(running & set(ids)))
        time.sleep(0.3)
        with Client(d.socket, timeout=60) as c:
            readopted_total = c.status().tasks_readopted
            for tid in ids:
                r = c.run_tool(sid, "TaskStop", {"task_id": tid})
                assert not r.is_error, r.text
            tasks = {t.id: t for t in c.list_tasks(sid)}
        deadline = time.monotonic() + 10
        while _pids_with(tag) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = _pids_with(tag)
        lost = repeated = 0
        for t, tid in enumerate(ids):
            text = Path(tasks[tid].output_path).read_text(errors="replace")
            numbers = [int(m) for m in re.findall(rf"^{tag}t{t}-(\d+)$", text, re.M)]
            top = max(numbers, default=0)
            lost += top - len(set(numbers))
            repeated += len(numbers) - len(set(numbers))
    finally:
        d.stop(signal.SIGTERM)
        shutil.rmtree(base.parent, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)
    load = Path("/proc/loadavg").read_text().strip()
    print(f"kills: {args.kills}, tasks: {args.tasks}, load: {load}")
    full = sum(a == args.tasks for a in adopted)
    print(
        f"restarts where every task was taken over: {full}/{args.kills} "
        f"(per restart: {adopted}); agentd_tasks_readopted on the last daemon: "
        f"{readopted_total}"
    )
    print(f"lines lost: {lost}, repeated: {repeated} (over {args.tasks} outputs)")
    print(
        f"start to serving: p50 {percentile(serving, 50) * 1000:.0f} ms, "
        f"max {max(serving) * 1000:.0f} ms (of which taking the tasks over: p50 "
        f"{percentile(takeover, 50) * 1000:.1f} ms, max {max(takeover) * 1000:.1f} ms)"
    )
    print(f"processes of the tasks left after TaskStop: {len(left)}")
    ok = full == args.kills and lost == 0 and repeated == 0 and not left
    print(f"goal: {args.kills}/{args.kills} taken over, 0 lost or repeated: {verdict(ok)}")


if __name__ == "__main__":
    main()
