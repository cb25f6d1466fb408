"""One session's fork bomb, memory hog or tmpfs filler never stops another session's
Bash or the daemon: what a session may use in all is its control group's, not a limit
per uid or per process (issue 17 "Limits per session", issue 18 item 2).

Through the real daemon, every attack behind tests/sandbox/guard.py (it proves it runs
inside the sandbox first). Both sessions run as the same sandbox uid (65534), which is
what made one session's processes count against the other's on main (RLIMIT_NPROC is
per uid), and the per-process memory limit let N processes take N times it. The
limits are small so that the machine running the tests never feels them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.sandboxing.groups import tree_name
from agentd_client import Client
from agentd_sandbox import cgroups
from tests.sandbox._sandbox_attack import bash, guarded_py, guarded_sh
from tests.sandbox.conftest import sandbox_dir
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import wait_until

MiB = 1024 * 1024
SESSION_MEMORY = 256 * MiB
SESSION_PROCESSES = 64
# The per-process ceilings main applied (and this branch keeps where no group holds).
PER_PROCESS_MEMORY = 128 * MiB
CONFIG = f"""
session_memory_bytes = {SESSION_MEMORY}
session_processes = {SESSION_PROCESSES}
bash_memory_bytes = {PER_PROCESS_MEMORY}
bash_processes = {SESSION_PROCESSES}
sandbox_tmp_bytes = {192 * MiB}
sandbox_shm_bytes = {192 * MiB}
session_tmp_bytes = {64 * MiB}
"""

pytestmark = pytest.mark.skipif(
    cgroups.detect() is None, reason="no cgroup hierarchy this test may write"
)


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    base = tmp_path_factory.mktemp("agentd-limits")
    config = base / "config.toml"
    config.write_text(CONFIG)
    daemon = start_daemon(base, ["--config", str(config)])
    yield daemon
    assert daemon.stop() == 0, daemon.log
    assert "Traceback" not in daemon.log, daemon.log


@pytest.fixture
def c(limited: DaemonProcess) -> Iterator[Client]:
    with Client(limited.socket, timeout=120) as client:
        yield client


@pytest.fixture
def two(c: Client) -> Iterator[tuple[str, str]]:
    """Two sessions, A (the attacker) and B, each in a workspace of its own."""
    roots = [sandbox_dir("agentd-lim-a-"), sandbox_dir("agentd-lim-b-")]
    a, b = (c.create_session(r, permission_mode="bypassPermissions").id for r in roots)
    yield a, b
    for sid in (a, b):
        c.close_session(sid)
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)


def group_dirs(daemon: DaemonProcess, sid: str) -> dict[str, str]:
    """The session's group in each hierarchy, as the daemon names it."""
    tree = cgroups.Tree(cgroups.detect(), tree_name(daemon.state_dir))
    return tree.group(sid).dirs


def background(c: Client, sid: str, command: str) -> str:
    r = c.run_tool(sid, "Bash", {"command": command, "run_in_background": True})
    assert not r.is_error, r.text
    return str(r.data["backgroundTaskId"])


def output_of(c: Client, sid: str, task_id: str) -> str:
    task = next(t for t in c.list_tasks(sid) if t.id == task_id)
    return Path(task.output_path).read_text(errors="replace")


def wait_output(c: Client, sid: str, task_id: str, marker: str) -> str:
    assert wait_until(lambda: marker in output_of(c, sid, task_id), 60), output_of(c, sid, task_id)
    return output_of(c, sid, task_id)


def others_still_work(c: Client, b: str) -> None:
    """Another session of the same sandbox uid starts Bash, and the daemon answers."""
    r = bash(c, b, "echo other-session-ok; id -u")
    assert not r.is_error and "other-session-ok" in r.text, r.text
    assert c.status().pid > 0


