"""Sessions isolated by construction, and no squattable names (issue 17, items 2 and 7).

Sessions of root-owned workspaces all run as one uid (sandbox_uid), so the uid cannot
keep one session's temp dir and output files from another's sandbox: only what is
mounted did, and one wrong bind showed them. Here a wrong bind is simulated the way a
bug would make it: session B's temp dir and output dir bind-mounted (by the test, on
the host) inside session A's workspace, so A's sandbox has them in view. A, same uid
as B, must still neither read nor write them: each session's directories are root's
and the session's own group's (agentd/sessions/dirs.py, gids.py).

Then a real unprivileged uid takes every name in /tmp the daemon used to rely on
(/tmp/agentd-<uid>, /tmp/agentd-out-<uid>, /tmp/agentd-owners-<uid>) before a daemon
starts; its sessions' commands must run as before, and the squatted names stay the
squatter's. That daemon gets a /tmp of its own (a private mount namespace) so that the
squat disturbs no other daemon on the machine.
"""

# ruff: noqa: F811  (pytest fixtures imported from _sandbox_attack, used as parameters)
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.foundation.config import Config
from agentd_client import Client
from tests.sandbox._sandbox_attack import (  # noqa: F401  (fixtures are used by name)
    Daemon,
    bash,
    guarded_sh,
    sandbox_daemon,
    sec_client,
)
from tests.sandbox.conftest import DEFAULT_UID, sandbox_dir
from tests.support.daemon import start_daemon, top_names_under
from tests.support.waiting import wait_until


def _can_mount() -> bool:
    """Whether this test may make mounts (a bind, a mount namespace): root with
    CAP_SYS_ADMIN, not a container that withholds it."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = ["unshare", "-m", "mount", "-t", "tmpfs", "tmpfs", "/mnt"]
    return subprocess.run(probe, capture_output=True).returncode == 0


pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
    pytest.mark.skipif(not _can_mount(), reason="needs root with CAP_SYS_ADMIN (mounts)"),
]

SECRET = "agentd-iso-secret-" + os.urandom(6).hex()
SQUATTER = 54329  # a uid no account of the machine uses: another local user


def _uid_of(client: Client, sid: str) -> str:
    r = bash(client, sid, guarded_sh("echo UID=$(id -u)."))
    found = re.search(r"UID=([0-9]+)\.", r.text)
    assert found, r.text
    return found.group(1)


@pytest.fixture
def session_b(sec_client: Client) -> Iterator[tuple[str, str, str]]:
    """Session B with a secret in its temp dir and in a task's output file: (id, its
    temp dir, its output dir), as host paths."""
    ws = sandbox_dir("agentd-iso-b-")
    sid = sec_client.create_session(ws, permission_mode="bypassPermissions").id
    r = bash(sec_client, sid, f'echo {SECRET} > "$TMPDIR/secret"; printf %s "$TMPDIR"')
    tmp = r.text.strip().splitlines()[-1]
    started = sec_client.run_tool(
        sid, "Bash", {"command": f"echo {SECRET}", "run_in_background": True}
    )
    task_id = started.data["backgroundTaskId"]

    def done() -> str | None:
        task = next(t for t in sec_client.list_tasks(sid) if t.id == task_id)
        return task.output_path if task.status != "running" else None

    output_path = wait_until(done, 30, "B's task ended")
    assert SECRET in Path(output_path).read_text()
    yield sid, tmp, os.path.dirname(output_path)
    sec_client.close_session(sid)
    shutil.rmtree(ws, ignore_errors=True)


def test_a_wrong_bind_of_another_sessions_dirs_shows_it_nothing(
    sec_client: Client, session_b: tuple[str, str, str]
) -> None:
    sid_b, tmp_b, out_b = session_b
    ws = sandbox_dir("agentd-iso-a-")
    leaks = {"leak-tmp": tmp_b, "leak-out": out_b}
    mounted: list[str] = []
    try:
        for name, source in leaks.items():
            target = os.path.join(ws, name)
            os.mkdir(target)
            os.chown(target, DEFAULT_UID, DEFAULT_UID)
            subprocess.run(["mount", "--bind", source, target], check=True)
            mounted.append(target)
        sid_a = sec_client.create_session(ws, permission_mode="bypassPermissions").id
        # Not isolated by the uid: both sessions' commands run as the same one.
        assert _uid_of(sec_client, sid_a) == _uid_of(sec_client, sid_b)
        attack = (
            # The wrong binds are there, in A's view.
            "grep -q ' /.*/leak-tmp ' /proc/self/mountinfo && echo MOUNTED-TMP; "
            "grep -q ' /.*/leak-out ' /proc/self/mountinfo && echo MOUNTED-OUT; "
            "cat leak-tmp/secret leak-out/*; ls -la leak-tmp leak-out; "
            "echo planted > leak-tmp/planted && echo WROTE-TMP; "
            "echo planted > leak-out/planted.output && echo WROTE-OUT; true"
        )
        r = bash(sec_client, sid_a, guarded_sh(attack))
        assert "MOUNTED-TMP" in r.text and "MOUNTED-OUT" in r.text, r.text
        assert SECRET not in r.text, r.text
        assert "WROTE" not in r.text, r.text
        assert not os.path.exists(os.path.join(tmp_b, "planted"))
        # B itself still has all of it.
        again = bash(sec_client, sid_b, 'cat "$TMPDIR/secret"')
        assert SECRET in again.text, again.text
    finally:
        for target in mounted:
            subprocess.run(["umount", "-l", target], check=False)
        if all(not os.path.ismount(t) for t in mounted):
            shutil.rmtree(ws, ignore_errors=True)


def test_default_places_lie_in_no_directory_others_may_write() -> None:
    """The owners dir is the daemon's own by default, not a fixed name in /tmp."""
    config = Config()
    for path in (config.tmp_owners_dir, config.state_dir):
        # The nearest directory that exists: on a fresh machine ~/.local/state is made by
        # the daemon's first start, below whatever holds it.
        parent = os.path.dirname(os.path.normpath(path))
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        assert not os.stat(parent).st_mode & 0o002, (path, parent)


