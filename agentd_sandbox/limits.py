"""Resource limits per process: rlimits set by `prlimit` between the identity drop and bwrap.

What a whole session may use (processes, memory, CPU share) is its control group's
(cgroups, joined first in the chain: see runner); rlimits hold what is per process
(file size, open files, core dumps, CPU seconds) and, where no group holds them,
processes and memory. They are set by exec'ing util-linux `prlimit` in front of bwrap
so no Python runs between fork and exec (preexec_fn is unsafe in a threaded daemon),
and are inherited by bwrap and everything it starts.
"""

from __future__ import annotations

import resource

from . import binaries, cgroups
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


def rlimit_name(res: int) -> str:
    """How prlimit(1) (and agentd-launch) name `res`."""
    return _PRLIMIT_OPTION[res]


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


def mode() -> str:
    """What bounds a whole sandbox's (a session's) processes and memory here: "cgroup1"
    or "cgroup2" when a caller can give it a control group (cgroups.detect finds a
    writable hierarchy holding memory and pids), else "rlimit" (per process, per uid)."""
    hierarchy = cgroups.detect()
    if hierarchy is None or not hierarchy.controllers & cgroups.hierarchy.ESSENTIAL:
        return "rlimit"
    return f"cgroup{hierarchy.version}"
