"""Round trip of a small-file Read through the daemon, beside the same Read in-process.

    .venv/bin/python bench/read_rtt.py [--quick] [--against TREE [--rounds N]]

Rows, all measured in this run on the same file:
- the Read tool called directly (its own cost),
- the same call through `Executor.run_one` in-process with a real Store (the daemon's
  share: validation, permissions, journal, session save),
- a unary GetStatus over the socket (the gRPC floor),
- Client.run_tool(Read) (the unary CallTool RPC) from this process to a daemon process,
  one call at a time, and the same call through the streaming RunTool RPC,
then calls/s with 16 client processes, each with its own channel.
Goals: p50 <= 1.3x GetStatus's; with 16 clients >= 80 % of GetStatus's calls/s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from _common import DaemonProcess, cpu_seconds, daemon, percentile, verdict, workspace

CLIENTS = 16
# The goals, ratios to an empty GetStatus on the same channel in the same run.
P50_GOAL = 1.3
SHARE_GOAL = 0.8


def _small_file(ws: str) -> str:
    path = os.path.join(ws, "small.py")
    with open(path, "w") as f:
        f.writelines(f"line {i}: some ordinary source text\n" for i in range(40))
    return path


def _time_calls(fn: Callable[[], Any], warm: int, n: int) -> list[float]:
    """Milliseconds per call of `fn`, after `warm` untimed calls."""
    for _ in range(warm):
        fn()
    samples = []
    clock = time.perf_counter
    for _ in range(n):
        t0 = clock()
        fn()
        samples.append((clock() - t0) * 1000)
    return samples


async def _time_async(fn: Callable[[], Any], warm: int, n: int) -> list[float]:
    for _ in range(warm):
        await fn()
    samples = []
    clock = time.perf_counter
    for _ in range(n):
        t0 = clock()
        await fn()
        samples.append((clock() - t0) * 1000)
    return samples


def _in_process(ws: str, path: str, warm: int, n: int) -> dict[str, list[float]]:
    """The Read tool alone, then through Executor.run_one with a real Store."""
    from agentd.calls.executor import ToolUse
    from agentd.daemon import Daemon
    from agentd.foundation.config import Config
    from agentd.sessions.session import Session
    from agentd.tools import default_registry
    from agentd.tools.base import ToolContext

    state = tempfile.mkdtemp(prefix="agentd-bench-state-")

    async def nothing(*_: Any, **__: Any) -> None:
        return None

    async def run() -> dict[str, list[float]]:
        tool = default_registry().get("Read")
        assert tool is not None
        config = Config(
            socket_path=os.path.join(state, "run", "agentd.sock"),
            state_dir=os.path.join(state, "daemon"),
        )
        d = Daemon(config)
        session = Session(id="s-bench", workspace_roots=[ws], cwd=ws, home=state)
        # The daemon's own Services: the tool alone does the file work the daemon does.
        ctx = ToolContext(
            session=session,
            tool_use_id="toolu_1",
            state_dir=state,
            progress=nothing,
            services=d.services,
        )

        async def direct() -> None:
            result = await tool.call({"file_path": path}, ctx)
            assert not result.is_error, result

        s = d.sessions.create([ws], permission_mode="bypassPermissions")

        async def executor() -> None:
            use = ToolUse("toolu_x", "Read", {"file_path": path})
            result = await d.executor.run_one(s, use, nothing)
            assert not result.is_error, result

        rows = {
            "Read tool, in-process": await _time_async(direct, warm, n),
            "Executor.run_one, in-process": await _time_async(executor, warm, n),
        }
        d.store.close()
        return rows

    try:
        return asyncio.run(run())
    finally:
        shutil.rmtree(state, ignore_errors=True)


def _client_worker(
    socket: str, session_id: str, path: str, n: int, barrier: Any, out: Any, floor: bool
) -> None:
    from agentd_client import Client

    with Client(socket) as c:

        def one() -> None:
            if floor:
                c.status()
            else:
                r = c.run_tool(session_id, "Read", {"file_path": path})
                assert not r.is_error, r.text

        for _ in range(20):
            one()
        barrier.wait()
        t0 = time.perf_counter()
        for _ in range(n):
            one()
        out.put((t0, time.perf_counter()))


def _throughput(
    socket: str, session_id: str, path: str, per_client: int, floor: bool = False
) -> float:
    """Calls/s of CLIENTS processes each making `per_client` Reads (or, for the floor,
    GetStatus calls) on its own channel."""
    ctx = mp.get_context("spawn")  # no gRPC state crosses a fork
    barrier = ctx.Barrier(CLIENTS)
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=_client_worker,
            args=(socket, session_id, path, per_client, barrier, out, floor),
        )
        for _ in range(CLIENTS)
    ]
    for p in procs:
        p.start()
    spans = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
        assert p.exitcode == 0, f"client exited {p.exitcode}"
    start = min(s for s, _ in spans)
    end = max(e for _, e in spans)
    return CLIENTS * per_client / (end - start)


def _over_socket(
    d: DaemonProcess, ws: str, path: str, n: int, warm: int, per_client: int, streaming: bool = True
) -> dict[str, Any]:
    """The rows measured against one running daemon: p50 samples, throughputs, daemon CPU."""
    from agentd_client import Client

    rows: dict[str, list[float]] = {}
    with Client(d.socket) as c:
        session = c.create_session(ws, permission_mode="bypassPermissions")
        cpu0 = cpu_seconds(d.proc.pid)
        rows["GetStatus over gRPC (floor)"] = _time_calls(c.status, warm, n)
        cpu_status = (cpu_seconds(d.proc.pid) - cpu0) / (warm + n) * 1000

        def read() -> None:
            r = c.run_tool(session.id, "Read", {"file_path": path})
            assert not r.is_error, r.text

        def read_streaming() -> None:
            for update in c.stream_tool(session.id, "Read", {"file_path": path}):
                if update.HasField("result"):
                    assert not update.result.is_error

        if streaming:
            rows["RunTool(Read), streaming"] = _time_calls(read_streaming, warm, n)
        cpu0 = cpu_seconds(d.proc.pid)
        rows["run_tool(Read) over gRPC"] = _time_calls(read, warm, n)
        cpu_per_call = (cpu_seconds(d.proc.pid) - cpu0) / (warm + n) * 1000
        cpu0 = cpu_seconds(d.proc.pid)
        per_second = _throughput(d.socket, session.id, path, per_client)
        cpu_loaded = (cpu_seconds(d.proc.pid) - cpu0) / (CLIENTS * (per_client + 20)) * 1000
        floor_per_second = _throughput(d.socket, session.id, path, per_client, floor=True)
    return {
        "rows": rows,
        "per_second": per_second,
        "floor_per_second": floor_per_second,
        "cpu_per_call": cpu_per_call,
        "cpu_loaded": cpu_loaded,
        "cpu_status": cpu_status,
    }


def measure(n: int, warm: int, per_client: int) -> dict[str, Any]:
    """Per-call samples (ms) of each row, and the 16-client throughputs (calls/s)."""
    ws = workspace()
    try:
        path = _small_file(ws)
        rows = _in_process(ws, path, warm, n)
        with daemon() as d:
            m = _over_socket(d, ws, path, n, warm, per_client)
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    m["rows"] = {**rows, **m["rows"]}
    return m


def compare(tree: str, n: int, warm: int, per_client: int, rounds: int) -> None:
    """This tree's daemon and `tree`'s (another checkout, e.g. main's), both running, each
    measured in turn `rounds` times: the two issue rows and the daemon CPU per call."""
    ws = workspace()
    trees = {"this tree": None, tree: tree}
    got: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    try:
        path = _small_file(ws)
        with contextlib.ExitStack() as stack:
            daemons = {
                name: stack.enter_context(
                    daemon(wrapper=None if t is None else ["env", "-C", t, f"PYTHONPATH={t}"])
                )
                for name, t in trees.items()
            }
            for _ in range(rounds):
                for name, d in daemons.items():
                    got[name].append(_over_socket(d, ws, path, n, warm, per_client, False))
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    print(f"{rounds} rounds, each tree in turn: {n} calls after {warm} warm-up per row, "
          f"{CLIENTS} clients x {per_client} calls; medians over the rounds")  # fmt: skip
    print(f"{'':24} {'status p50':>10} {'Read p50':>9} {'ratio':>6} {'Read/s':>7} "
          f"{'status/s':>8} {'share':>6} {'cpu/Read':>8} {'cpu/status':>10}")  # fmt: skip
    for name, ms in got.items():
        status = [percentile(m["rows"]["GetStatus over gRPC (floor)"], 50) for m in ms]
        read = [percentile(m["rows"]["run_tool(Read) over gRPC"], 50) for m in ms]
        ratio = [r / s for r, s in zip(read, status, strict=True)]
        share = [m["per_second"] / m["floor_per_second"] for m in ms]
        print(
            f"{name[-24:]:24} {statistics.median(status):10.3f} {statistics.median(read):9.3f} "
            f"{statistics.median(ratio):5.2f}x "
            f"{statistics.median(m['per_second'] for m in ms):7,.0f} "
            f"{statistics.median(m['floor_per_second'] for m in ms):8,.0f} "
            f"{statistics.median(share):6.0%} "
            f"{statistics.median(m['cpu_per_call'] for m in ms):8.3f} "
            f"{statistics.median(m['cpu_status'] for m in ms):10.3f}"
        )
    print(f"goals: ratio <= {P50_GOAL}x, share >= {SHARE_GOAL:.0%}; load {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run")
    parser.add_argument(
        "--against",
        metavar="TREE",
        help="also run the daemon of another checkout (say `git archive main | tar -x -C "
        "DIR`), and compare the two in the same run",
    )
    parser.add_argument("--rounds", type=int, default=3, help="with --against: turns each")
    args = parser.parse_args()
    n, warm, per_client = (300, 50, 60) if args.quick else (2000, 200, 250)
    if args.against:
        compare(os.path.abspath(args.against), n, warm, per_client, args.rounds)
        return
    m = measure(n, warm, per_client)
    rows, per_second, floor_per_second = m["rows"], m["per_second"], m["floor_per_second"]
    cpu_per_call, cpu_loaded = m["cpu_per_call"], m["cpu_loaded"]

    print(f"small-file Read, {n} calls after {warm} warm-up, {os.cpu_count()} cpus")
    print(f"{'':32} {'p50 ms':>8} {'p99 ms':>8} {'calls/s':>9}")
    for name, ms in rows.items():
        print(
            f"{name:32} {percentile(ms, 50):8.3f} {percentile(ms, 99):8.3f} "
            f"{1000 / (sum(ms) / len(ms)):9,.0f}"
        )
    rtt = rows["run_tool(Read) over gRPC"]
    floor = percentile(rows["GetStatus over gRPC (floor)"], 50)
    inproc = percentile(rows["Executor.run_one, in-process"], 50)
    p50 = percentile(rtt, 50)
    print(
        f"run_tool p50 = {p50 / floor:.2f}x the GetStatus floor; "
        f"executor share {inproc / p50:.0%} of it"
    )
    print(
        f"{CLIENTS} client processes x {per_client} calls: run_tool(Read) {per_second:,.0f} "
        f"calls/s; GetStatus (the floor) {floor_per_second:,.0f} calls/s "
        f"({per_second / floor_per_second:.0%} of the floor)"
    )
    print(
        f"daemon CPU per run_tool(Read): {cpu_per_call:.2f} ms one at a time, "
        f"{cpu_loaded:.2f} ms under {CLIENTS} clients (ceiling ~{1000 / cpu_loaded:,.0f} calls/s "
        "on one core)"
    )
    print(
        f"goals: p50 <= {P50_GOAL}x GetStatus's: {verdict(p50 / floor <= P50_GOAL)} "
        f"({p50 / floor:.2f}x); {CLIENTS} clients >= {SHARE_GOAL:.0%} of GetStatus's calls/s: "
        f"{verdict(per_second / floor_per_second >= SHARE_GOAL)} "
        f"({per_second / floor_per_second:.0%})"
    )


if __name__ == "__main__":
    main()
