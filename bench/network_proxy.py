"""A proxied session's way out against the host's network, side by side in one run.

    .venv/bin/python bench/network_proxy.py [--gib 1] [--setups 300] [--concurrent 200]

One daemon, two sessions on the same workspace: `on` (the host's network, the baseline)
and `proxied` (its own namespace, out only through the daemon's proxy). Each figure is
measured inside the sandbox by a Bash call, baseline first, against an HTTP server this
script runs on the host's loopback (named bench.test for the proxy, by the daemon's
resolver map):
  - a download of --gib GiB by curl (goal: proxied >= 80 % of direct throughput);
  - connection set-up: a new connection, a small request and its answer, --setups
    times in a row (proxied through a CONNECT tunnel, as https goes), p50 and p99, and
    what the proxy adds (goal: <= 1 ms at p50);
  - forward requests: --requests small requests in a row on one kept-alive connection
    (proxied as `GET http://host/...` to the proxy, each parsed and decided), p50 and
    p99 per request, and what the proxy adds;
  - --concurrent connections at once from one session, each fetching 1 MiB;
  - the daemon's RSS and CPU seconds over each proxied phase.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path

from _common import cpu_seconds, memory_kb, verdict, workspace

from agentd_client import Client
from tests.support.daemon import start_daemon

HOST = "bench.test"
CHUNK = b"\0" * (1 << 20)


def serve(port_box: list[int], stop: threading.Event) -> None:
    """GET /N answers N bytes of zeros; a connection may carry several requests."""
    server = socket.create_server(("127.0.0.1", 0), backlog=1024)
    port_box.append(server.getsockname()[1])
    server.settimeout(0.5)

    def one(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # head, then body
        with conn:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                size = int(head.split(b" ")[1].rsplit(b"/", 1)[-1] or b"0")
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
                while size > 0:
                    part = CHUNK if size >= len(CHUNK) else CHUNK[:size]
                    conn.sendall(part)
                    size -= len(part)

    while not stop.is_set():
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        threading.Thread(target=one, args=(conn,), daemon=True).start()
    server.close()


SETUP = r"""
import json, socket, sys, time
mode, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def once():
    t = time.perf_counter()
    if mode == "direct":
        s = socket.create_connection(("127.0.0.1", port))
    else:
        s = socket.create_connection(("127.0.0.1", 3128))
        s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(4096)
        assert b" 200 " in head, head
    s.sendall(b"GET /16 HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    while not got.endswith(b"\0" * 16):
        got += s.recv(4096)
    s.close()
    return (time.perf_counter() - t) * 1000
for _ in range(20):
    once()
print(json.dumps(sorted(once() for _ in range(n))))
"""

FORWARD = r"""
import json, socket, sys, time
mode, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if mode == "direct":
    s = socket.create_connection(("127.0.0.1", port))
    line = b"GET /16 HTTP/1.1\r\nHost: x\r\n\r\n"
else:
    s = socket.create_connection(("127.0.0.1", 3128))
    line = f"GET http://{host}:{port}/16 HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
def once():
    t = time.perf_counter()
    s.sendall(line)
    got = b""
    while not got.endswith(b"\0" * 16):
        got += s.recv(4096)
    return (time.perf_counter() - t) * 1000
for _ in range(20):
    once()
print(json.dumps(sorted(once() for _ in range(n))))
"""

CONCURRENT = r"""
import json, socket, sys, threading, time
mode, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ok = []
go = threading.Event()
def one():
    go.wait()
    if mode == "direct":
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
    else:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=60)
        s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(4096)
        if b" 200 " not in head:
            return
    s.sendall(b"GET /1048576 HTTP/1.1\r\nHost: x\r\n\r\n")
    total, want = 0, None
    buf = b""
    while want is None or total < want:
        data = s.recv(262144)
        if not data:
            break
        if want is None:
            buf += data
            if b"\r\n\r\n" in buf:
                head, _, rest = buf.partition(b"\r\n\r\n")
                want = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                total = len(rest)
        else:
            total += len(data)
    ok.append(total == want)
threads = [threading.Thread(target=one) for _ in range(n)]
for t in threads:
    t.start()
t0 = time.perf_counter(); go.set()
for t in threads:
    t.join()
