"""32 clients follow one session while a command prints 100 MB: every byte, to every one.

    .venv/bin/python bench/fanout.py [--followers 32] [--mb 100] [--rounds 5] [--local]

Each follower is a process of its own with its own channel on the daemon's socket: it
attaches to the session, and when the call starts reads its output with
ReadOutput(follow) from offset 0 to the end, hashing what it receives. Each round runs
the same Bash command through RunTool with no followers, then with N followers.
Reported per round: the command's wall time (RunTool to result) in each case and their
ratio; that every follower received exactly the command's bytes in order (sha256 of
the stream against the bytes computed here) and how long after the command the last
one was done; the daemon's CPU for the command alone, with followers while it ran, and
until every follower was done (so its cost per GB served); the followers' own CPU.
Then the median ratio (goal: <= 1.2x) and the daemon's RSS before, after and at peak.
The daemon is given a per-output cap above the output size, so nothing is cut.

What the followers model: people following from other machines. Their own work
(receiving, decoding, hashing: about three times the daemon's per byte) happens on
their machines, not on the daemon's; so by default they run here under SCHED_IDLE,
taking only CPU nothing else wants, and what the command competes with is what the
daemon's machine really pays: the daemon serving them and the kernel's socket copies.
`--local` runs them at normal priority instead, as 32 followers on the daemon's own
machine would (on 2 cores they then compete with the command for CPU, whatever the
daemon does). While the command runs the daemon serves live followers within a
bounded rate (agentd/runs/output/serving.py), so they fall behind a 100 MB burst and catch
up once it ends: the time the last one is done after the command is reported.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _common import cpu_seconds, memory_kb, verdict, workspace

from tests.support.daemon import start_daemon

LINE = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n"


def expected(size: int) -> tuple[str, int]:
    whole, part = divmod(size, len(LINE))
    h = hashlib.sha256()
    block = LINE * 1024
    for _ in range(whole // 1024):
        h.update(block)
    h.update(LINE * (whole % 1024))
    h.update(LINE[:part])
    return h.hexdigest(), size


def follower(socket: str, sid: str, after: int, tool_use_id: str, ready, out, remote: bool) -> None:  # type: ignore[no-untyped-def]
    import os

    import grpc

    if remote:
        # Their CPU is not this machine's: they run only when nothing else would.
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))

    from agentd_client import Client

    with Client(socket) as c:
        events = c.attach(sid, after)
        ready.set()
        for e in events:
            if e.HasField("call_started") and e.call_started.tool_use_id == tool_use_id:
                break
        events.cancel()
        h = hashlib.sha256()
        got = 0
        in_order = True
        deadline = time.monotonic() + 10
        while True:
            try:
                for chunk in c.read_output(sid, tool_use_id, 0, follow=True):
                    in_order &= chunk.offset == got
                    h.update(chunk.data)
                    got += len(chunk.data)
                break
            except grpc.RpcError as exc:  # the call has not registered its output yet
                if exc.code() != grpc.StatusCode.NOT_FOUND or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        out.put((h.hexdigest(), got, in_order, time.monotonic(), time.process_time()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--followers", type=int, default=32)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--local",
        action="store_true",
        help="run the followers at normal priority, as if they were on this machine",
    )
    args = parser.parse_args()
    size = args.mb << 20
    command = f"yes {LINE.decode().strip()} | head -c {size}"
    want = expected(size)

    base = Path(tempfile.mkdtemp(prefix="agentd-bench-"))
    (base / "agentd.toml").write_text(f"task_output_bytes = {size * 2}\n")
    ws = workspace()
    d = start_daemon(base, ["--config", str(base / "agentd.toml")])
    try:
        from agentd_client import Client

        pid = d.proc.pid
        with Client(d.socket) as c:
            sid = c.create_session(ws, permission_mode="bypassPermissions").id
            c.run_tool(sid, "Bash", {"command": "true"})  # warm the sandbox
            mem0 = memory_kb(pid)
            ratios: list[float] = []
            ok = True
            for r in range(args.rounds):
                t, cpu = time.monotonic(), cpu_seconds(pid)
                res = c.run_tool(sid, "Bash", {"command": command})
                alone, cpu_alone = time.monotonic() - t, cpu_seconds(pid) - cpu
                assert not res.is_error, res.text[:300]

                ctx = mp.get_context("spawn")
                out = ctx.Queue()
                tool_use_id = f"toolu_fanout_{r}"
                after = c.get_session(sid).last_seq
                readies, procs = [], []
                for _ in range(args.followers):
                    ready = ctx.Event()
                    p = ctx.Process(
                        target=follower,
                        args=(d.socket, sid, after, tool_use_id, ready, out, not args.local),
                    )
                    p.start()
                    procs.append(p)
                    readies.append(ready)
                for ready in readies:
                    ready.wait(60)
                t, cpu = time.monotonic(), cpu_seconds(pid)
                res = c.run_tool(sid, "Bash", {"command": command}, tool_use_id=tool_use_id)
                ended = time.monotonic()
                watched, cpu_watched = ended - t, cpu_seconds(pid) - cpu
                assert not res.is_error, res.text[:300]
                results = [out.get(timeout=600) for _ in procs]
                cpu_all = cpu_seconds(pid) - cpu
                for p in procs:
                    p.join(60)
                good = sum(1 for h, n, order, *_ in results if (h, n) == want and order)
                ok &= good == args.followers
                ratios.append(watched / alone)
                print(
                    f"round {r + 1}: alone {alone:.2f}s, with {args.followers} followers "
                    f"{watched:.2f}s = {ratios[-1]:.2f}x; {good}/{args.followers} got all "
                    f"{size} bytes in order, byte-exact; the last done "
                    f"{max(x[3] for x in results) - ended:.1f}s after the command.\n"
                    f"  daemon CPU: command alone {cpu_alone:.2f}s, with followers "
                    f"{cpu_watched:.2f}s while it ran, {cpu_all:.2f}s until they were done "
                    f"({(cpu_all - cpu_alone) / (args.followers * args.mb / 1024):.2f}s per GB "
                    f"served); followers' own CPU {sum(x[4] for x in results):.1f}s",
                    flush=True,
                )
            mem1 = memory_kb(pid)
        ratio = statistics.median(ratios)
        print(
            f"\ncommand wall time with {args.followers} followers / alone, median of "
            f"{args.rounds} rounds: {ratio:.2f}x (goal <= 1.2x: {verdict(ratio <= 1.2)})"
        )
        print(f"every follower byte-exact: {verdict(ok)}")
        print(
            f"daemon RSS {mem0['VmRSS'] / 1024:.0f} MB -> {mem1['VmRSS'] / 1024:.0f} MB "
            f"(growth {(mem1['VmRSS'] - mem0['VmRSS']) / 1024:.0f} MB), "
            f"peak {mem1['VmHWM'] / 1024:.0f} MB"
        )
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    main()
