"""Fixtures for the sandbox suite: workspaces the sandbox uid can use, the compiled
attack program, the guard every attack runs through, and a helper to run and capture.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentd_sandbox import Limits, SandboxPolicy, spawn
from agentd_sandbox.identity import DEFAULT_UID

HERE = Path(__file__).resolve().parent
NOT_SANDBOXED = 99
SYSTEM_PYTHON = "/usr/bin/python3"

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")


def sandbox_dir(prefix: str) -> str:
    """A host dir the sandbox uid owns, outside /tmp (which the sandbox replaces)."""
    path = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
    os.chmod(path, 0o755)
    if os.geteuid() == 0:
        os.chown(path, DEFAULT_UID, DEFAULT_UID)
    return path


def _guard_copy() -> str:
    """guard.py where the sandbox can see it: the checkout may live under /tmp, which the
    sandbox replaces with its own tmpfs."""
    directory = sandbox_dir("agentd-sbx-guard-")
    atexit.register(shutil.rmtree, directory, True)
    path = os.path.join(directory, "guard.py")
    shutil.copy(HERE / "guard.py", path)
    os.chmod(path, 0o644)
    return path


GUARD = _guard_copy()


@pytest.fixture
def ws() -> Iterator[str]:
    path = sandbox_dir("agentd-sbx-ws-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def host_pidns() -> str:
    return str(os.stat("/proc/self/ns/pid").st_ino)


@pytest.fixture(scope="session")
def attacks_bin() -> Iterator[str]:
    """attacks.c compiled on the host (compiling is harmless; running happens inside)."""
    out = sandbox_dir("agentd-sbx-bin-")
    binary = os.path.join(out, "attacks")
    subprocess.run(["gcc", "-O1", "-o", binary, str(HERE / "attacks.c")], check=True)
    os.chmod(binary, 0o755)
    yield binary
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture
def guarded(host_pidns: str):
    """argv prefix that refuses (exit 99) unless it runs inside the sandbox."""

    def wrap(*argv: str) -> list[str]:
        return [SYSTEM_PYTHON, GUARD, host_pidns, "--", *argv]

    return wrap


@pytest.fixture
def guarded_py(guarded):
    """Run Python code inside the sandbox, behind the guard."""

    def wrap(code: str, *args: str) -> list[str]:
        return guarded(SYSTEM_PYTHON, "-c", code, *args)

    return wrap


@dataclass
class Result:
    rc: int
    out: str
    err: str
    timed_out: bool


# What bwrap says when a host mount it was copying went meanwhile (another daemon's
# session temp dir unmounted and removed): nothing of the command ran. The Bash tool
# starts again on it (agentd/runs/launch.py); these tests, which test the sandbox and not
# its start, do the same.
_HOST_MOUNT_WENT = "bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags"


# Or a host path it was to cover (another test daemon's socket) went between the policy's
# look at it and bwrap's mount.
_HOST_PATH_WENT = re.compile(r"bwrap: Can't (?:mkdir parents for|create file at) (/[^:]*):")


def _start_raced(rc: int, out: bytes, text: str) -> bool:
    if rc != 1 or out:
        return False
    went = _HOST_PATH_WENT.match(text)
    return text.startswith(_HOST_MOUNT_WENT) or (
        went is not None and not os.path.lexists(went.group(1))
    )


async def run_capture(policy: SandboxPolicy, argv: list[str]) -> Result:
    for _ in range(3):
        proc = await spawn(policy, argv)
        out, err = await asyncio.gather(proc.stdout.read(), proc.stderr.read())
        rc = await proc.wait()
        text = err.decode(errors="replace")
        if not _start_raced(rc, out, text):
            break
    return Result(rc, out.decode(errors="replace"), text, proc.timed_out)


def policy(ws: str | None = None, **kwargs) -> SandboxPolicy:
    """A policy with `ws` writable and a safety wall limit."""
    limits = kwargs.pop("limits", None) or Limits(wall_seconds=20)
    return SandboxPolicy(writable=[ws] if ws else [], cwd=ws, limits=limits, **kwargs)


__all__ = ["GUARD", "NOT_SANDBOXED", "SYSTEM_PYTHON", "sys"]
