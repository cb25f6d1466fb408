"""Added latency of the entry point that routes daemons by name (deploy/router/nginx.conf,
Debian's nginx from `make nginx`), beside the same daemon reached directly, same run.

    .venv/bin/python bench/router.py [--quick]

Rows, one TLS daemon: a unary GetStatus over a kept channel, direct and through the
router (the per-call cost a person pays), then a new channel per call (TLS handshake
included: what a fresh `agentctl` pays). Rounds alternate direct and routed so a noisy
machine weighs on both alike. Goal (the issue): <= 1 ms added at p50.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import percentile, verdict

from agentd_client import Client
from tests.support.daemon import start_daemon
from tests.support.ports import free_port
from tests.support.router import available, router

NAME = "bench.agentd.test"


def _client(address: str, tls: Path, name: str) -> Client:
    token = (tls / "token").read_text().strip()
    roots = (tls / "ca.pem").read_bytes()
    return Client(address=address, token=token, root_certificates=roots, server_name=name)


def _time(fn: Callable[[], object], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if not available():
        print("nginx is not unpacked: run `make nginx` first")
        return 2
    rounds, per = (3, 100) if args.quick else (5, 400)
    base = Path(tempfile.mkdtemp(prefix="agentd-bench-router-"))
    tls = base / "tls"
    address = f"127.0.0.1:{free_port()}"
    made = subprocess.run(
        [sys.executable, "-m", "agentd", "tls", "init", "--dir", str(tls)]
        + ["--listen", address, "--name", NAME],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [ln for ln in made.stdout.splitlines() if ln.startswith(("tcp_listen", "tls_", "tok"))]
    (base / "agentd.toml").write_text("\n".join(lines) + "\n")
    daemon = start_daemon(base / "d", ["--config", str(base / "agentd.toml")])
    rows: dict[str, list[float]] = {"direct": [], "routed": [], "direct new": [], "routed new": []}
    try:
        with router(base / "router", {NAME: address}) as routed_at:
            where = {"direct": address, "routed": routed_at}
            kept = {k: _client(v, tls, NAME) for k, v in where.items()}
            for c in kept.values():
                _time(lambda c=c: c.status(), 20)  # warm
            for _ in range(rounds):
                for kind, c in kept.items():
                    rows[kind] += _time(lambda c=c: c.status(), per)
                for kind, at in where.items():

                    def fresh(at: str = at) -> None:
                        with _client(at, tls, NAME) as c:
                            c.status()

                    rows[f"{kind} new"] += _time(fresh, per // 10)
            for c in kept.values():
                c.close()
    finally:
        daemon.stop()
    print(f"{'':12} {'p50 ms':>8} {'p90 ms':>8}   (GetStatus over TLS, {rounds} rounds)")
    for kind, samples in rows.items():
        print(f"{kind:12} {percentile(samples, 50):8.3f} {percentile(samples, 90):8.3f}")
    added = percentile(rows["routed"], 50) - percentile(rows["direct"], 50)
    added_new = percentile(rows["routed new"], 50) - percentile(rows["direct new"], 50)
    print(f"added by the router at p50: {added:.3f} ms per call on a kept channel, ", end="")
    print(f"{added_new:.3f} ms with a new channel  (goal <= 1 ms: {verdict(added <= 1.0)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
