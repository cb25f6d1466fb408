"""A keystroke's round trip through attach-task, beside a direct pty echo, in one run.

    .venv/bin/python bench/keystroke_rtt.py [--quick]

Rows, interleaved so the machine's noise falls on all of them alike:
- direct pty: one byte written to a pty's master, read back from `cat` on its raw slave
  (this process and cat only: the floor a terminal has anyway),
- gRPC round trip: GetTaskTerminal over the daemon's unix socket (the socket's floor),
- attach-task: a byte sent on a WriteInput stream, through the daemon, the task's shim,
  its PTY in the sandbox and `cat` there (raw, no echo), back through the shim, the output
  file and a followed ReadOutput stream: what `agentctl attach-task` does per key.
Goal (issue 22): attach-task p50 <= 2 ms over the socket on this machine.
"""

from __future__ import annotations

import argparse
import os
import queue
import select
import shutil
import subprocess
import threading
import time
import tty
from collections.abc import Callable, Iterator

from _common import daemon, percentile, verdict, workspace

ATTACH = "attach-task (WriteInput -> sandbox PTY cat -> ReadOutput)"
DIRECT = "direct pty echo (cat on a raw pty)"
GRPC = "gRPC round trip (GetTaskTerminal)"


def _direct() -> tuple[Callable[[], None], Callable[[], None]]:
    master, slave = os.openpty()
    tty.setraw(slave)
    proc = subprocess.Popen(["cat"], stdin=slave, stdout=slave, stderr=subprocess.DEVNULL)
    os.close(slave)

    def once() -> None:
        os.write(master, b"k")
        while True:
            select.select([master], [], [])
            if b"k" in os.read(master, 64):
                return

    def close() -> None:
        proc.kill()
        proc.wait()
        os.close(master)

    return once, close


def measure(rounds: int, warm: int) -> dict[str, list[float]]:
    from agentd_client import Client
    from agentd_client.v1 import agentd_pb2 as pb

    ws = workspace()
    direct, close_direct = _direct()
    try:
        with daemon() as d, Client(d.socket) as c:
            sid = c.create_session(ws, permission_mode="bypassPermissions").id
            started = c.stub.StartTask(
                pb.StartTaskRequest(
                    session_id=sid,
                    command="stty raw -echo; echo ready; exec cat",
                    pty=pb.TerminalSize(rows=24, cols=80),
                )
            )
            ref = pb.TaskRef(session_id=sid, task_id=started.task_id)
            keys: queue.Queue[bytes | None] = queue.Queue()

            def requests() -> Iterator[pb.TaskInput]:
                yield pb.TaskInput(session_id=sid, task_id=started.task_id)
                while (key := keys.get()) is not None:
                    yield pb.TaskInput(data=key)

            writer = threading.Thread(target=lambda: c.stub.WriteInput(requests()), daemon=True)
            writer.start()
            output = c.stub.ReadOutput(
                pb.ReadOutputRequest(session_id=sid, id=started.task_id, follow=True)
            )
            seen = b""
            while b"ready" not in seen:
                seen += next(output).data

            def via_attach() -> None:
                keys.put(b"k")
                while b"k" not in next(output).data:
                    pass

            def via_grpc() -> None:
                c.stub.GetTaskTerminal(ref)

            fns = {DIRECT: direct, GRPC: via_grpc, ATTACH: via_attach}
            for fn in fns.values():
                for _ in range(warm):
                    fn()
            samples: dict[str, list[float]] = {name: [] for name in fns}
            clock = time.perf_counter
            for _ in range(rounds):
                for name, fn in fns.items():
                    t0 = clock()
                    fn()
                    samples[name].append((clock() - t0) * 1000)
            keys.put(None)
            output.cancel()
            c.stub.SignalTask(
                pb.SignalTaskRequest(session_id=sid, task_id=started.task_id, signal="KILL")
            )
    finally:
        close_direct()
        shutil.rmtree(ws, ignore_errors=True)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run")
    args = parser.parse_args()
    rounds, warm = (100, 10) if args.quick else (1000, 50)
    samples = measure(rounds, warm)
    base = percentile(samples[DIRECT], 50)
    print(f"{'row':60} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'x direct':>9}")
    for name, values in samples.items():
        p50 = percentile(values, 50)
        print(
            f"{name:60} {p50:8.3f} {percentile(values, 90):8.3f} {percentile(values, 99):8.3f}"
            f" {p50 / base:9.1f}"
        )
    p50 = percentile(samples[ATTACH], 50)
    print(f"goal: attach-task p50 <= 2 ms: {p50:.3f} ms, {verdict(p50 <= 2.0)}")


if __name__ == "__main__":
    main()
