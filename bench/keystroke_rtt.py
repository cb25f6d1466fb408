"""A keystroke's round trip through attach-task, beside a direct pty echo, in one run.

    .venv/bin/python bench/keystroke_rtt.py [--quick]

Rows, interleaved in a new order each round so the machine's noise falls on all of them
alike:
- direct pty: one byte written to a pty's master, read back from `cat` on its raw slave
  (this process and cat only: the floor a terminal has anyway),
- ssh -tt: the same byte through Debian's OpenSSH on loopback (an sshd this bench starts
  on a free port with its own keys) to `cat` on the remote pty: what people use instead,
- gRPC round trip: GetTaskTerminal over the daemon's unix socket (the socket's floor),
- attach-task: a byte sent over the daemon's terminal socket (a token from OpenTerminal,
  then one unix socket off gRPC), through the daemon, the task's shim, its PTY in the
  sandbox and `cat` there (raw, no echo), back through the shim and the daemon: what
  `agentctl attach-task` and `exec -it` do per key on the daemon's machine,
- attach-task over gRPC: the same on a WriteInput stream and a followed ReadOutput
  stream, what they do where the terminal socket is not offered (a daemon over TCP).
Goal: attach-task p50 <= 1.5x ssh -tt's, same run. `--grpc-only` leaves the terminal
socket's row out (to measure a build from before it, its checkout first on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import os
import queue
import random
import select
import shutil
import subprocess
import tempfile
import threading
import time
import tty
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

from _common import daemon, percentile, verdict, workspace

from tests.network.servers import sshd

ATTACH = "attach-task (terminal socket -> sandbox PTY cat -> back)"
ATTACH_GRPC = "attach-task over gRPC (WriteInput -> PTY cat -> ReadOutput)"
DIRECT = "direct pty echo (cat on a raw pty)"
GRPC = "gRPC round trip (GetTaskTerminal)"
SSH = "ssh -tt localhost (OpenSSH on loopback, remote pty cat)"


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


def _ssh(stack: ExitStack) -> Callable[[], None]:
    """`ssh -tt` to an sshd of the bench's own on loopback, running a raw `cat`."""
    base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="agentd-bench-ssh-")))
    key = base / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    port = stack.enter_context(sshd(base / "server", (base / "id_ed25519.pub").read_text()))
    argv = ["ssh", "-tt", "-i", str(key), "-p", str(port), "-o", "StrictHostKeyChecking=no"]
    argv += ["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "root@127.0.0.1"]
    proc = subprocess.Popen(
        [*argv, "stty raw -echo; echo ready; exec cat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    win, rout = proc.stdin.fileno(), proc.stdout.fileno()

    def close() -> None:
        proc.kill()
        proc.wait()

    stack.callback(close)
    seen = b""
    while b"ready" not in seen:
        chunk = os.read(rout, 4096)
        if not chunk:
            raise RuntimeError("ssh to the bench's own sshd failed")
        seen += chunk

    def once() -> None:
        os.write(win, b"k")
        while b"k" not in os.read(rout, 64):
            pass

    return once


def measure(rounds: int, warm: int, grpc_only: bool = False) -> dict[str, list[float]]:
    from agentd_client import Client
    from agentd_client.v1 import agentd_pb2 as pb

    ws = workspace()
    direct, close_direct = _direct()
    try:
        with ExitStack() as stack, daemon() as d, Client(d.socket) as c:
            via_ssh = _ssh(stack)
            sid = c.create_session(ws, permission_mode="bypassPermissions").id

            def cat_task() -> pb.TaskTerminal:
                return c.stub.StartTask(
                    pb.StartTaskRequest(
                        session_id=sid,
                        command="stty raw -echo; echo ready; exec cat",
                        pty=pb.TerminalSize(rows=24, cols=80),
                    )
                )

            # One task per path: each echo is read by its own follower only.
            started, by_socket = cat_task(), cat_task()
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

            channel = None
            if not grpc_only:
                from agentd_client.core.terminal_channel import open_channel

                channel = open_channel(c, sid, by_socket.task_id, input=True)
                if channel is None:
                    raise RuntimeError("the daemon did not offer its terminal socket")
                channel_out = channel.outputs()
                seen = b""
                while b"ready" not in seen:
                    seen += next(channel_out).data

            def via_grpc_attach() -> None:
                keys.put(b"k")
                while b"k" not in next(output).data:
                    pass

            def via_attach() -> None:
                assert channel is not None
                channel.send(b"k")
                while b"k" not in next(channel_out).data:
                    pass

            def via_grpc() -> None:
                c.stub.GetTaskTerminal(ref)

            fns = {
                DIRECT: direct,
                SSH: via_ssh,
                GRPC: via_grpc,
                ATTACH: via_attach,
                ATTACH_GRPC: via_grpc_attach,
            }
            if grpc_only:
                del fns[ATTACH]
            for fn in fns.values():
                for _ in range(warm):
                    fn()
            samples: dict[str, list[float]] = {name: [] for name in fns}
            clock = time.perf_counter
            order = list(fns.items())
            shuffle = random.Random(0).shuffle
            for _ in range(rounds):
                # A new order each round: what a row leaves behind (a daemon still busy
                # after a gRPC call) falls on every row alike, not on the one after it.
                shuffle(order)
                for name, fn in order:
                    t0 = clock()
                    fn()
                    samples[name].append((clock() - t0) * 1000)
            keys.put(None)
            output.cancel()
            if channel is not None:
                channel.close()
            for task in (started, by_socket):
                c.stub.SignalTask(
                    pb.SignalTaskRequest(session_id=sid, task_id=task.task_id, signal="KILL")
                )
    finally:
        close_direct()
        shutil.rmtree(ws, ignore_errors=True)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run")
    parser.add_argument("--grpc-only", action="store_true", help="no terminal socket row")
    args = parser.parse_args()
    rounds, warm = (100, 10) if args.quick else (1000, 50)
    samples = measure(rounds, warm, args.grpc_only)
    base = percentile(samples[SSH], 50)
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'row':60} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'x ssh':>7}")
    for name, values in samples.items():
        p50 = percentile(values, 50)
        print(
            f"{name:60} {p50:8.3f} {percentile(values, 90):8.3f} {percentile(values, 99):8.3f}"
            f" {p50 / base:7.2f}"
        )
    ratio = percentile(samples[ATTACH_GRPC if args.grpc_only else ATTACH], 50) / base
    print(f"goal: attach-task p50 <= 1.5x ssh -tt: {ratio:.2f}x, {verdict(ratio <= 1.5)}")


if __name__ == "__main__":
    main()
