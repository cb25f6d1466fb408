"""Where a sandboxed `true` spends its time: the minimal sandbox, then agentd's layers one
at a time, then the daemon's call, interleaved in one run.

    .venv/bin/python bench/bash_stages.py [--rounds N] [--against TREE]

Each row adds one thing to the row above it; the step column is the p50 difference:
1. minimal bwrap running `sh -c true` (issue 12's baseline), as the caller (root here),
2. the same with `/bin/bash -c true` (the Bash tool runs bash),
3. as the sandbox identity, dropped by setpriv (with its parent-death signal),
4. agentd's bwrap options (its namespaces, mounts, hidden paths, env) without seccomp,
5. plus the seccomp filter,
6. plus prlimit (the rlimits),
7. plus `unshare --pid --kill-child` (the outer pid namespace: no orphans) = the argv
   chain runner.prepare builds where agentd-launch is not built, prepare included,
8. the same steps by agentd-launch, one exec in front of bwrap
   (agentd_sandbox/launcher.py), prepare included: agentd's own chain, run bare,
9. plus the join of a control group of its own, as each session's sandbox has (on
   cgroup v1 the first join after a quiet moment waits for an RCU grace period),
10. RunTool(Bash "true") through the daemon over gRPC.
With `--against TREE` (a checkout of another commit, e.g. `git archive main | tar -x -C
TREE`), a last row: the same call to a daemon running TREE's code, interleaved.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

import bash_rtt
from _common import daemon, percentile, verdict, workspace

BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"
MINIMAL = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all"]
MINIMAL += ["--die-with-parent", "--new-session", "--"]
BARE_CHAIN = "  + agentd-launch: one exec (prepare)"
WITH_GROUP = "  + its own control group"
DAEMON = "  + the daemon (RunTool over gRPC)"


def _run(argv: list[str], **kwargs: object) -> None:
    assert subprocess.run(argv, stdin=subprocess.DEVNULL, **kwargs).returncode == 0, argv


def _argv_chain(policy: object, argv: list[str]) -> Callable[[], None]:
    """The chain of execs runner.prepare builds where agentd-launch is not built."""
    from agentd_sandbox import launcher

    once = bash_rtt._bwrap(policy, argv)
    built = launcher.helper

    def without_helper() -> None:
        launcher.helper = lambda: None
        try:
            once()
        finally:
            launcher.helper = built

    return without_helper


def _layers(policy: object, grouped: object) -> dict[str, Callable[[], None]]:
    from agentd_sandbox import bwrap, identity, limits, seccomp

    ident = identity.resolve(policy)
    drop = identity.setpriv_prefix(ident)
    bash = ["/bin/bash", "-c", "true"]

    def agentd_argv(with_seccomp: bool, prlimit: bool) -> Callable[[], None]:
        def once() -> None:
            fds = seccomp.bpf_fds() if with_seccomp else ()
            mount_list = None
            try:
                argv, mount_list = bwrap.build_argv(
                    policy, bash, identity=ident, bwrap=BWRAP, seccomp_fds=fds
                )
                pre = limits.prlimit_prefix(policy.limits) if prlimit else []
                _run([*drop, *pre, *argv], pass_fds=(*fds, *mount_list.fds))
            finally:
                if mount_list is not None:
                    mount_list.close()
                for fd in fds:
                    os.close(fd)

        return once

    return {
        "minimal bwrap, sh -c true": lambda: _run([BWRAP, *MINIMAL, "sh", "-c", "true"]),
        "  + bash instead of sh": lambda: _run([BWRAP, *MINIMAL, *bash]),
        "  + setpriv to the sandbox uid": lambda: _run([*drop, BWRAP, *MINIMAL, *bash]),
        "  + agentd's bwrap options": agentd_argv(False, False),
        "  + seccomp": agentd_argv(True, False),
        "  + prlimit": agentd_argv(True, True),
        "  + unshare pid ns (argv chain)": _argv_chain(policy, bash),
        BARE_CHAIN: bash_rtt._bwrap(policy, bash),
        WITH_GROUP: bash_rtt._bwrap(grouped, bash),
    }


def _bash_true(client: Any, sid: str) -> None:
    assert not client.run_tool(sid, "Bash", {"command": "true"}).is_error


def _group(policy: object) -> tuple[object, Callable[[], None]]:
    """`policy` with a control group of its own (as a session's), and its removal."""
    import dataclasses

    from agentd_sandbox import cgroups

    hierarchy = cgroups.detect()
    if hierarchy is None or os.geteuid() != 0:
        return policy, lambda: None
    tree = cgroups.Tree(hierarchy, f"agentd-bench-{uuid.uuid4().hex[:8]}")
    tree.setup()
    group = tree.group("session")
    group.create(cgroups.GroupLimits())

    def remove() -> None:
        group.kill()
        group.remove()
        tree.remove_if_empty()

    return dataclasses.replace(policy, cgroup_procs=group.procs_files), remove


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--against", help="another checkout whose daemon is measured too")
    args = parser.parse_args()
    ws = workspace()
    policy, cleanup = bash_rtt._policy(ws)
    grouped, ungroup = _group(policy)
    try:
        with contextlib.ExitStack() as stack:
            from agentd_client import Client

            def call_in(tree: str | None) -> Callable[[], None]:
                wrapper = None if tree is None else ["env", "-C", tree, f"PYTHONPATH={tree}"]
                d = stack.enter_context(daemon(wrapper=wrapper))
                c = stack.enter_context(Client(d.socket))
                sid = c.create_session(ws, permission_mode="bypassPermissions").id
                return lambda: _bash_true(c, sid)

            fns = {**_layers(policy, grouped), DAEMON: call_in(None)}
            if args.against:
                fns[f"  (the daemon of {args.against})"] = call_in(os.path.abspath(args.against))
            for fn in fns.values():
                for _ in range(5):
                    fn()
            samples: dict[str, list[float]] = {name: [] for name in fns}
            for _ in range(args.rounds):
                for name, fn in fns.items():
                    t0 = time.perf_counter()
                    fn()
                    samples[name].append((time.perf_counter() - t0) * 1000)
    finally:
        ungroup()
        shutil.rmtree(ws, ignore_errors=True)
        for path in cleanup:
            shutil.rmtree(path, ignore_errors=True)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    base = percentile(next(iter(samples.values())), 50)
    print(f"sandboxed true, {args.rounds} interleaved rounds; load {load}")
    print(f"{'':40} {'p50 ms':>8} {'step ms':>8} {'vs minimal':>10} {'p25-p75 ms':>14}")
    last = None
    for name, ms in samples.items():
        p50 = percentile(ms, 50)
        step = "" if last is None else f"{p50 - last:+8.2f}"
        spread = f"{percentile(ms, 25):.1f}-{percentile(ms, 75):.1f}"
        print(f"{name[:40]:40} {p50:8.2f} {step:>8} {p50 / base:9.2f}x {spread:>14}")
        last = p50
    ours = percentile(samples[DAEMON], 50)
    for what, name in (("its bare chain", BARE_CHAIN), ("its bare chain in a group", WITH_GROUP)):
        ratio = ours / percentile(samples[name], 50)
        print(f"goal: the daemon <= 1.5x {what}: {ratio:.2f}x, {verdict(ratio <= 1.5)}")
    print(f"goal: the daemon <= 2x minimal bwrap: {ours / base:.2f}x, {verdict(ours <= 2 * base)}")


if __name__ == "__main__":
    main()
