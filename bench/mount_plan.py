"""What building a start's sandbox costs before bwrap runs: the session's policy (the
protected paths walked beneath the root, as the session's identity) and bwrap's argv
(every path opened as a descriptor, the mount list checked), on a git workspace with
nested git dirs, as the Bash tool does before each start.

    .venv/bin/python bench/mount_plan.py [--rounds N] [--nested N]

Run it with another checkout's venv too (its python, this file's path) for the
baseline: both print the median per start over the same rounds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from agentd.foundation.config import Config
from agentd.sandboxing import policy as sandbox_policy
from agentd.sandboxing import runtime
from agentd.sessions.session import Session
from agentd_sandbox import bwrap, identity


def _workspace(nested: int) -> str:
    ws = tempfile.mkdtemp(prefix="agentd-bench-plan-", dir="/var/tmp")
    subprocess.run(["git", "init", "-q", ws], check=True)
    for i in range(nested):
        subprocess.run(["git", "init", "-q", "--bare", f"{ws}/.git/modules/m{i}"], check=True)
    os.mkdir(f"{ws}/.vscode")
    open(f"{ws}/.bashrc", "w").close()
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", "65534:65534", ws], check=True)
    return ws


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--nested", type=int, default=4)
    args = parser.parse_args()
    ws = _workspace(args.nested)
    scratch = tempfile.mkdtemp(prefix="agentd-bench-plan-", dir="/var/tmp")
    tmp = os.path.join(scratch, "tmp")
    os.mkdir(tmp)
    if os.geteuid() == 0:
        os.chown(tmp, 65534, 65534)
    config = Config(state_dir=os.path.join(scratch, "state"), session_tmp_bytes=0)
    session = Session(id="b" * 32, workspace_roots=[ws], cwd=ws)
    times = []
    bare = runtime.bare()
    try:
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            policy = sandbox_policy.policy_for(session, config, tmp, bare)
            ident = identity.resolve(policy)
            built = bwrap.build_argv(policy, ["true"], identity=ident, bwrap="bwrap")
            if isinstance(built, tuple):  # this tree: (argv, the mount list and its fds)
                built[1].close()
            times.append(time.perf_counter() - t0)
    finally:
        shutil.rmtree(ws, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    print(
        f"{sys.prefix}: median {statistics.median(times) * 1e3:.1f} ms per start over "
        f"{args.rounds} (load {os.getloadavg()[0]:.1f}, {args.nested} nested git dirs)"
    )


if __name__ == "__main__":
    main()
