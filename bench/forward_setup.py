"""Opening forwarded connections: agentctl forward against `ssh -L` and a direct
connection, in one run (imported by port_forward.py).

A cheap endpoint (ECHO: one asyncio loop echoing what it reads) runs twice: in a
session's sandbox as a background task, reached directly from inside the session's
network namespace and through `agentctl forward`; and on this machine's loopback,
reached through `ssh -N -L` to a throwaway Debian sshd on loopback. Each connection is
opened, sends one byte, reads its echo and closes:
  - set-up: connections one after another, rounds interleaved (direct, agentd, ssh),
    p50 and p90 per path, and the spread of the rounds' p50s;
  - CPU per connection over the set-up phase: the daemon + agentctl, and sshd (its
    processes) + ssh;
  - parallel: 50 threads opening connections for a few seconds: connections per second,
    forwarded and ssh -L against direct;
  - bulk: 50 connections at once, each pulling --bulk-mb MB from the endpoint (zeros
    written from one buffer, read into one and dropped: the endpoints cost little, so
    what is measured is the path), MB/s against direct.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from _common import cpu_seconds, percentile
from _sshd import Sshd, ssh_forward

from agentd.network import netns

ECHO = r"""
import asyncio, struct, sys
ZEROS = memoryview(bytes(1 << 20))
async def echo(reader, writer):
    try:
        data = await reader.read(65536)
        if data[:1] == b"S":  # a source: "S" + size, answered with size zero bytes
            data += await reader.readexactly(9 - len(data))
            left = struct.unpack(">Q", data[1:9])[0]
            while left:
                n = min(left, len(ZEROS))
                writer.write(ZEROS[:n])
                await writer.drain()
                left -= n
            data = b""
        while data:
            writer.write(data)
            await writer.drain()
            data = await reader.read(65536)
    except (OSError, asyncio.IncompleteReadError):
        pass
    writer.close()
