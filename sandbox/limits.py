"""Resource limits: rlimits set by `prlimit` between the identity drop and bwrap.

cgroup v2 would bound the whole tree (memory, pids, cpu) and kill it at once, but it
needs a delegated, writable cgroup v2; without one (cgroup v1 hosts) rlimits hold, set
by exec'ing util-linux `prlimit` in front of bwrap so no Python runs between fork and
exec (preexec_fn is unsafe in a threaded daemon). rlimits are inherited by bwrap and
everything it starts.
"""

from __future__ import annotations

import os
import resource

from . import binaries
from .policy import Limits

# Name of each rlimit as prlimit(1) spells its option.
_PRLIMIT_OPTION = {
    resource.RLIMIT_CORE: "core",
    resource.RLIMIT_NPROC: "nproc",
    resource.RLIMIT_DATA: "data",
    resource.RLIMIT_FSIZE: "fsize",
    resource.RLIMIT_NOFILE: "nofile",
    resource.RLIMIT_CPU: "cpu",
}


def rlimits(limits: Limits) -> list[tuple[int, int, int]]:
    """(resource, soft, hard) for `limits`; core dumps always 0.

    Memory is RLIMIT_DATA rather than RLIMIT_AS: runtimes that reserve large address
    ranges (Go, the JVM, V8) still start, while heap and anonymous memory are bounded.
    CPU gets SIGXCPU at the soft limit and SIGKILL a second later.
    """
    pairs = [(resource.RLIMIT_CORE, 0, 0)]
    if limits.processes is not None:
        pairs.append((resource.RLIMIT_NPROC, limits.processes, limits.processes))
    if limits.memory_bytes is not None:
        pairs.append((resource.RLIMIT_DATA, limits.memory_bytes, limits.memory_bytes))
    if limits.file_size_bytes is not None:
        size = limits.file_size_bytes
        pairs.append((resource.RLIMIT_FSIZE, size, size))
    if limits.open_files is not None:
        pairs.append((resource.RLIMIT_NOFILE, limits.open_files, limits.open_files))
    if limits.cpu_seconds is not None:
        pairs.append((resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1))
    return pairs


def prlimit_path() -> str | None:
    """util-linux prlimit, if installed."""
    return binaries.find("prlimit")


def prlimit_prefix(limits: Limits) -> list[str]:
    """argv prefix that sets `limits` on itself and execs the rest."""
    path = prlimit_path()
    if path is None:
        return []
    opts = [f"--{_PRLIMIT_OPTION[res]}={soft}:{hard}" for res, soft, hard in rlimits(limits)]
    return [path, *opts, "--"]


def apply_in_child(limits: Limits) -> None:
    """Set `limits` on the calling process (preexec_fn fallback when prlimit is missing)."""
    for res, soft, hard in rlimits(limits):
        resource.setrlimit(res, (soft, hard))


def cgroup_v2_delegated() -> bool:
    """Whether a writable cgroup v2 with memory and pids controllers is ours to use."""
    path = _own_cgroup_v2_dir()
    if path is None:
        return False
    try:
        with open(os.path.join(path, "cgroup.controllers")) as f:
            controllers = set(f.read().split())
    except OSError:
        return False
    return {"memory", "pids"} <= controllers and os.access(path, os.W_OK)


def mode() -> str:
    """Which mechanism enforces limits here: "cgroup2" or "rlimit".

    Only rlimits are implemented so far; a delegated cgroup v2 is detected and
    reported by `check` but not used yet.
    """
    return "rlimit"


def _own_cgroup_v2_dir() -> str | None:
    mount = None
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split(" - ")
                if len(fields) == 2 and fields[1].split()[0] == "cgroup2":
                    mount = line.split()[4]
                    break
        if mount is None:
            return None
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return os.path.join(mount, line[3:].strip().lstrip("/"))
    except OSError:
        return None
    return None
