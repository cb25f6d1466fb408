"""Fairness between sessions: another session's Read latency while 16 clients write
5,000-line files, beside the same Read with the writers idle, in one run.

    .venv/bin/python bench/fairness.py [--seconds S] [--writers N] [--tree DIR]

`--tree DIR` runs another checkout's daemon (e.g. `git archive integrate` unpacked in
DIR) with this venv, for a baseline measured beside this tree's on the same machine.

Each writer is a process of its own with its own session and channel, writing a
5,000-line file again and again (each Write replaces every line, so each one's patch
is a full diff). The reader is another process and session, reading a 20-line file one
call at a time. Rows: the reader's p50/p99 with the writers idle, then under the
writers, and the daemon's own longest event-loop delay (agentd_event_loop_*).
Goal (issue 18): Read p99 under the writers <= 2x the idle p99.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import time

import httpx
from _common import SANDBOX_UID, percentile, verdict, workspace

from tests.support.daemon import start_daemon
from tests.support.ports import free_port

LINES = 5000


def _source(seed: int) -> str:
    rng = random.Random(seed)
    out = []
    for i in range(LINES):
        kind = i % 6
        if kind == 0:
            out.append(f"def handler_{seed}_{i}(request, limit={rng.randint(1, 99)}):\n")
        elif kind in (1, 2):
            out.append(f"    value_{i} = compute(request, {rng.random():.6f})\n")
        elif kind == 3:
            out.append("    if value is None:\n")
        elif kind == 4:
            out.append(f"        return fallback_{rng.randint(0, 9999)}\n")
        else:
            out.append("\n")
    return "".join(out)


def _writer(socket: str, root: str, n: int, stop: mp.Event, count: mp.Value) -> None:  # type: ignore[valid-type]
    from agentd_client import Client

    ws = os.path.join(root, f"w{n}")
    path = os.path.join(ws, "big.py")
    texts = [_source(n * 2), _source(n * 2 + 1)]
    with Client(socket, timeout=600) as c:
        sid = c.create_session(ws, permission_mode="bypassPermissions").id
        c.run_tool(sid, "Read", {"file_path": path, "limit": 1})
        i = 0
        while not stop.is_set():
            i += 1
            r = c.run_tool(sid, "Write", {"file_path": path, "content": texts[i % 2]})
            assert not r.is_error, r.text
            with count.get_lock():
                count.value += 1


def _reader(socket: str, path: str, seconds: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    from agentd_client import Client

    samples = []
    with Client(socket, timeout=600) as c:
        sid = c.create_session(os.path.dirname(path), permission_mode="bypassPermissions").id
        c.run_tool(sid, "Read", {"file_path": path})  # warm
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.perf_counter()
            r = c.run_tool(sid, "Read", {"file_path": path})
            samples.append(time.perf_counter() - t)
            assert not r.is_error
    out.put(samples)


def _read_phase(
    ctx: mp.context.SpawnContext, socket: str, path: str, seconds: float
) -> list[float]:
    out = ctx.Queue()
    p = ctx.Process(target=_reader, args=(socket, path, seconds, out))
    p.start()
    samples = out.get()
    p.join()
    return samples


def _longest_delay(url: str) -> float:
    for line in httpx.get(url, timeout=10).text.splitlines():
        if line.startswith("agentd_event_loop_longest_delay_seconds "):
            return float(line.split()[1])
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--tree", help="run this checkout's daemon instead of this tree's")
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    load_before = os.getloadavg()[0]
    root = workspace()
    for n in range(args.writers):
        ws = os.path.join(root, f"w{n}")
        os.mkdir(ws)
        with open(os.path.join(ws, "big.py"), "w") as f:
            f.write(_source(n * 2 + 1))
    reader_dir = os.path.join(root, "r")
    os.mkdir(reader_dir)
    small = os.path.join(reader_dir, "small.txt")
    with open(small, "w") as f:
        f.writelines(f"line {i}\n" for i in range(20))
    if os.geteuid() == 0:
        for dirpath, _, files in os.walk(root):
            os.chown(dirpath, SANDBOX_UID, SANDBOX_UID)
            for name in files:
                os.chown(os.path.join(dirpath, name), SANDBOX_UID, SANDBOX_UID)
    import tempfile
    from pathlib import Path

    wrapper = None
    if args.tree is not None:
        # The tree's own agentd and agentd_client (which lives in its client/ directory).
        names = Path(tempfile.mkdtemp(prefix="agentd-bench-tree-"))
        (names / "agentd_client").symlink_to(Path(args.tree).resolve() / "client")
        wrapper = ["env", "-C", args.tree, f"PYTHONPATH={Path(args.tree).resolve()}:{names}"]
    port = free_port()
    d = start_daemon(
        Path(tempfile.mkdtemp(prefix="agentd-bench-")),
        extra_args=["--metrics-listen", f"127.0.0.1:{port}"],
        wrapper=wrapper,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        idle = _read_phase(ctx, d.socket, small, args.seconds)
        idle_delay = _longest_delay(url)
        stop, count = ctx.Event(), ctx.Value("i", 0)
        writers = [
            ctx.Process(target=_writer, args=(d.socket, root, n, stop, count))
            for n in range(args.writers)
        ]
        for w in writers:
            w.start()
        while count.value < args.writers:  # every writer has written once: all are going
            if not all(w.is_alive() for w in writers):
                raise SystemExit("a writer failed (its error is above)")
            time.sleep(0.1)
        loaded = _read_phase(ctx, d.socket, small, args.seconds)
        stop.set()
        for w in writers:
            w.join()
        writes = count.value
        loaded_delay = _longest_delay(url)
    finally:
        d.stop()
    p99_idle, p99_load = percentile(idle, 99) * 1000, percentile(loaded, 99) * 1000
    print(
        f"reader, writers idle : {len(idle)} Reads, p50 {percentile(idle, 50) * 1000:.1f} ms, "
        f"p99 {p99_idle:.1f} ms; longest loop delay {idle_delay * 1000:.0f} ms"
    )
    print(
        f"reader, {args.writers} writers   : {len(loaded)} Reads, "
        f"p50 {percentile(loaded, 50) * 1000:.1f} ms, p99 {p99_load:.1f} ms; "
        f"{writes} Writes of {LINES} lines; longest loop delay {loaded_delay * 1000:.0f} ms"
    )
    ratio = p99_load / p99_idle
    load = f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    print(f"daemon from {args.tree or 'this tree'}; load average {load}")
    print(f"p99 under writers / idle p99: {ratio:.2f}x (goal <= 2x: {verdict(ratio <= 2)})")


if __name__ == "__main__":
    main()
