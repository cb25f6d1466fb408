"""Host processes by a marker on their command line: what a test looks for when it
checks that a command runs, or that nothing it started is left.

A test gives each command a marker no other process has (`sleep 7331.25`, a random
number), then looks it up in /proc. A marker with a NUL ("sleep\\0123") matches whole
arguments; any other is looked up in the command line with its arguments joined by
spaces (so "sleep 123" matches `sleep 123` and `bash -c 'sleep 123'` alike).
"""

from __future__ import annotations

import os

from tests.support.waiting import wait_until


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line holds `marker` (this test process aside)."""
    needle = marker.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if needle in (cmdline if b"\0" in needle else cmdline.replace(b"\0", b" ")):
            found.append(int(entry))
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "(gone)"


def wait_present(marker: str, timeout: float = 15) -> list[int]:
    """The processes with `marker`, once there are some: a sandbox still starting passes
    through several execs, during which its command line can read as empty."""
    return wait_until(lambda: processes_with(marker), timeout, f"a process with {marker!r}")


def wait_gone(marker: str, timeout: float = 15) -> None:
    """Until no process has `marker`, in two scans in a row (one scan can miss a process
    mid-exec); TimeoutError naming those left. The kernel reaps asynchronously."""
    wait_until(
        lambda: not processes_with(marker) and not processes_with(marker),
        timeout,
        lambda: (
            f"no process with {marker!r}; left: "
            + repr({pid: command_line(pid) for pid in processes_with(marker)})
        ),
        interval=0.05,
    )
