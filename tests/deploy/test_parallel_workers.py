"""A parallel run's workers mount in namespaces of their own (tests/support/mounts.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace needs root")
def test_a_worker_mounts_where_no_other_worker_sees() -> None:
    # In a child, so this test's own process is left as it was (a serial run has no
    # worker namespace to check).
    probe = (
        "import os, sys; sys.path.insert(0, '.');"
        "from tests.support.mounts import private_namespace;"
        "before = os.readlink('/proc/self/ns/mnt');"
        "assert private_namespace();"
        "print(before != os.readlink('/proc/self/ns/mnt'))"
    )
    root = Path(__file__).resolve().parents[2]
    moved = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, check=True
    )
    assert moved.stdout.strip() == "True", moved.stderr
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # This worker itself did it at start-up: its namespace is not its controller's.
        mine = os.readlink("/proc/self/ns/mnt")
        assert mine != os.readlink(f"/proc/{os.getppid()}/ns/mnt")
