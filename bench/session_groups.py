"""What a session's control group costs per call, beside today's per-uid rlimits, same run.

    .venv/bin/python bench/session_groups.py --baseline-tree /path/to/main/checkout [--quick]

The baseline tree must have its own venv (`make .venv/.installed` there): its daemon
runs with its own code. Rows, interleaved round by round so the machine's noise falls on
all alike, each a Bash `true` (RunTool over gRPC, p50/p99 ms):
- baseline: the other tree's daemon (rlimits per uid and per process, unsized tmpfs),
- groups off: this tree with `session_cgroups = "off"` and `session_tmp_bytes = 0`,
- groups on: this tree as shipped (its group joined by each start, sized /tmp, /dev/shm
  and temp dir),
- groups on, 100 sessions: the same daemon after 100 other sessions ran a call, so 100
  temp dirs are mounted (every host mount is copied into each sandbox start),
then, from this process, the sandbox start of `true` with and without a group to join
(the join step alone: one `sh` exec and a write per hierarchy).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from _common import DaemonProcess, percentile, start_daemon, workspace

from agentd_client import Client

OTHER_SESSIONS = 100


@contextlib.contextmanager
def _daemon(config: str, python: str | None = None) -> Iterator[DaemonProcess]:
    base = Path(tempfile.mkdtemp(prefix="agentd-bench-"))
    (base / "config.toml").write_text(config)
    # Another tree's interpreter in place of ours (sh drops ours from the argv), in that
    # tree (`-m agentd` imports from the current directory first).
    tree = None if python is None else str(Path(python).parents[2])
    wrapper = None
    if python is not None:
        wrapper = ["sh", "-c", f'cd {tree} && shift && exec {python} "$@"', "sh"]
    proc = start_daemon(base, ["--config", str(base / "config.toml")], wrapper=wrapper)
    try:
        yield proc
    finally:
        proc.stop()
        shutil.rmtree(base, ignore_errors=True)


def _bash_true(client: Client, sid: str) -> Callable[[], None]:
    def once() -> None:
        r = client.run_tool(sid, "Bash", {"command": "true"})
        assert not r.is_error, r.text

    return once


def _sandbox_start(with_group: bool) -> tuple[Callable[[], None], Callable[[], None]]:
    """A sandboxed `true` started from here, joining a group of its own or not."""
    from agentd_sandbox import SandboxPolicy, cgroups
    from agentd_sandbox.runner import prepare

    ws = workspace()
    policy = SandboxPolicy(writable=[ws], cwd=ws)
    tree = None
    if with_group:
        tree = cgroups.Tree(cgroups.detect(), f"agentd-bench-{os.getpid()}")
        tree.setup()
        group = tree.group("g")
        group.create(cgroups.GroupLimits(memory_bytes=1 << 30, processes=64, cpu_weight=100))
        policy.cgroup_procs = group.procs_files

    def once() -> None:
        # Up to 3 starts, as the Bash tool makes: a host socket listed for hiding may
        # vanish before bwrap mounts over it (other programs' sockets come and go).
        for _ in range(3):
            launch = prepare(policy, ["true"])
            try:
                proc = subprocess.Popen(
                    launch.argv, stdin=subprocess.DEVNULL, **launch.popen_kwargs
                )
            finally:
                launch.close()
            if proc.wait() == 0:
                return
        raise AssertionError("a sandboxed `true` failed three times")

    def done() -> None:
        if tree is not None:
            tree.group("g").remove()
            tree.remove_if_empty()
        shutil.rmtree(ws, ignore_errors=True)

    return once, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-tree", required=True, help="a checkout with its own .venv")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds, warm = (40, 5) if args.quick else (200, 20)
    python = os.path.join(os.path.abspath(args.baseline_tree), ".venv", "bin", "python")
    if not os.access(python, os.X_OK):
        sys.exit(f"no venv in {args.baseline_tree}: run `make .venv/.installed` there")

    ws = workspace()
    rows: dict[str, Callable[[], None]] = {}
    cleanup: list[Callable[[], None]] = []
    with contextlib.ExitStack() as stack:
        daemons = {
            "baseline": stack.enter_context(_daemon("", python)),
            "groups off": stack.enter_context(
                _daemon('session_cgroups = "off"\nsession_tmp_bytes = 0\n')
            ),
            "groups on": stack.enter_context(_daemon("")),
            f"groups on, {OTHER_SESSIONS} sessions": stack.enter_context(_daemon("")),
        }
        for name, proc in daemons.items():
            client = stack.enter_context(Client(proc.socket, timeout=60))
            sid = client.create_session(ws, permission_mode="bypassPermissions").id
            rows[name] = _bash_true(client, sid)
            if name.endswith("sessions"):
                for _ in range(OTHER_SESSIONS):
                    other = client.create_session(ws, permission_mode="bypassPermissions").id
                    _bash_true(client, other)()
        for name, with_group in (("start, no group", False), ("start, joins a group", True)):
            rows[name], done = _sandbox_start(with_group)
            cleanup.append(done)
        try:
            for fn in rows.values():
                for _ in range(warm):
                    fn()
            samples: dict[str, list[float]] = {name: [] for name in rows}
            for _ in range(rounds):
                for name, fn in rows.items():
                    t0 = time.perf_counter()
                    fn()
                    samples[name].append((time.perf_counter() - t0) * 1000)
        finally:
            for done in cleanup:
                done()
    shutil.rmtree(ws, ignore_errors=True)
    print(f"Bash `true`, {rounds} interleaved rounds after {warm} warm-up")
    print(f"{'':28} {'p50 ms':>8} {'p99 ms':>8} {'vs baseline':>12}")
    base = percentile(samples["baseline"], 50)
    for name, ms in samples.items():
        if name == "start, no group":
            print("sandbox start from this process, no daemon:")
            base = percentile(ms, 50)
        p50 = percentile(ms, 50)
        print(f"{name:28} {p50:8.2f} {percentile(ms, 99):8.2f} {p50 / base:11.2f}x")


if __name__ == "__main__":
    main()
