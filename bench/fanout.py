"""32 clients follow one session while a command prints 100 MB: every byte, to every one.

    .venv/bin/python bench/fanout.py [--followers 32] [--mb 100] [--rounds 2]

Each follower is a process of its own with its own channel: it attaches to the session,
and when the call starts reads its output with ReadOutput(follow) from offset 0 to the
end, hashing what it receives. Rows, interleaved in one run: the same Bash command
through RunTool with no followers, and with N followers. Reported: the command's wall
time (RunTool to result) in each case and their ratio (goal: <= 1.2x), that every
follower received exactly the command's bytes in order (sha256 of the stream, checked
against the bytes computed here), and the daemon's RSS before and after and its peak.
The daemon is given a per-output cap above the output size, so nothing is cut.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import shutil
import tempfile
import time
from pathlib import Path

from _common import memory_kb, verdict, workspace

from tests.daemon import start_daemon

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


def follower(socket: str, sid: str, after: int, tool_use_id: str, ready, out) -> None:  # type: ignore[no-untyped-def]
    import grpc

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
        out.put((h.hexdigest(), got, in_order))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--followers", type=int, default=32)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
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
            alone: list[float] = []
            watched: list[float] = []
            ok = True
            for r in range(args.rounds):
                t = time.monotonic()
                res = c.run_tool(sid, "Bash", {"command": command})
                alone.append(time.monotonic() - t)
                assert not res.is_error, res.text[:300]

                ctx = mp.get_context("spawn")
                out = ctx.Queue()
                tool_use_id = f"toolu_fanout_{r}"
                after = c.get_session(sid).last_seq
                readies = []
                procs = []
                for _ in range(args.followers):
                    ready = ctx.Event()
                    p = ctx.Process(
                        target=follower, args=(d.socket, sid, after, tool_use_id, ready, out)
                    )
                    p.start()
                    procs.append(p)
                    readies.append(ready)
                for ready in readies:
                    ready.wait(60)
                t = time.monotonic()
                res = c.run_tool(sid, "Bash", {"command": command}, tool_use_id=tool_use_id)
                watched.append(time.monotonic() - t)
                assert not res.is_error, res.text[:300]
                results = [out.get(timeout=600) for _ in procs]
                for p in procs:
                    p.join(60)
                good = sum(1 for h, n, order in results if (h, n) == want and order)
                ok &= good == args.followers
                print(
                    f"round {r + 1}: alone {alone[-1]:.2f}s, with {args.followers} followers "
                    f"{watched[-1]:.2f}s; {good}/{args.followers} followers got all "
                    f"{size} bytes in order, byte-exact",
                    flush=True,
                )
            mem1 = memory_kb(pid)
        ratio = min(watched) / min(alone)
        print(
            f"\ncommand wall time, best of {args.rounds}: alone {min(alone):.2f}s, "
            f"with {args.followers} followers {min(watched):.2f}s = {ratio:.2f}x "
            f"(goal <= 1.2x: {verdict(ratio <= 1.2)})"
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
