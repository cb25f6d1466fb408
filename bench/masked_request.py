"""What a masked credential costs: an HTTPS request to a host the credential goes to
(TLS terminated by the proxy, the placeholder swapped, the answer masked) against the
same request to a host tunnelled untouched, side by side in one run, same upstream.

    .venv/bin/python bench/masked_request.py [--requests 200] [--mib 64]

One daemon (tests/credentials/masked_world.py), one proxied session. Inside the
sandbox one Python process times, per host: --requests requests each on a new
connection (CONNECT, TLS, one GET with the placeholder in its Authorization), the same
on one kept connection, and a download of --mib MiB; the daemon's CPU time over each
download gives its CPU per MiB. p50 and p90 per request, requests per second, and
the ratio masked/tunnelled.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, cast

from _common import workspace

from agentd_client import Client
from tests.credentials.masked_world import API, OTHER, masked_world

PROBE = r"""
import http.client, json, os, ssl, sys, time
host, port, mode, n, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
ctx = ssl.create_default_context()
ctx.load_verify_locations(ca)  # the tunnelled host's own CA (the session's is in the bundle)
auth = {"Authorization": "Bearer " + os.environ["GITHUB_TOKEN"]}
def conn():
    c = http.client.HTTPSConnection("127.0.0.1", 3128, context=ctx, timeout=120)
    c.set_tunnel(host, port)
    return c
def get(c, path):
    c.request("GET", path, headers=auth)
    r = c.getresponse()
    body = r.read()
    assert r.status == 200, (r.status, body[:200])
    return body
out = {}
if mode == "download":
    a = time.perf_counter(); got = len(get(conn(), f"/big?{n}"))
    out["download"] = time.perf_counter() - a
    assert got == n << 20
else:
    times = []
    for _ in range(n):
        a = time.perf_counter(); c = conn(); get(c, "/echo"); c.close()
        times.append(time.perf_counter() - a)
    out["fresh"] = times
    c = conn(); get(c, "/echo"); times = []
    for _ in range(n):
        a = time.perf_counter(); get(c, "/echo"); times.append(time.perf_counter() - a)
    out["kept"] = times
print(json.dumps(out))
"""


def cpu_seconds(pid: int) -> float:
    """The process's user and system CPU time, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def probe(client: Client, sid: str, ws: str, argv: str) -> dict[str, Any]:
    command = f"python3 {ws}/probe.py {argv}"
    text = client.run_tool(sid, "Bash", {"command": command, "timeout": 600_000}).text
    return cast(dict[str, Any], json.loads(text.strip().splitlines()[-1]))


def run(
    client: Client,
    sid: str,
    ws: str,
    host: str,
    port: int,
    args: argparse.Namespace,
    pid: int,
    ca: str,
) -> dict[str, Any]:
    got = probe(client, sid, ws, f"{host} {port} requests {args.requests} {ca}")
    before = cpu_seconds(pid)
    got |= probe(client, sid, ws, f"{host} {port} download {args.mib} {ca}")
    got["cpu"] = cpu_seconds(pid) - before
    return got


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="agentd-bench-masked-"))
    ws = workspace()
    try:
        (Path(ws) / "probe.py").write_text(PROBE)
        (Path(ws) / "probe.py").chmod(0o644)
        with masked_world(base) as world:
            pid = world.daemon.proc.pid
            with Client(world.daemon.socket, timeout=600) as client:
                sid = client.create_session(ws, permission_mode="bypassPermissions").id
                results: dict[str, list[dict[str, Any]]] = {"masked": [], "tunnelled": []}
                for r in range(args.rounds + 1):
                    for name, host in (("tunnelled", OTHER), ("masked", API)):
                        got = run(client, sid, ws, host, world.api_port, args, pid, world.test_ca)
                        if r:  # the first round warms both paths
                            results[name].append(got)
        report(results, args)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)


def report(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    line: dict[str, dict[str, float]] = {}
    for name, rounds in results.items():
        fresh = [t for r in rounds for t in r["fresh"]]
        kept = [t for r in rounds for t in r["kept"]]
        downloads = sorted(r["download"] for r in rounds)
        cpu = sorted(r["cpu"] for r in rounds)
        line[name] = {
            "fresh_p50": pct(fresh, 0.5),
            "fresh_p90": pct(fresh, 0.9),
            "kept_p50": pct(kept, 0.5),
            "kept_p90": pct(kept, 0.9),
            "kept_rps": 1000 / pct(kept, 0.5),
            "mib_s": args.mib / downloads[len(downloads) // 2],
            "cpu_ms_per_mib": 1000 * cpu[len(cpu) // 2] / args.mib,
        }
    t, m = line["tunnelled"], line["masked"]
    print(f"{args.requests} requests x {args.rounds} rounds; {args.mib} MiB download")
    print(f"{'':28}{'tunnelled':>12}{'masked':>12}{'ratio':>8}")
    for key, label in (
        ("fresh_p50", "new connection p50 (ms)"),
        ("fresh_p90", "new connection p90 (ms)"),
        ("kept_p50", "kept connection p50 (ms)"),
        ("kept_p90", "kept connection p90 (ms)"),
        ("kept_rps", "kept requests/s"),
        ("mib_s", "download MiB/s"),
        ("cpu_ms_per_mib", "daemon CPU ms per MiB*"),
    ):
        print(f"{label:28}{t[key]:12.2f}{m[key]:12.2f}{m[key] / t[key]:8.2f}")
    print(
        f"added at p50: {m['fresh_p50'] - t['fresh_p50']:.2f} ms on a new connection, "
        f"{m['kept_p50'] - t['kept_p50']:.2f} ms on a kept one"
    )
    print("* the daemon's CPU over the download command, per MiB")


if __name__ == "__main__":
    main()
