"""Silent attached clients against a large journal: the daemon's memory and others' stalls.

    .venv/bin/python bench/attach_memory.py [--mb 400] [--clients 8]

A session's journal is filled with MB megabytes of events (written straight into the
daemon's SQLite while it is stopped, then the daemon is started on it). Then CLIENTS
processes attach from the start and never read. Meanwhile another client makes calls
(GetStatus and a Glob tool call, back to back); reported: the daemon's RSS growth
(goal: under 50 MB in all), and the worst and p99 latency of those calls while the
silent clients sit there, beside the same calls before they attached (goal: worst
stall under 50 ms). Then the silent clients read it all: each must get every event.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from _common import cpu_seconds, memory_kb, percentile, verdict, workspace

from tests.support.daemon import start_daemon

PAYLOAD = 100_000


def silent(socket: str, sid: str, ready, go, out) -> None:  # type: ignore[no-untyped-def]
    from agentd_client import Client

    with Client(socket) as c:
        stream = c.attach(sid, 0)
        first = next(stream)  # the stream is open; now stop reading
        ready.set()
        go.wait(600)
        n, last = 1, first.seq
        for e in stream:
            n += 1
            last = e.seq
            if e.seq >= out_target(e):
                break
        out.put((n, last))
        stream.cancel()


def out_target(e) -> int:  # type: ignore[no-untyped-def]
    return e.seq if e.HasField("session_closed") else 1 << 62


def latencies(c, sid: str, seconds: float) -> tuple[list[float], list[float]]:  # type: ignore[no-untyped-def]
    """Seconds each GetStatus and each Glob call took, back to back for `seconds`."""
    status: list[float] = []
    glob: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.monotonic()
        c.status()
        status.append(time.monotonic() - t)
        t = time.monotonic()
        c.run_tool(sid, "Glob", {"pattern": "*"})
        glob.append(time.monotonic() - t)
    return status, glob


def row(name: str, samples: tuple[list[float], list[float]]) -> str:
    status, glob = samples
    return (
        f"{name}: GetStatus p99 {percentile(status, 99) * 1000:.1f} ms, worst "
        f"{max(status) * 1000:.1f} ms; Glob p99 {percentile(glob, 99) * 1000:.1f} ms, worst "
        f"{max(glob) * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=400)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="agentd-bench-"))
    ws = workspace()
    from agentd_client import Client

    d = start_daemon(base)
    with Client(d.socket) as c:
        sid = c.create_session(ws, permission_mode="bypassPermissions").id
    d.stop()
    db_path = str(next(Path(d.state_dir).rglob("*.db")))
    rows = (args.mb << 20) // PAYLOAD
    db = sqlite3.connect(db_path)
    (start,) = db.execute(
        "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?", (sid,)
    ).fetchone()
    blob = "x" * PAYLOAD
    now = int(time.time() * 1000)
    with db:
        db.executemany(
            "INSERT INTO events (session_id, seq, time_ms, kind, payload) VALUES (?, ?, ?, ?, ?)",
            (
                (
                    sid,
                    start + i + 1,
                    now,
                    "todos_changed",
                    json.dumps({"todos": [{"content": f"{i} {blob}", "status": "pending"}]}),
                )
                for i in range(rows)
            ),
        )
    db.close()
    print(f"journal: {rows} events, {rows * PAYLOAD >> 20} MB", flush=True)

    d = start_daemon(base)
    try:
        pid = d.proc.pid
        with Client(d.socket) as c:
            c.run_tool(sid, "Glob", {"pattern": "*"})
            cpu0 = cpu_seconds(pid)
            before = latencies(c, sid, 3)
            cpu_before = cpu_seconds(pid) - cpu0
            mem0 = memory_kb(pid)
            ctx = mp.get_context("spawn")
            out = ctx.Queue()
            go = ctx.Event()
            readies, procs = [], []
            for _ in range(args.clients):
                ready = ctx.Event()
                p = ctx.Process(target=silent, args=(d.socket, sid, ready, go, out))
                p.start()
                procs.append(p)
                readies.append(ready)
            for r in readies:
                r.wait(120)
            cpu0 = cpu_seconds(pid)
            during = latencies(c, sid, 5)
            cpu_during = cpu_seconds(pid) - cpu0
            settled = latencies(c, sid, 5)  # once their transports' windows are full
            mem1 = memory_kb(pid)
            c.close_session(sid)
            go.set()
            got = [out.get(timeout=600) for _ in procs]
            for p in procs:
                p.join(60)
            mem2 = memory_kb(pid)
        growth = (mem1["VmRSS"] - mem0["VmRSS"]) / 1024
        worst = max(max(during[0]), max(during[1])) * 1000
        # A stall is what the silent clients add: beyond the same call's worst before.
        stall = max(max(d) - max(b) for d, b in zip(during, before, strict=True)) * 1000
        print(row("calls before", before))
        print(row(f"calls with {args.clients} silent clients", during))
        print(
            f"  worst {worst:.1f} ms; stall beyond the same call's worst before "
            f"{max(stall, 0):.1f} ms (goal < 50 ms: {verdict(stall < 50)})"
        )
        print(row("the next 5 s", settled))
        print(
            f"daemon RSS {mem0['VmRSS'] / 1024:.0f} MB -> {mem1['VmRSS'] / 1024:.0f} MB with "
            f"them attached (growth {growth:.0f} MB, goal < 50 MB: {verdict(growth < 50)}); "
            f"peak {mem2['VmHWM'] / 1024:.0f} MB, after they read it all "
            f"{mem2['VmRSS'] / 1024:.0f} MB"
        )
        print(
            f"daemon CPU: {cpu_before / 3:.2f} s/s before, {cpu_during / 5:.2f} s/s while the "
            "silent clients' transports filled"
        )
        print(f"events each silent client got once it read: {sorted(n for n, _ in got)}")
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    main()
