"""What the least-privilege attacks share: a root-only secret outside the workspace, and
a swapper that runs inside the session's sandbox, through the daemon's own Bash tool.

The swapper is an attack: it goes through tests/sandbox/guard.py, which refuses to run
it anywhere but inside the sandbox.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agentd_client import Client
from tests.support.waiting import wait_until

GUARD = Path(__file__).resolve().parent.parent / "sandbox" / "guard.py"
SYSTEM_PYTHON = "/usr/bin/python3"

# Run inside the sandbox: swap a workspace entry for a symlink to `target` and back,
# as fast as it can, until `stop` appears or the time is up.
SWAPPER = r"""
import os, sys, time
kind, name, target, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
link, real = name + ".lnk", name + ".real"
open(".swap-running", "w").close()
end = time.monotonic() + seconds
swaps = 0
while time.monotonic() < end and not os.path.exists(".swap-stop"):
    try:
        os.symlink(target, link)
    except FileExistsError:
        pass
    if kind == "file":
        os.rename(link, name)
        with open(real, "w") as f:
            f.write("decoy\n")
        os.rename(real, name)
    else:
        os.rename(name, real)
        os.rename(link, name)
        os.rename(name, link)
        os.rename(real, name)
    swaps += 1
print("swaps", swaps, flush=True)
"""


@dataclass(frozen=True)
class Secret:
    """A root-only file and a root-only directory outside the workspace, each holding
    `token` (in the file's bytes, in the directory's one entry name)."""

    token: str
    file: str
    directory: str


@contextmanager
def root_only_secret() -> Iterator[Secret]:
    # /var/tmp, not /tmp: the sandbox has its own /tmp, so a secret there would be hidden
    # from it by the mount alone, and the test would not show that identity matters.
    base = tempfile.mkdtemp(prefix="agentd-lp-secret-", dir="/var/tmp")
    os.chmod(base, 0o755)
    token = f"SECRET{uuid.uuid4().hex}"
    file = os.path.join(base, "secret.txt")
    with open(file, "w") as f:
        f.write(f"{token}\n")
    os.chmod(file, 0o600)
    directory = os.path.join(base, "secretdir")
    os.mkdir(directory, 0o700)
    Path(directory, token).write_text("x\n")
    try:
        yield Secret(token, file, directory)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def host_pidns() -> str:
    return str(os.stat("/proc/self/ns/pid").st_ino)


@contextmanager
def swapping(
    client: Client, session_id: str, workspace: Path, kind: str, name: str, target: str
) -> Iterator[None]:
    """A background Bash task of the session swapping `workspace/name` (kind "file" or
    "dir") for a symlink to `target`, for the duration of the block."""
    for helper in (".swap-running", ".swap-stop"):
        (workspace / helper).unlink(missing_ok=True)
    shutil.copy(GUARD, workspace / ".guard.py")
    (workspace / ".swap.py").write_text(SWAPPER)
    command = (
        f"{SYSTEM_PYTHON} .guard.py {host_pidns()} -- "
        f"{SYSTEM_PYTHON} .swap.py {kind} {name} {target} 120"
    )
    started = client.run_tool(session_id, "Bash", {"command": command, "run_in_background": True})
    assert not started.is_error, started.text
    task_id = started.data["backgroundTaskId"]

    def swapping() -> bool:
        if (workspace / ".swap-running").exists():
            return True
        task = next(t for t in client.list_tasks(session_id) if t.id == task_id)
        if task.status != "running":
            raise AssertionError(f"the swapper ended: {Path(task.output_path).read_text()}")
        return False

    wait_until(swapping, 30, "the swapper started")
    try:
        yield
    finally:
        (workspace / ".swap-stop").touch()
        client.run_tool(session_id, "TaskStop", {"task_id": task_id})
