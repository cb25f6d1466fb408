"""Forwarded ports (`agentctl forward`) against a direct connection and `ssh -L`, in one run.

    .venv/bin/python bench/port_forward.py [--mb 100] [--connections 50] [--tls]
        [--rounds 5] [--per-round 100] [--parallel 50] [--seconds 5]

Opening connections (bench/forward_setup.py: set-up p50 against `ssh -L` to a Debian
sshd on loopback, CPU per connection, 50 threads opening connections against direct;
goals <= 1.2x ssh -L, <= 2 ms, >= 60 %), then throughput (--mb 0 skips it):

One daemon, one proxied session whose background task runs the exchange server
(tests/support/forward_traffic.py: each connection moves --mb MB each way at once, then
both ends compare sha256s). The same connections are made twice, baseline first:
  - direct: from inside the session's network namespace straight to the server's
    127.0.0.1 port (what a process in the sandbox gets);
  - forwarded: to `agentctl forward`'s port on this machine's loopback, agentctl on the
    daemon's unix socket (its stream on the terminal socket beside it), or on its TLS
    listener with a token (--tls: a ForwardMux gRPC stream).
Each phase: one connection alone, then --connections at once; MB/s counts both
directions. Goal: forwarded >= 70 % of direct. Also the daemon's RSS and CPU seconds
over the forwarded phases (also per MB forwarded), and whether every byte arrived
exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import forward_setup
from _common import cpu_seconds, memory_kb, verdict, workspace
from _sshd import sshd

from agentd.network import netns
from agentd_client import Client
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.forward_traffic import SERVER, exchange

AGENTCTL = str(Path(sys.executable).parent / "agentctl")
TOKEN = "bench-forward-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def phase(dial: Callable[[], socket.socket], n: int, size: int) -> tuple[float, bool]:
    """MB/s (both directions) of `n` connections at once, and whether all were exact."""
    results: list[bool] = [False] * n

    def one(i: int) -> None:
        sock = dial()
        sock.settimeout(600)
        r = exchange(sock, size, seed=7 + i)
        results[i] = r.sent_ok and r.received_ok

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    return 2 * n * size / elapsed / 1e6, all(results)


def tls_config(base: Path) -> tuple[list[str], list[str]]:
    """The daemon's TLS listener config and agentctl's flags for it."""
    key, cert = base / "key.pem", base / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    address = f"127.0.0.1:{free_port()}"
    config = base / "agentd.toml"
    config.write_text(
        f'tcp_listen = "{address}"\ntls_cert = "{cert}"\ntls_key = "{key}"\ntoken = "{TOKEN}"\n'
    )
    token = base / "token"
    token.write_text(TOKEN)
    os.chmod(token, 0o600)
    return ["--config", str(config)], ["--address", address, "--ca", str(cert)] + [
        "--token-file",
        str(token),
    ]


def serve_and_forward(
    c: Client, daemon: DaemonProcess, ws: str, script: str, port: int, ctl_args: list[str]
) -> tuple[str, str, subprocess.Popen[str], int]:
    """A session whose background task runs `script` on `port` in the sandbox, once it
    accepts, and `agentctl forward` to it: (session, its namespace, agentctl, local port)."""
    sid = c.create_session(ws, permission_mode="bypassPermissions").id
    r = c.run_tool(
        sid, "Bash", {"command": f"exec python3 {script} {port}", "run_in_background": True}
    )
    assert not r.is_error, r.text
    path = os.path.join(daemon.state_dir, "netns", sid)
    deadline = time.monotonic() + 60
    while True:
        try:
            netns.connect(path, ("127.0.0.1", port)).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    fw = subprocess.Popen(
        [AGENTCTL, "forward", sid, f"0:{port}", "--json", *ctl_args],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert fw.stdout is not None
    return sid, path, fw, int(json.loads(fw.stdout.readline())["local_port"])


def run(daemon: DaemonProcess, ctl_args: list[str], ws: str, mb: int, n: int) -> dict[str, object]:
    size = mb * 1_000_000
    Path(ws, "server.py").write_text(SERVER)
    port = free_port()
    with Client(daemon.socket, timeout=120) as c:
        sid, path, fw, local = serve_and_forward(c, daemon, ws, "server.py", port, ctl_args)
        try:
            direct_1, ok_d1 = phase(lambda: netns.connect(path, ("127.0.0.1", port)), 1, size)
            direct_n, ok_dn = phase(lambda: netns.connect(path, ("127.0.0.1", port)), n, size)
            pid = daemon.proc.pid
            cpu0, ctl0 = cpu_seconds(pid), cpu_seconds(fw.pid)
            wall0 = time.perf_counter()
            fwd_1, ok_f1 = phase(lambda: socket.create_connection(("127.0.0.1", local)), 1, size)
            fwd_n, ok_fn = phase(lambda: socket.create_connection(("127.0.0.1", local)), n, size)
            cpu = cpu_seconds(pid) - cpu0
            ctl_cpu = cpu_seconds(fw.pid) - ctl0
            wall = time.perf_counter() - wall0
            mem = memory_kb(pid)
        finally:
            fw.terminate()
            fw.wait(30)
        c.close_session(sid)
    moved_mb = 2 * size * (1 + n) / 1e6
    return {
        "mb_each_way": mb,
        "connections": n,
        "direct_1_MBps": round(direct_1),
        "forwarded_1_MBps": round(fwd_1),
        "ratio_1": round(fwd_1 / direct_1, 3),
        f"direct_{n}_MBps": round(direct_n),
        f"forwarded_{n}_MBps": round(fwd_n),
        f"ratio_{n}": round(fwd_n / direct_n, 3),
        "byte_exact": ok_d1 and ok_dn and ok_f1 and ok_fn,
        "daemon_cpu_s_per_wall_s": round(cpu / wall, 2),
        "agentctl_cpu_s_per_wall_s": round(ctl_cpu / wall, 2),
        # CPU per MB forwarded (both directions, both phases): steadier than the ratios
        # on a shared machine, and what a change to the copies moves.
        "daemon_cpu_ms_per_MB": round(1000 * cpu / moved_mb, 3),
        "agentctl_cpu_ms_per_MB": round(1000 * ctl_cpu / moved_mb, 3),
        "daemon_rss_kb": mem.get("VmRSS", 0),
        "daemon_hwm_kb": mem.get("VmHWM", 0),
    }


def run_setup(
    daemon: DaemonProcess, ctl_args: list[str], ws: str, args: argparse.Namespace
) -> dict[str, object]:
    """Opening connections: agentctl forward, direct and ssh -L (forward_setup.py)."""
    Path(ws, "echo.py").write_text(forward_setup.ECHO)
    port = free_port()
    with Client(daemon.socket, timeout=120) as c, sshd() as server:
        sid, path, fw, local = serve_and_forward(c, daemon, ws, "echo.py", port, ctl_args)
        try:
            out = forward_setup.measure(
                ws, path, port, local, daemon.proc.pid, fw.pid, server,
                args.rounds, args.per_round, args.parallel, args.seconds, args.bulk_mb,
            )  # fmt: skip
        finally:
            fw.terminate()
            fw.wait(30)
        c.close_session(sid)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="MB each way per connection")
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--tls", action="store_true", help="agentctl over TLS + token, not unix")
    ap.add_argument("--rounds", type=int, default=5, help="set-up rounds, paths interleaved")
    ap.add_argument("--per-round", type=int, default=100, help="connections per path per round")
    ap.add_argument("--parallel", type=int, default=50, help="threads opening connections")
    ap.add_argument("--seconds", type=float, default=5.0, help="each parallel phase")
    ap.add_argument("--bulk-mb", type=int, default=20, help="MB per parallel bulk connection")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="agentd-bench-fwd-"))
    ws = workspace()
    daemon_args, ctl_args = tls_config(base) if args.tls else ([], [])
    daemon = start_daemon(base / "d", daemon_args)
    ctl = ctl_args or ["--socket", daemon.socket]
    out: dict[str, object] = {}
    try:
        out.update(run_setup(daemon, ctl, ws, args))
        if args.mb:
            out.update(run(daemon, ctl, ws, args.mb, args.connections))
    finally:
        daemon.stop()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)
    out["transport"] = "tls+token" if args.tls else "unix socket"
    print(json.dumps(out, indent=2))
    ratio = float(str(out["setup_agentd_vs_ssh"]))
    cpu = float(str(out["cpu_ms_per_conn_agentd"]))
    par = float(str(out["parallel_agentd_vs_direct"]))
    print(
        f"set-up p50 {out['setup_agentd_p50_ms']} ms vs ssh -L {out['setup_ssh_p50_ms']} ms: "
        f"{ratio:.2f}x (goal <= 1.2x: {verdict(ratio <= 1.2)}); CPU per connection {cpu} ms "
        f"vs ssh's {out['cpu_ms_per_conn_ssh']} ms (goal <= 2 ms: {verdict(cpu <= 2)}); "
        f"{args.parallel} opening in parallel {par:.0%} of direct (goal >= 60 %: "
        f"{verdict(par >= 0.6)}); {args.parallel} bulk streams {out['bulk_agentd_vs_direct']:.0%}"
        " of direct"
    )
    if not args.mb:
        return 0
    n = args.connections
    print(
        f"forwarded vs direct: 1 connection {out['ratio_1']:.0%}, {n} at once "
        f"{out[f'ratio_{n}']:.0%} (goal >= 70 %: {verdict(float(str(out['ratio_1'])) >= 0.7)})"
    )
    return 0 if out["byte_exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
