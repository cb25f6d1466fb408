"""Round trip of a sandboxed `true` through the daemon, beside bare spawns of the same sandbox.

    .venv/bin/python bench/bash_rtt.py [--quick]

Rows, interleaved in this run so the machine's noise falls on all of them alike:
- `sh -c true` (a bare fork/exec),
- the minimal sandbox users and peers compare with (issue 12): `bwrap --ro-bind / /
  --dev /dev --proc /proc --unshare-all --die-with-parent --new-session -- sh -c true`,
- `bwrap <the daemon's policy> true` and `bwrap <the daemon's policy> /bin/bash -c true`:
  the argv from `agentd_sandbox.runner.prepare` with the policy the daemon builds for the
  session (`agentd.sandboxing.policy.policy_for`), spawned and waited for from this process,
- RunTool(Bash "true") over gRPC to a daemon process (it runs `/bin/bash -c true`).
Goals: the daemon's p50 <= 1.7x the bare bwrap spawn of the same argv; <= 1.3x the
minimal sandbox (issue 12).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable

from _common import daemon, percentile, verdict, workspace


def _policy(ws: str):
    """The sandbox policy the daemon builds for a session on `ws` (see agentd.sandboxing.policy)."""
    from agentd.foundation.config import Config
    from agentd.sandboxing import policy as sandbox_policy
    from agentd.sandboxing import runtime
    from agentd.sessions.session import Session

    state = tempfile.mkdtemp(prefix="agentd-bench-state-")
    config = Config(socket_path=os.path.join(state, "run", "agentd.sock"), state_dir=state)
    session = Session(id="bench", workspace_roots=[ws], cwd=ws, owner_uid=os.getuid())
    tmp_dir = sandbox_policy.session_tmp_dir(session, config, runtime.bare())
    return sandbox_policy.policy_for(session, config, tmp_dir, runtime.bare()), [state, tmp_dir]


def _bwrap(policy, argv: list[str]) -> Callable[[], None]:
    from agentd_sandbox.runner import prepare

    def once() -> None:
        launch = prepare(policy, argv)
        try:
            proc = subprocess.Popen(launch.argv, stdin=subprocess.DEVNULL, **launch.popen_kwargs)
        finally:
            launch.close()
        assert proc.wait() == 0

    return once


MINIMAL = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all"]
MINIMAL += ["--die-with-parent", "--new-session", "--", "sh", "-c", "true"]


def _minimal() -> None:
    bwrap = shutil.which("bwrap") or "/usr/bin/bwrap"
    assert subprocess.run([bwrap, *MINIMAL], stdin=subprocess.DEVNULL).returncode == 0


def _sh() -> None:
    assert subprocess.run(["sh", "-c", "true"], stdin=subprocess.DEVNULL).returncode == 0


DAEMON = "RunTool(Bash true) via daemon"
MINIMAL_ROW = "minimal bwrap sh -c true"


def measure(rounds: int, warm: int) -> dict[str, list[float]]:
    """Milliseconds of each row, `rounds` interleaved rounds after `warm` of each."""
    ws = workspace()
    policy, cleanup = _policy(ws)
    try:
        with daemon() as d:
            from agentd_client import Client

            with Client(d.socket) as c:
                session = c.create_session(ws, permission_mode="bypassPermissions")

                def via_daemon() -> None:
                    r = c.run_tool(session.id, "Bash", {"command": "true"})
                    assert not r.is_error, r.text

                fns: dict[str, Callable[[], None]] = {
                    "sh -c true": _sh,
                    MINIMAL_ROW: _minimal,
                    "bwrap <policy> true": _bwrap(policy, ["true"]),
                    "bwrap <policy> bash -c true": _bwrap(policy, ["/bin/bash", "-c", "true"]),
                    DAEMON: via_daemon,
                }
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
    finally:
        shutil.rmtree(ws, ignore_errors=True)
        for path in cleanup:
            shutil.rmtree(path, ignore_errors=True)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run")
    args = parser.parse_args()
    rounds, warm = (40, 5) if args.quick else (200, 20)
    samples = measure(rounds, warm)

    base = percentile(samples["bwrap <policy> bash -c true"], 50)
    minimal = percentile(samples[MINIMAL_ROW], 50)
    print(f"spawn round trips, {rounds} interleaved rounds after {warm} warm-up")
    print(f"{'':32} {'p50 ms':>8} {'p99 ms':>8} {'vs bwrap bash':>14} {'vs minimal':>11}")
    for name, ms in samples.items():
        p50 = percentile(ms, 50)
        print(
            f"{name:32} {p50:8.2f} {percentile(ms, 99):8.2f} {p50 / base:13.2f}x "
            f"{p50 / minimal:10.2f}x"
        )
    ours = percentile(samples[DAEMON], 50)
    print(
        f"goal: daemon p50 <= 1.7x bare bwrap of the same argv: {verdict(ours / base <= 1.7)} "
        f"({ours / base:.2f}x); <= 1.3x the minimal sandbox: "
        f"{verdict(ours / minimal <= 1.3)} ({ours / minimal:.2f}x)"
    )


if __name__ == "__main__":
    main()