FORK_BOMB = """
import os, signal, sys
n = 0
try:
    while n < 400:
        if os.fork() == 0:
            os.close(1); signal.pause(); os._exit(0)
        n += 1
except OSError as e:
    print("FORK FAILED after", n, "errno", e.errno, flush=True)
print("HOLDING", n, flush=True)
signal.pause()
"""


def test_a_fork_bomb_stops_at_its_sessions_group(c: Client, two, limited) -> None:
    a, b = two
    task = background(c, a, guarded_py(FORK_BOMB))
    out = wait_output(c, a, task, "HOLDING")
    assert "FORK FAILED after" in out, out
    assert int(out.split("HOLDING ")[1].split()[0]) < SESSION_PROCESSES
    pids = group_dirs(limited, a).get("pids")
    if pids:  # the group counted the bomb: it is at its ceiling
        assert int(Path(pids, "pids.current").read_text()) >= SESSION_PROCESSES - 2
    others_still_work(c, b)
    c.run_tool(a, "TaskStop", {"task_id": task})


MEMORY_HOG = f"""
import os, signal
pids = []
for i in range(4):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        block = b"x" * {100 * MiB}  # written: every page is resident
        os.write(w, b"x")
        signal.pause()
    os.close(w)
    got = os.read(r, 1)
    print("CHILD", i, "ALLOCATED" if got else "KILLED", flush=True)
    pids.append(pid)
# A child killed since it allocated (the group's OOM takes the largest) holds nothing;
# the kill may land a moment after the allocation that caused it: counted until it
# settles (10 s at most).
import time
dead, deadline = set(), time.monotonic() + 10
while True:
    for pid in pids:
        if pid not in dead and os.waitpid(pid, os.WNOHANG) != (0, 0):
            dead.add(pid)
    alive = len(pids) - len(dead)
    if alive * {100 * MiB} < {SESSION_MEMORY} or time.monotonic() > deadline:
        break
    time.sleep(0.2)
print("HOLDING", alive, "ALIVE", flush=True)
signal.pause()
"""


def test_a_memory_hog_is_bounded_by_the_session_not_per_process(c: Client, two, limited) -> None:
    """4 processes of 100 MiB each are each under the per-process limit (128 MiB) that
    main applied, and together over the session's 256 MiB."""
    a, b = two
    task = background(c, a, guarded_py(MEMORY_HOG))
    out = wait_output(c, a, task, "ALIVE")
    alive = int(out.split("HOLDING ")[1].split()[0])
    assert alive * 100 * MiB < SESSION_MEMORY, out  # main: all 4 (400 MiB) held
    others_still_work(c, b)
    c.run_tool(a, "TaskStop", {"task_id": task})


def test_tmp_and_shm_pages_count_in_the_sessions_memory(c: Client, two, limited) -> None:
    """/tmp and /dev/shm are RAM: what a background task keeps in its /tmp is charged to
    the session, so another of its commands cannot put as much again in /dev/shm."""
    a, b = two
    holder = background(
        c, a, guarded_sh(f"head -c {150 * MiB} /dev/zero > /tmp/held && echo HOLD''ING; sleep 600")
    )
    wait_output(c, a, holder, "HOLDING")
    memory = group_dirs(limited, a).get("memory")
    if memory:
        usage = Path(memory, "memory.usage_in_bytes")
        usage = usage if usage.exists() else Path(memory, "memory.current")
        assert int(usage.read_text()) >= 150 * MiB  # the tmpfs pages are the session's
    # The victim of the group's OOM is the writer (highest oom_score_adj), not the holder.
    second = bash(
        c,
        a,
        guarded_sh(
            "echo 1000 > /proc/self/oom_score_adj; "
            f"head -c {150 * MiB} /dev/zero > /dev/shm/more && echo SECOND' 'WRITTEN; true"
        ),
    )
    assert "SECOND WRITTEN" not in second.text, second.text
    others_still_work(c, b)
    c.run_tool(a, "TaskStop", {"task_id": holder})


