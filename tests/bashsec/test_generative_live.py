"""Every combination of the generative test really runs its payload in bash.

Without this, test_generative could pass on combinations that are harmless anyway (a
context bash does not evaluate, a smuggler that never delivers). Each combination runs
in real bash, in a scratch directory of its own, inside the sandbox and behind the
guard of the sandbox suite (which refuses, exit 99, unless it is inside): the payload
`touch p` must leave `p` behind. The classifier calls none of them read-only
(test_generative).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.bashsec.test_generative import COMBINATIONS

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

GUARD = Path(__file__).resolve().parent.parent / "sandbox" / "guard.py"
SYSTEM_PYTHON = "/usr/bin/python3"

# Runs inside the sandbox: each command in a fresh directory holding `f` (the payload).
DRIVER = r"""
import json, os, shutil, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

base = sys.argv[1]
commands = json.load(open(os.path.join(base, "commands.json")))

def one(item):
    i, command = item
    d = os.path.join(base, f"c{i}")
    os.mkdir(d)
    with open(os.path.join(d, "f"), "w") as fh:
        fh.write("a[$(touch p)]\n")
    try:
        subprocess.run(["bash", "-c", command], cwd=d, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
    except subprocess.TimeoutExpired:
        pass
    ran = os.path.exists(os.path.join(d, "p"))
    shutil.rmtree(d, ignore_errors=True)
    return ran

with ThreadPoolExecutor(4) as pool:
    print(json.dumps(list(pool.map(one, enumerate(commands)))))
"""


def _scratch() -> str:
    """A host dir the sandbox uid can write, outside /tmp (which the sandbox replaces)."""
    from agentd_sandbox.identity import DEFAULT_UID

    path = tempfile.mkdtemp(prefix="agentd-bashsec-live-", dir="/var/tmp")
    os.chmod(path, 0o755)
    if os.geteuid() == 0:
        os.chown(path, DEFAULT_UID, DEFAULT_UID)
    return path


def test_every_combination_runs_its_payload_in_bash() -> None:
    from agentd_sandbox import Limits, SandboxPolicy, spawn

    ws = _scratch()
    try:
        commands = [command for _, command in COMBINATIONS]
        for name, text in (("commands.json", json.dumps(commands)), ("driver.py", DRIVER)):
            Path(ws, name).write_text(text)
        shutil.copy(GUARD, Path(ws, "guard.py"))
        for name in ("commands.json", "driver.py", "guard.py"):
            os.chmod(Path(ws, name), 0o644)
        host_pidns = str(os.stat("/proc/self/ns/pid").st_ino)
        argv = [SYSTEM_PYTHON, f"{ws}/guard.py", host_pidns, "--"]
        argv += [SYSTEM_PYTHON, f"{ws}/driver.py", ws]
        policy = SandboxPolicy(writable=[ws], cwd=ws, limits=Limits(wall_seconds=300))

        async def go() -> tuple[int, bytes, bytes]:
            proc = await spawn(policy, argv)
            out, err = await asyncio.gather(proc.stdout.read(), proc.stderr.read())
            return await proc.wait(), out, err

        rc, out, err = asyncio.run(go())
        assert rc == 0, err.decode(errors="replace")[-2000:]
        ran = json.loads(out)
        dead = [label for (label, _), r in zip(COMBINATIONS, ran, strict=True) if not r]
        assert not dead, f"{len(dead)} of {len(ran)} never ran the payload: {dead[:10]}"
    finally:
        shutil.rmtree(ws, ignore_errors=True)
