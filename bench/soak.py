"""Soak: a mixed load from many clients for minutes; does latency drift?

    .venv/bin/python bench/soak.py [--minutes M] [--clients N]

Each client is a process with its own session and channel, looping over Read of a
small file, Write of a 500-line file, Edit of it, Bash `echo`, Glob. Rows: p50 and p99
of all calls in the first minute and in the last minute, and their ratio. Goal (issue
18): last-minute p50 <= 1.5x first-minute p50 (it drifted from 0.48 s to 10.9 s when
Writes' patches ran on the event loop).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

from _common import SANDBOX_UID, daemon, percentile, verdict, workspace


def _all_running(samples: list[tuple[float, float, int]], clients: int) -> float:
    """When the last client made its first call."""
    firsts: dict[int, float] = {}
    for t, _, who in samples:
        firsts[who] = min(t, firsts.get(who, t))
    return max(firsts.values()) if len(firsts) == clients else samples[0][0]


def _client(socket: str, ws: str, until: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    from agentd_client import Client

    small = os.path.join(ws, "small.txt")
    big = os.path.join(ws, "big.py")
    samples: list[tuple[float, float, int]] = []
    with Client(socket, timeout=600) as c:
        sid = c.create_session(ws, permission_mode="bypassPermissions").id
        c.run_tool(sid, "Read", {"file_path": big})
        n = 0
        calls = [
            ("Read", lambda: {"file_path": small}),
            (
                "Write",
                lambda: {
                    "file_path": big,
                    "content": "".join(f"line {i} of round {n}\n" for i in range(500)),
                },
            ),
            (
                "Edit",
                lambda: {
                    "file_path": big,
                    "old_string": f"line 7 of round {n}\n",
                    "new_string": f"line 7 edited in round {n}\n",
                },
            ),
            ("Bash", lambda: {"command": "echo hi"}),
            ("Glob", lambda: {"pattern": "*.py"}),
        ]
        while time.time() < until:
            n += 1
            for name, args in calls:
                t = time.perf_counter()
                c.run_tool(sid, name, args())
                samples.append((time.time(), time.perf_counter() - t, os.getpid()))
    out.put(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--clients", type=int, default=48)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    root = workspace()
    dirs = []
    for n in range(args.clients):
        ws = os.path.join(root, f"c{n}")
        os.mkdir(ws)
        for name, text in (("small.txt", "x\n" * 20), ("big.py", "line\n" * 500)):
            with open(os.path.join(ws, name), "w") as f:
                f.write(text)
            if os.geteuid() == 0:
                os.chown(os.path.join(ws, name), SANDBOX_UID, SANDBOX_UID)
        if os.geteuid() == 0:
            os.chown(ws, SANDBOX_UID, SANDBOX_UID)
        dirs.append(ws)
    with daemon() as d:
        start = time.time()
        until = start + args.minutes * 60
        out = ctx.Queue()
        procs = [ctx.Process(target=_client, args=(d.socket, ws, until, out)) for ws in dirs]
        for p in procs:
            p.start()
        samples = [s for _ in procs for s in out.get()]
        for p in procs:
            p.join()
    end = max(t for t, _, _ in samples)
    # The first minute starts once every client runs (spawning 48 takes a while, and a
    # half-loaded minute would flatter it).
    start = min(t for t, _, _ in samples)
    start = max(start, _all_running(samples, len(procs)))
    first = [dt for t, dt, _ in samples if start <= t < start + 60]
    last = [dt for t, dt, _ in samples if t >= end - 60]
    for name, rows in (("first minute", first), ("last minute", last)):
        print(
            f"{name}: {len(rows)} calls, p50 {percentile(rows, 50) * 1000:.0f} ms, "
            f"p99 {percentile(rows, 99) * 1000:.0f} ms"
        )
    ratio = percentile(last, 50) / percentile(first, 50)
    print(f"last / first minute p50: {ratio:.2f}x (goal <= 1.5x: {verdict(ratio <= 1.5)})")


if __name__ == "__main__":
    main()