print(json.dumps({"ok": sum(ok), "seconds": time.perf_counter() - t0}))
"""


def bash(client: Client, sid: str, command: str) -> str:
    r = client.run_tool(sid, "Bash", {"command": command, "timeout": 600_000})
    if r.is_error:
        raise SystemExit(f"bench command failed: {r.text}")
    return r.text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--setups", type=int, default=300)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrent", type=int, default=200)
    ap.add_argument("--only", choices=["download", "setup", "forward", "concurrent"])
    args = ap.parse_args()
    port_box: list[int] = []
    stop = threading.Event()
    threading.Thread(target=serve, args=(port_box, stop), daemon=True).start()
    while not port_box:
        pass
    port = port_box[0]
    base = Path(tempfile.mkdtemp(prefix="agentd-bench-net-"))
    config = base / "config.toml"
    config.write_text(
        f'network_allowed_domains = ["{HOST}"]\nnetwork_allow_private_hosts = ["{HOST}"]\n'
        f'network_resolve = {{ "{HOST}" = ["127.0.0.1"] }}\n'
    )
    proc = start_daemon(base / "d", ["--config", str(config)])
    ws = workspace()
    size = int(args.gib * (1 << 30))
    try:
        with Client(proc.socket, timeout=900) as c:
            on = c.create_session(ws, allow_network=True, permission_mode="bypassPermissions").id
            px = c.create_session(ws, permission_mode="bypassPermissions").id
            pid = proc.proc.pid
            fmt = "-w '%{speed_download}' -o /dev/null -s"
            bash(c, px, f"curl {fmt} http://{HOST}:{port}/1024")  # warm: namespace, proxy

            def wanted(name: str) -> bool:
                return args.only in (None, name)

            def phase(sid: str, command: str) -> tuple[str, dict[str, float]]:
                rss0, cpu0 = memory_kb(pid)["VmRSS"], cpu_seconds(pid)
                out = bash(c, sid, command)
                rss1, cpu1 = memory_kb(pid)["VmRSS"], cpu_seconds(pid)
                cpu = round(cpu1 - cpu0, 2)
                return out, {"rss_kb": rss1, "rss_kb_delta": rss1 - rss0, "cpu_s": cpu}

            def pct(xs: list[float], q: float) -> float:
                return xs[min(len(xs) - 1, int(q / 100 * len(xs)))]

            if wanted("download"):
                direct, d_res = phase(
                    on, f"curl {fmt} --noproxy '*' http://127.0.0.1:{port}/{size}"
                )
                proxied, p_res = phase(px, f"curl {fmt} http://{HOST}:{port}/{size}")
                d_bps, p_bps = float(direct.split()[0]), float(proxied.split()[0])
                ratio = p_bps / d_bps
                print(
                    f"download {args.gib:g} GiB: direct {d_bps / 1e9:.2f} GB/s, proxied "
                    f"{p_bps / 1e9:.2f} GB/s = {ratio:.0%} of direct (goal >= 80%: "
                    f"{verdict(ratio >= 0.8)}); daemon meanwhile {p_res} (direct: {d_res})"
                )

            for name, script, n, what in (
                (
                    "setup",
                    SETUP,
                    args.setups,
                    "connection set-up ({n}, new connection + 16-byte answer)",
                ),
                (
                    "forward",
                    FORWARD,
                    args.requests,
                    "forward requests ({n} on one kept-alive connection, 16-byte answers)",
                ),
            ):
                if not wanted(name):
                    continue
                py = "/usr/bin/python3 -c " + shlex.quote(script)
                d = json.loads(phase(on, f"{py} direct {HOST} {port} {n}")[0])
                out, p_res = phase(px, f"{py} proxied {HOST} {port} {n}")
                p = json.loads(out)
                added50 = pct(p, 50) - pct(d, 50)
                goal = f" (goal <= 1 ms p50: {verdict(added50 <= 1.0)})" if name == "setup" else ""
                print(
                    f"{what.format(n=n)}: direct p50 {pct(d, 50):.3f} ms p99 {pct(d, 99):.3f} "
                    f"ms; proxied p50 {pct(p, 50):.3f} ms p99 {pct(p, 99):.3f} ms; added p50 "
                    f"{added50:.3f} ms p99 {pct(p, 99) - pct(d, 99):.3f} ms{goal}; daemon "
                    f"meanwhile {p_res}"
                )

            if wanted("concurrent"):
                py = "/usr/bin/python3 -c " + shlex.quote(CONCURRENT)
                d = json.loads(phase(on, f"{py} direct {HOST} {port} {args.concurrent}")[0])
                out, p_res = phase(px, f"{py} proxied {HOST} {port} {args.concurrent}")
                p = json.loads(out)
                print(
                    f"{args.concurrent} concurrent connections x 1 MiB: direct {d['ok']} ok in "
                    f"{d['seconds']:.3f} s; proxied {p['ok']} ok in {p['seconds']:.3f} s; "
                    f"daemon meanwhile {p_res}"
                )
    finally:
        proc.stop()
        stop.set()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
