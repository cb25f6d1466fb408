"""Helpers the daemon benches share: a real daemon, a sandbox-reachable workspace, stats.

Imported as `_common` by the scripts beside it (`bench/` is sys.path[0] when one of them
runs as `python bench/NAME.py`); puts the repo root on sys.path so `tests.support.daemon` imports.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.daemon import DaemonProcess, start_daemon  # noqa: E402

SANDBOX_UID = 65534


def workspace() -> str:
    """A workspace the sandbox's uid (65534 under a root daemon) can enter and write."""
    path = tempfile.mkdtemp(prefix="agentd-bench-ws-", dir="/tmp")
    os.chmod(path, 0o755)
    if os.geteuid() == 0:
        os.chown(path, SANDBOX_UID, SANDBOX_UID)
    return path


@contextlib.contextmanager
def daemon(wrapper: list[str] | None = None) -> Iterator[DaemonProcess]:
    """A real agentd process on a temp socket and state dir, stopped and removed at the end;
    `wrapper` goes before its command line (read_rtt.py runs another tree's daemon so)."""
    base = Path(tempfile.mkdtemp(prefix="agentd-bench-"))
    proc = start_daemon(base, wrapper=wrapper)
    try:
        yield proc
    finally:
        proc.stop()
        shutil.rmtree(base, ignore_errors=True)


def percentile(samples: list[float], q: float) -> float:
    """The q-th percentile (0..100) of `samples`, nearest rank."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered))))
    return ordered[rank - 1]


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of `pid`, in kB."""
    found: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU time `pid` has used so far (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"