def test_each_ram_backed_place_is_sized(c: Client, two) -> None:
    """/tmp and /dev/shm of a sandbox, and the session's temp dir, hold no more than
    their size (main: 12 GiB tmpfs each, and the temp dir on the host's disk)."""
    a, _ = two
    r = bash(
        c,
        a,
        guarded_sh(
            f"head -c {200 * MiB} /dev/zero > /tmp/x || echo TMP' 'FULL; rm -f /tmp/x; "
            f"head -c {200 * MiB} /dev/zero > /dev/shm/x || echo SHM' 'FULL; rm -f /dev/shm/x; "
            f"head -c {100 * MiB} /dev/zero > \"$TMPDIR/x\" || echo TMPDIR' 'FULL; "
            'df -k /tmp /dev/shm "$TMPDIR"'
        ),
    )
    for full in ("TMP FULL", "SHM FULL", "TMPDIR FULL"):
        assert full in r.text, r.text
    assert "No space left on device" in r.text, r.text


def test_the_sandbox_neither_sees_nor_writes_its_group(c: Client, two, limited) -> None:
    a, _ = two
    probe = (
        "cat /proc/self/cgroup; echo CGROUPFS: $(ls -A /sys/fs/cgroup | wc -l); "
        "mkdir /sys/fs/cgroup/x 2>/dev/null && echo MADE; "
        "echo 0 > /sys/fs/cgroup/cgroup.procs 2>/dev/null && echo JOINED; "
        "mount -t cgroup2 none /tmp 2>/dev/null && echo MOUNTED; true"
    )
    r = bash(c, a, guarded_sh(probe))
    assert "CGROUPFS: 0" in r.text, r.text
    for line in r.text.splitlines():
        if line[:1].isdigit() and line.count(":") >= 2:
            assert line.rsplit(":", 1)[1] == "/", r.text  # its own group is its root
    for done in ("MADE", "JOINED", "MOUNTED"):
        assert done not in r.text, r.text
    # From the host: the command's processes were in the session's group.
    task = background(c, a, guarded_sh("echo STARTED; sleep 600"))
    wait_output(c, a, task, "STARTED")
    dirs = group_dirs(limited, a)
    for directory in set(dirs.values()):
        procs = Path(directory, "cgroup.procs").read_text().split()
        cmdlines = [_cmdline(int(p)) for p in procs]
        assert any("sleep 600" in cmd for cmd in cmdlines), cmdlines
    c.run_tool(a, "TaskStop", {"task_id": task})


def test_the_group_holds_the_configured_limits(c: Client, two, limited) -> None:
    """Processes, memory and CPU weight as configured (cpu weight 100: v1's 1024 shares)."""
    a, _ = two
    bash(c, a, "true")
    dirs = group_dirs(limited, a)
    v2 = cgroups.detect().version == 2
    expected = {
        "pids": ("pids.max", SESSION_PROCESSES),
        "memory": ("memory.max" if v2 else "memory.limit_in_bytes", SESSION_MEMORY),
        "cpu": ("cpu.weight" if v2 else "cpu.shares", 100 if v2 else 1024),
    }
    assert dirs, "no group"
    for controller, directory in dirs.items():
        name, value = expected[controller]
        assert int(Path(directory, name).read_text()) == value, (controller, name)


def test_a_closed_sessions_group_is_gone_with_what_ran_in_it(c: Client, limited) -> None:
    root = sandbox_dir("agentd-lim-close-")
    try:
        sid = c.create_session(root, permission_mode="bypassPermissions").id
        task = background(c, sid, guarded_sh("echo STARTED; sleep 600"))
        wait_output(c, sid, task, "STARTED")
        dirs = set(group_dirs(limited, sid).values())
        assert all(os.path.isdir(d) for d in dirs)
        pids = [int(p) for d in dirs for p in Path(d, "cgroup.procs").read_text().split()]
        assert pids
        c.close_session(sid)
        assert not any(os.path.exists(d) for d in dirs)
        assert wait_until(lambda: not any(_alive(p) for p in pids), 10)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1][0] != "Z"
