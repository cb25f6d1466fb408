"""No orphan at any moment (issue 7, item 8).

The process that starts a sandbox is killed at random instants of the sandbox's
start-up, hundreds of times: before setpriv arms its parent-death signal, while bwrap's
init waits on its eventfd, before the init arms its own. Nothing the sandbox started may
survive any of them (before the fix: an init stuck in eventfd_read, or a whole sandbox
left running with nothing watching it).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from tests.sandbox.conftest import GUARD, SYSTEM_PYTHON, sandbox_dir
from tests.support.processes import wait_gone

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
HOST_PIDNS = str(os.stat("/proc/self/ns/pid").st_ino)
ROUNDS = 300
BUDGET_SECONDS = 60.0

# A forking server: each line read makes a child that starts a sandbox and says its pid;
# the test kills that child (the spawner) a random moment later. Forking a warm process
# puts the kills within the sandbox's start-up, not within Python's.
ZYGOTE = textwrap.dedent("""
    import os, sys
    from agentd_sandbox import SandboxPolicy, Limits, run
    ws, guard, pidns, python = sys.argv[1:5]
    def policy():
        return SandboxPolicy(writable=[ws], limits=Limits(wall_seconds=300))
    run(policy(), ["true"])  # warm the caches the children inherit
    for line in sys.stdin:
        marker = line.strip()
        pid = os.fork()
        if pid == 0:
            print(os.getpid(), flush=True)
            argv = [python, guard, pidns, "--", "sh", "-c",
                    f"sleep {marker} & sleep {marker}"]
            run(policy(), argv)
            os._exit(0)
        os.waitpid(pid, 0)
        print("REAPED", flush=True)
""")


def test_killing_the_spawner_at_any_instant_leaves_nothing() -> None:
    ws = sandbox_dir("agentd-sec-orphans-")
    base = f"{random.randrange(10**5, 10**6)}"
    zygote = subprocess.Popen(
        [sys.executable, "-c", ZYGOTE, ws, GUARD, HOST_PIDNS, SYSTEM_PYTHON],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert zygote.stdin and zygote.stdout
    rounds = 0
    deadline = time.monotonic() + BUDGET_SECONDS
    try:
        while rounds < ROUNDS and time.monotonic() < deadline:
            marker = f"{base}.{rounds}{uuid.uuid4().int % 10}"
            zygote.stdin.write(marker + "\n")
            zygote.stdin.flush()
            spawner = int(zygote.stdout.readline())
            # Start-up takes ~10-30 ms here; kill anywhere in it, and a little after.
            time.sleep(random.uniform(0, 0.04))
            with contextlib.suppress(ProcessLookupError):  # a sandbox that failed early
                os.kill(spawner, signal.SIGKILL)
            assert zygote.stdout.readline().strip() == "REAPED"
            rounds += 1
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=30)
        shutil.rmtree(ws, ignore_errors=True)
    assert rounds >= 100, f"only {rounds} rounds in {BUDGET_SECONDS}s"
    marker = f"{base}."
    wait_gone(marker)
