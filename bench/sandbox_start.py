"""Start-up of a sandboxed `true`: this tree's sandbox beside another checkout's, same run.

    .venv/bin/python bench/sandbox_start.py --baseline-tree /path/to/older/checkout [--quick]

Each round spawns, from this process, `true` under the policy the daemon builds for a
session on a git workspace (agentd.sandboxing.policy.policy_for), once with this tree's
agentd_sandbox and once with the baseline tree's (its `agentd_sandbox/` loaded under
another name), interleaved so the machine's noise falls on both alike. Prepare (argv,
seccomp fds) is included: it is part of every Bash call.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from types import ModuleType

from _common import percentile, workspace


def _load_tree(tree: str) -> ModuleType:
    # The package's folder: agentd_sandbox/ (sandbox/ in older checkouts).
    path = os.path.join(tree, "agentd_sandbox")
    if not os.path.isdir(path):
        path = os.path.join(tree, "sandbox")
    spec = importlib.util.spec_from_file_location(
        "baseline_sandbox", os.path.join(path, "__init__.py"), submodule_search_locations=[path]
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_sandbox"] = module
    spec.loader.exec_module(module)
    return module


def _once(runner: ModuleType, policy: object) -> None:
    launch = runner.prepare(policy, ["true"])
    kwargs = {**launch.popen_kwargs, "stderr": subprocess.PIPE}
    try:
        proc = subprocess.Popen(launch.argv, stdin=subprocess.DEVNULL, **kwargs)
    finally:
        launch.close()
    err = proc.stderr.read() if proc.stderr else b""
    assert proc.wait() == 0, err.decode(errors="replace")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-tree", required=True)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds, warm = (40, 5) if args.quick else (200, 20)

    from agentd.foundation.config import Config
    from agentd.sandboxing import policy as sandbox_policy
    from agentd.sandboxing import runtime
    from agentd.sessions.session import Session
    from agentd_sandbox import runner

    old = _load_tree(args.baseline_tree)
    ws = workspace()
    subprocess.run(["git", "init", "-q", ws], check=True)
    subprocess.run(["chown", "-R", f"{os.stat(ws).st_uid}:{os.stat(ws).st_gid}", ws], check=True)
    state = tempfile.mkdtemp(prefix="agentd-bench-state-")
    config = Config(socket_path=os.path.join(state, "run", "agentd.sock"), state_dir=state)
    session = Session(id="bench", workspace_roots=[ws], cwd=ws, owner_uid=os.getuid())
    tmp_dir = sandbox_policy.session_tmp_dir(session, config, runtime.bare())
    new_policy = sandbox_policy.policy_for(session, config, tmp_dir, runtime.bare())
    known = {f.name for f in dataclasses.fields(old.SandboxPolicy)}
    common = {k: v for k, v in vars(new_policy).items() if k in known and k != "limits"}
    common.update(read_only=[], ro_binds=[], hidden=[state, os.path.dirname(config.socket_path)])
    common["writable"] = [ws, tmp_dir]
    old_policy = old.SandboxPolicy(**{k: v for k, v in common.items() if k in known})
    old_limits = {f.name for f in dataclasses.fields(old.Limits)}
    limits = dataclasses.asdict(new_policy.limits)
    old_policy.limits = old.Limits(**{k: v for k, v in limits.items() if k in old_limits})
    fns = {"baseline tree": lambda: _once(old.runner, old_policy),
           "this tree": lambda: _once(runner, new_policy)}  # fmt: skip
    try:
        for fn in fns.values():
            for _ in range(warm):
                fn()
        samples: dict[str, list[float]] = {name: [] for name in fns}
        failed: list[str] = []
        for _ in range(rounds):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                try:
                    fn()
                except AssertionError as exc:
                    # bwrap copies every host mount; one another process removed while
                    # bwrap walked the copy fails that start (not counted, not timed).
                    failed.append(f"{name}: {exc}")
                    continue
                samples[name].append((time.perf_counter() - t0) * 1000)
    finally:
        for path in (ws, state, tmp_dir):
            shutil.rmtree(path, ignore_errors=True)
    base = percentile(samples["baseline tree"], 50)
    print(f"sandboxed `true`, {rounds} interleaved rounds after {warm} warm-up")
    if failed:
        print(f"{len(failed)} starts failed and were not counted; the first: {failed[0]}")
    print(f"{'':16} {'p50 ms':>8} {'p99 ms':>8} {'vs baseline':>12}")
    for name, ms in samples.items():
        p50 = percentile(ms, 50)
        print(f"{name:16} {p50:8.2f} {percentile(ms, 99):8.2f} {p50 / base:11.2f}x")


if __name__ == "__main__":
    main()