async def main():
    server = await asyncio.start_server(echo, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    print("listening", flush=True)
    await server.serve_forever()
asyncio.run(main())
"""

Dial = Callable[[], socket.socket]


def tree_cpu(pid: int) -> float:
    """CPU seconds of `pid` and every process under it (sshd forks one per session)."""
    total = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            total += cpu_seconds(p)
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(x) for x in f.read().split()]
        except OSError:
            continue
    return total


class Refused(Exception):
    """The connection was closed before its echo (a cap reached)."""


def one(dial: Dial) -> float:
    """Milliseconds to open a connection, send a byte and read its echo."""
    start = time.perf_counter()
    sock = dial()
    try:
        sock.sendall(b"x")
        if sock.recv(1) != b"x":
            raise Refused
    except ConnectionResetError:
        raise Refused from None
    finally:
        sock.close()
    return 1000 * (time.perf_counter() - start)


def pull(dial: Dial, size: int) -> int:
    """`size` bytes from the endpoint's source, read and dropped; the bytes read."""
    sock = dial()
    buf = bytearray(1 << 20)
    got = 0
    with sock:
        sock.sendall(b"S" + struct.pack(">Q", size))
        while n := sock.recv_into(buf):
            got += n
    return got


def bulk(dial: Dial, threads: int, size: int, join: str | None = None) -> tuple[float, bool]:
    """MB/s of `threads` connections at once, each pulling `size` bytes; all exact?"""
    got = [0] * threads

    def run(i: int) -> None:
        if join is not None:
            netns.join(join)
        got[i] = pull(dial, size)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(got) / (time.perf_counter() - start) / 1e6, all(g == size for g in got)


def loopback(port: int) -> Dial:
    return lambda: socket.create_connection(("127.0.0.1", port), 30)


def parallel(
    dial: Dial, threads: int, seconds: float, join: str | None = None
) -> tuple[float, int]:
    """Connections per second of `threads` threads opening connections for `seconds`
    (each thread first joins the namespace at `join`, when given: the direct path), and
    how many were refused (a cap: the connections still closing count against it)."""
    counts = [0] * threads
    refused = [0] * threads
    errors: list[BaseException] = []
    stop = time.perf_counter() + seconds

    def run(i: int) -> None:
        try:
            if join is not None:
                netns.join(join)
            while time.perf_counter() < stop:
                try:
                    one(dial)
                    counts[i] += 1
                except Refused:
                    refused[i] += 1
        except BaseException as exc:  # counted below
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return sum(counts) / (time.perf_counter() - start), sum(refused)


def in_namespace(path: str, dial: Dial, n: int) -> list[float]:
    """`n` set-ups by a thread that joined the session's namespace (the direct path:
    what a process in the sandbox gets)."""

    def run() -> list[float]:
        netns.join(path)
        return [one(dial) for _ in range(n)]

    return netns.in_thread(run)


def measure(
    ws: str,
    path: str,
    sandbox_port: int,
    forward_port: int,
    daemon_pid: int,
    agentctl_pid: int,
    server: Sshd,
    rounds: int,
    per_round: int,
    threads: int,
    seconds: float,
    bulk_mb: int,
) -> dict[str, object]:
    host_port = _free_port()
    Path(ws, "echo_host.py").write_text(ECHO)
    echo = subprocess.Popen(
        [sys.executable, str(Path(ws, "echo_host.py")), str(host_port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert echo.stdout is not None and echo.stdout.readline().strip() == "listening"
    try:
        with ssh_forward(server, host_port) as (ssh_port, ssh_proc):
            paths: dict[str, Dial] = {
                "direct": loopback(sandbox_port),
                "agentd": loopback(forward_port),
                "ssh": loopback(ssh_port),
            }

            def batch(name: str, n: int) -> list[float]:
                if name == "direct":
                    return in_namespace(path, paths[name], n)
                return [one(paths[name]) for _ in range(n)]

            for name in paths:  # warm: first connections, imports, caches
                batch(name, 20)
            samples: dict[str, list[float]] = {k: [] for k in paths}
            p50s: dict[str, list[float]] = {k: [] for k in paths}
            cpu: dict[str, float] = {"daemon": 0.0, "agentctl": 0.0, "sshd": 0.0, "ssh": 0.0}
            meters: dict[str, dict[str, Callable[[], float]]] = {
                "agentd": {
                    "daemon": lambda: cpu_seconds(daemon_pid),
                    "agentctl": lambda: cpu_seconds(agentctl_pid),
                },
                "ssh": {
                    "sshd": lambda: tree_cpu(server.proc.pid),
                    "ssh": lambda: cpu_seconds(ssh_proc.pid),
                },
            }
            for _ in range(rounds):
                for name in paths:
                    meter = meters.get(name, {})
                    before = {k: m() for k, m in meter.items()}
                    got = batch(name, per_round)
                    for k, m in meter.items():
                        cpu[k] += m() - before[k]
                    samples[name] += got
                    p50s[name].append(percentile(got, 50))
            rates = {
                "direct": parallel(paths["direct"], threads, seconds, join=path),
                "agentd": parallel(paths["agentd"], threads, seconds),
                "ssh": parallel(paths["ssh"], threads, seconds),
            }
            size = bulk_mb * 1_000_000
            flows = {
                "direct": bulk(paths["direct"], threads, size, join=path),
                "agentd": bulk(paths["agentd"], threads, size),
                "ssh": bulk(paths["ssh"], threads, size),
            }
    finally:
        echo.terminate()
        echo.wait(10)
    n = rounds * per_round
    out: dict[str, object] = {"connections_per_path": n, "parallel_threads": threads}
    for name, got in samples.items():
        out[f"setup_{name}_p50_ms"] = round(percentile(got, 50), 3)
        out[f"setup_{name}_p90_ms"] = round(percentile(got, 90), 3)
        out[f"setup_{name}_round_p50s_ms"] = [round(x, 3) for x in p50s[name]]
    out["setup_agentd_vs_ssh"] = round(
        percentile(samples["agentd"], 50) / percentile(samples["ssh"], 50), 2
    )
    out["cpu_ms_per_conn_agentd"] = round(1000 * (cpu["daemon"] + cpu["agentctl"]) / n, 3)
    out["cpu_ms_per_conn_ssh"] = round(1000 * (cpu["sshd"] + cpu["ssh"]) / n, 3)
    for k, seconds_used in cpu.items():
        out[f"cpu_ms_per_conn_{k}_alone"] = round(1000 * seconds_used / n, 3)
    for name, (rate, refused) in rates.items():
        out[f"parallel_{name}_conn_per_s"] = round(rate)
        out[f"parallel_{name}_refused"] = refused
    out["parallel_agentd_vs_direct"] = round(rates["agentd"][0] / rates["direct"][0], 3)
    out["parallel_ssh_vs_direct"] = round(rates["ssh"][0] / rates["direct"][0], 3)
    for name, (mbps, exact) in flows.items():
        out[f"bulk_{name}_MBps"] = round(mbps)
        out[f"bulk_{name}_exact"] = exact
    out["bulk_agentd_vs_direct"] = round(flows["agentd"][0] / flows["direct"][0], 3)
    out["bulk_ssh_vs_direct"] = round(flows["ssh"][0] / flows["direct"][0], 3)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
