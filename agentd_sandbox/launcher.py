"""The sandbox chain in front of bwrap in one exec: agentd-launch (launch/agentd-launch.c,
built by `make`), for a root spawner dropping to the sandbox identity.

The argv chain it replaces (runner.py) execs `sh` (the control group), `nsenter` (the
session's network), `setpriv` (the parent-death signal), `unshare --pid --kill-child`,
`setpriv` (the identity) and `prlimit` before bwrap: a millisecond or more each on a
busy machine. agentd-launch does the same steps in the same order in one process (and
its fork, pid 1 of the outer pid namespace): see the C file's header for each step and
what a failure says. Where it is not built (a wheel installed without `make`), or the
spawner is not root, the argv chain is used.
"""

from __future__ import annotations

import os
import stat
import subprocess

from .identity import Identity
from .limits import rlimit_name, rlimits
from .policy import SandboxPolicy

# Where `make` builds it, beside this module.
HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch", "agentd-launch")


def helper() -> str | None:
    """agentd-launch, if built, safe to run as root (a regular executable file of root's,
    or this process's owner's, that nobody else may write) and runnable here (a binary
    built elsewhere, for another libc, is not): tried once per build."""
    try:
        st = os.stat(HELPER)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or not st.st_mode & stat.S_IXUSR:
        return None
    if st.st_uid not in (0, os.geteuid()) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    build = (HELPER, st.st_dev, st.st_ino, st.st_mtime_ns)
    if build not in _runs:
        _runs[build] = _runs_here(HELPER)
    return HELPER if _runs[build] else None


# (path, device, inode, mtime) of a build -> whether it runs here.
_runs: dict[tuple[str, int, int, int], bool] = {}


def _runs_here(path: str) -> bool:
    try:
        done = subprocess.run(
            [path, "--pidns", "--", "/bin/true"], capture_output=True, timeout=30, env={}
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def prefix(policy: SandboxPolicy, ident: Identity) -> list[str] | None:
    """argv prefix (ending in `--`) that does the chain's steps for `policy` and execs
    what follows (bwrap) as `ident`; None when the argv chain must do it (no helper, or
    a spawner that is not root, whose pid namespace needs a user namespace too)."""
    if os.geteuid() != 0 or not ident.switch:
        return None
    path = helper()
    if path is None:
        return None
    argv = [path]
    for procs in policy.cgroup_procs:
        argv += ["--cgroup", procs]
    if not policy.network and policy.netns:
        argv += ["--netns", policy.netns]
    argv += ["--pidns", "--uid", str(ident.uid), "--gid", str(ident.gid)]
    if ident.groups:
        argv += ["--groups", ",".join(str(g) for g in ident.groups)]
    for res, soft, hard in rlimits(policy.limits):
        argv += ["--rlimit", f"{rlimit_name(res)}={soft}:{hard}"]
    return [*argv, "--"]