# Run as root in the daemon's own mount namespace: a /tmp of its own, with what the
# daemon runs from bound back in (argv[3]: those names in /tmp), then the squatter
# (another uid) takes the names, then the daemon starts in it.
SQUAT = r"""
import ctypes, json, os, subprocess, sys
subprocess.run(["mount", "--make-rprivate", "/"], check=True)
old_tmp = os.open("/tmp", os.O_PATH | os.O_DIRECTORY)
subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/tmp"], check=True)
libc = ctypes.CDLL(None, use_errno=True)
MS_BIND, MS_REC = 4096, 16384
for name in json.loads(sys.argv[3]):
    os.mkdir("/tmp/" + name)
    # Through the descriptor of the /tmp now covered (mount(8) would resolve the name anew).
    source = "/proc/self/fd/%d/%s" % (old_tmp, name)
    if libc.mount(source.encode(), ("/tmp/" + name).encode(), None, MS_BIND | MS_REC, None):
        raise OSError(ctypes.get_errno(), "cannot bind " + source)
os.close(old_tmp)
pid = os.fork()
if pid == 0:
    os.setgroups([])
    os.setgid(int(sys.argv[1]))
    os.setuid(int(sys.argv[1]))
    for uid in sys.argv[2].split(","):
        for name in ("agentd-%s", "agentd-out-%s", "agentd-owners-%s"):
            path = "/tmp/" + name % uid
            os.mkdir(path)
            os.chmod(path, 0o777)
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert status == 0, status
os.execv(sys.argv[5], sys.argv[5:])
"""


@pytest.fixture
def squatted_daemon() -> Iterator[tuple[Client, int]]:
    base = Path(tempfile.mkdtemp(prefix="agentd-squat-", dir="/var/tmp"))
    uids = ",".join(str(u) for u in sorted({0, DEFAULT_UID, os.geteuid()}))
    kept = json.dumps(top_names_under("/tmp"))  # a clone under /tmp must stay in view
    wrapper = ["unshare", "-m", sys.executable, "-c", SQUAT, str(SQUATTER), uids, kept, "--"]
    daemon = start_daemon(base, wrapper=wrapper, socket=str(base / "agentd.sock"))
    try:
        with Client(daemon.socket, timeout=60) as c:
            yield c, daemon.proc.pid
    finally:
        code = daemon.stop()
        shutil.rmtree(base, ignore_errors=True)
        assert code == 0, daemon.log


def test_names_squatted_by_another_user_stop_nothing(squatted_daemon: tuple[Client, int]) -> None:
    client, pid = squatted_daemon
    tmp = f"/proc/{pid}/root/tmp"  # the daemon's own /tmp
    squatted = sorted(n for n in os.listdir(tmp) if os.lstat(f"{tmp}/{n}").st_uid == SQUATTER)
    assert len(squatted) == 3 * len({0, DEFAULT_UID, os.geteuid()}), squatted
    ws = sandbox_dir("agentd-squat-ws-")
    try:
        sid = client.create_session(ws, permission_mode="bypassPermissions").id
        r = client.run_tool(sid, "Bash", {"command": 'echo RAN; printf %s "$TMPDIR"'})
        assert not r.is_error and "RAN" in r.text, r.text
        started = client.run_tool(sid, "Bash", {"command": "echo TASK", "run_in_background": True})
        assert not started.is_error, started.text
        task_id = started.data["backgroundTaskId"]

        def ended() -> bool:
            task = next(t for t in client.list_tasks(sid) if t.id == task_id)
            return task.status != "running"

        wait_until(ended, 30, "the task ended")
        out = client.run_tool(sid, "BashOutput", {"bash_id": task_id})
        assert "TASK" in out.text, out.text
        # Nothing of the daemon's went under a squatted name, and none was taken over.
        tmpdir = r.text.strip().splitlines()[-1]
        assert not any(tmpdir.startswith(f"/tmp/{n}/") for n in squatted), tmpdir
        for name in squatted:
            st = os.lstat(f"{tmp}/{name}")
            assert st.st_uid == SQUATTER and st.st_mode & 0o777 == 0o777, name
            assert os.listdir(f"{tmp}/{name}") == [], name
        client.close_session(sid)
    finally:
        shutil.rmtree(ws, ignore_errors=True)
