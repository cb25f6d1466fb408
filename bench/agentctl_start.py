"""How soon agentctl answers: `--version`, `status` and a `call Bash true` end to end,
beside `python -c pass` (the same interpreter's bare start) in one run.

    .venv/bin/python bench/agentctl_start.py [--runs N] [--against TREE]

Each row is a whole process, started N times in turn with the others (so load hits them
alike): wall time and CPU (user + system, from wait4), the median and the spread (the
10th to 90th percentile), and the ratio of the medians to `python -c pass`. Goals on a
quiet machine: `--version` <= 100 ms, `call Bash true` <= 300 ms. `--against TREE` adds
the same commands run from another checkout's client (say `git archive main | tar -x -C
DIR`): before and after, side by side. Runs with the bytecode cached (the warm-up
writes it), as an installed client has it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from _common import ROOT, daemon, percentile, verdict, workspace

GOALS = {"agentctl --version": 0.100, "agentctl call Bash true": 0.300}


_STUBS = "import grpc; from agentd_client.v1 import agentd_pb2 as pb, agentd_pb2_grpc"
_GET_STATUS = (
    f"{_STUBS}\n"
    "with grpc.insecure_channel('unix:%s') as ch:\n"
    "    agentd_pb2_grpc.AgentdStub(ch).GetStatus(pb.GetStatusRequest(), timeout=30)"
)


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit status) of one run of `argv`."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, status


def _agentctl(tree: str | None) -> list[str]:
    """agentctl as installed, or from another checkout's client/ first on the path."""
    if tree is None:
        return [os.path.join(os.path.dirname(sys.executable), "agentctl")]
    client = os.path.join(tree, "client")
    code = (
        f"import sys; sys.path.insert(0, {client!r}); "
        "from agentd_client.cli.main import main; sys.exit(main())"
    )
    return [sys.executable, "-c", code]


def _rows(socket: str, session: str, tree: str | None, label: str) -> dict[str, list[str]]:
    ctl = [*_agentctl(tree)]
    call = [*ctl, "--socket", socket, "call", "-s", session, "Bash", '{"command": "true"}']
    return {
        f"{label}agentctl --version": [*ctl, "--version"],
        f"{label}agentctl status": [*ctl, "--socket", socket, "status"],
        f"{label}agentctl call Bash true": call,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each row (15)")
    parser.add_argument("--against", metavar="TREE", help="another checkout to compare with")
    args = parser.parse_args()
    # Bytecode cached, as an installed client has it: PYTHONDONTWRITEBYTECODE would have
    # every run compile the client's modules again.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AGENTD_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    with daemon() as d:
        ctl = _agentctl(None)
        made = subprocess.run(
            [*ctl, "--socket", d.socket, "session", "new", "--json", "--workspace", workspace()],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        session = json.loads(made.stdout)["id"]
        rows = {
            "python -c pass": [sys.executable, "-c", "pass"],
            # The floor of any command that reaches the daemon: gRPC and the API's stubs,
            # then the same with a channel and one GetStatus, the least `status` can do.
            "python -c 'import grpc, stubs'": [sys.executable, "-c", _STUBS],
            "python -c 'stubs, one GetStatus'": [sys.executable, "-c", _GET_STATUS % d.socket],
        }
        rows.update(_rows(d.socket, session, None, ""))
        if args.against:
            tree = os.path.abspath(args.against)
            rows.update(_rows(d.socket, session, tree, f"{tree[-16:]}: "))
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
        for name, argv in rows.items():  # one warm-up each: the page cache, not the import
            _, _, status = _run(argv, env)
            if status != 0:
                raise SystemExit(f"{name}: wait status {status} ({' '.join(argv)})")
        for _ in range(args.runs):
            for name, argv in rows.items():
                wall, cpu, _ = _run(argv, env)
                samples[name].append((wall, cpu))
    base_wall = statistics.median(w for w, _ in samples["python -c pass"])
    base_cpu = statistics.median(c for _, c in samples["python -c pass"])
    load = os.getloadavg()[0]
    print(f"{args.runs} runs each, in turn; load {load:.1f}, {os.cpu_count()} cpus")
    print(f"{'':36} {'wall ms':>8} {'p10-p90':>13} {'ratio':>6} {'cpu ms':>7} {'ratio':>6}  goal")
    for name, got in samples.items():
        walls = [w for w, _ in got]
        wall = statistics.median(walls)
        cpu = statistics.median(c for _, c in got)
        spread = f"{percentile(walls, 10) * 1e3:.0f}-{percentile(walls, 90) * 1e3:.0f}"
        goal = next((g for key, g in GOALS.items() if name.endswith(key)), None)
        judged = f"{goal * 1e3:.0f} ms {verdict(wall <= goal)}" if goal else ""
        print(
            f"{name:36} {wall * 1e3:8.1f} {spread:>13} {wall / base_wall:5.1f}x "
            f"{cpu * 1e3:7.1f} {cpu / base_cpu if base_cpu else float('nan'):5.1f}x  {judged}"
        )
    print(f"(this tree: {ROOT}; the goals hold on a quiet machine: see the load)")


if __name__ == "__main__":
    main()
