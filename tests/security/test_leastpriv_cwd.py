"""The Bash cwd report is a channel the daemon owns: a sandboxed command can neither
stall the daemon through it nor move the session's cwd out of the workspace with it.

Each test runs its own daemon: the attack, when it works, freezes the daemon it hits.
The command rewrites the EXIT trap the daemon installed (`trap -p EXIT` shows it), so
the same attack aims at whatever the trap writes to: a file in the sandbox-writable
temp dir before the fix, a pipe the daemon made after it.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agentd_client import Client
from tests.security._leastpriv import GUARD, SYSTEM_PYTHON, host_pidns
from tests.support.daemon import DaemonProcess, start_daemon

# How long the daemon may take to answer a GetStatus while a call of another client
# runs; far above a healthy answer (milliseconds), far below a stall.
ANSWER_WITHIN = 10.0

# Run inside the sandbox (through the guard): put a FIFO where the daemon will read the
# cwd report from, then end without the EXIT trap (bash exec'd this, so it never runs).
FIFO_ATTACK = r"""
import glob, os
planted = 0
for env_file in glob.glob(os.path.join(os.environ["TMPDIR"], ".agentd-env-*")):
    cwd_file = env_file.replace(".agentd-env-", ".agentd-cwd-")
    if os.path.lexists(cwd_file):
        os.unlink(cwd_file)
    os.mkfifo(cwd_file)
    planted += 1
print("planted", planted, "done", flush=True)
"""


@pytest.fixture
def own_daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(tmp_path / "daemon")
    yield proc
    proc.stop(timeout=5)


def _run_in_thread(socket: str, session_id: str, command: str) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def run() -> None:
        with Client(socket, timeout=60) as c:
            try:
                box["result"] = c.run_tool(session_id, "Bash", {"command": command})
            except grpc.RpcError as exc:
                box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def _assert_inside(cwd: str, workspace: Path) -> None:
    real = Path(cwd).resolve()
    assert real == workspace or workspace in real.parents, cwd


def _assert_responsive(socket: str) -> None:
    with Client(socket, timeout=ANSWER_WITHIN) as c:
        started = time.monotonic()
        c.status()
        assert time.monotonic() - started < ANSWER_WITHIN


def test_a_fifo_in_place_of_the_cwd_report_does_not_stall_the_daemon(
    own_daemon: DaemonProcess, workspace: Path
) -> None:
    with Client(own_daemon.socket, timeout=30) as client:
        sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
        shutil.copy(GUARD, workspace / ".guard.py")
        (workspace / ".fifo.py").write_text(FIFO_ATTACK)
        command = f"exec {SYSTEM_PYTHON} .guard.py {host_pidns()} -- {SYSTEM_PYTHON} .fifo.py"
        for _ in range(3):
            thread, box = _run_in_thread(own_daemon.socket, sid, command)
            thread.join(ANSWER_WITHIN)
            try:
                _assert_responsive(own_daemon.socket)
            except grpc.RpcError as exc:
                pytest.fail(f"the daemon stopped answering while the attack ran: {exc.code()}")
            thread.join(ANSWER_WITHIN)
            assert not thread.is_alive(), "the Bash call never returned"
            assert "result" in box, box
            assert "planted" in box["result"].text, box["result"].text
        assert client.get_session(sid).cwd == str(workspace)


def test_a_reported_cwd_with_dotdot_stays_inside_the_workspace(
    own_daemon: DaemonProcess, workspace: Path
) -> None:
    elsewhere = Path(tempfile.mkdtemp(prefix="agentd-lp-elsewhere-", dir="/tmp"))
    elsewhere.chmod(0o755)
    try:
        with Client(own_daemon.socket, timeout=30) as client:
            sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
            (workspace / "sub").mkdir()
            hostile = f"{workspace}/sub/../../{elsewhere.name}"
            command = f"eval \"$(trap -p EXIT | sed 's|builtin pwd -P|builtin echo {hostile}|')\""
            thread, box = _run_in_thread(own_daemon.socket, sid, command)
            thread.join(30)
            _assert_responsive(own_daemon.socket)
            assert "result" in box, box
            _assert_inside(client.get_session(sid).cwd, workspace)
            # And through a symlink that leads out.
            (workspace / "out").symlink_to(elsewhere)
            client.run_tool(sid, "Bash", {"command": "cd out"})
            _assert_inside(client.get_session(sid).cwd, workspace)
            # A real cd inside still carries over.
            client.run_tool(sid, "Bash", {"command": "cd sub"})
            assert client.get_session(sid).cwd == str(workspace / "sub")
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)


def test_junk_on_the_cwd_channel_changes_nothing(
    own_daemon: DaemonProcess, workspace: Path
) -> None:
    with Client(own_daemon.socket, timeout=30) as client:
        sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
        # Garbage in place of the report, a report with no newline, a relative path, and
        # a background child holding the channel open after the shell exits.
        command = (
            "junk() { printf '\\0\\377junk\\n'; (sleep 30 &); printf sub; }\n"
            "eval \"$(trap -p EXIT | sed 's|builtin pwd -P|junk|')\"\n"
            "trap -p EXIT"
        )
        (workspace / "sub").mkdir()
        thread, box = _run_in_thread(own_daemon.socket, sid, command)
        thread.join(30)
        _assert_responsive(own_daemon.socket)
        assert "result" in box, box
        assert "junk >" in box["result"].text, box["result"].text  # the trap was replaced
        assert client.get_session(sid).cwd == str(workspace)


# Run inside the sandbox (through the guard): look for the BASH_ENV script and the cwd
# report wherever the command could reach them, and try to rewrite the script.
REWRITE_ATTACK = r"""
import glob, os
tmp = os.environ["TMPDIR"]
for path in glob.glob(os.path.join(tmp, ".agentd-*")):
    print("channel file in TMPDIR:", path)
    try:
        with open(path, "w") as f:
            f.write("echo pwned\n")
        print("rewrote", path)
    except OSError as exc:
        print("could not rewrite", path, exc)
scripts = 0
for name in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{name}")
    except OSError:
        continue  # the listing's own descriptor
    if "agentd-bash-env" in target:
        scripts += 1
        try:
            os.write(int(name), b"echo pwned\n")
            print("rewrote the script through its fd")
        except OSError:
            pass
        try:
            with open(f"/proc/self/fd/{name}", "w") as f:
                f.write("echo pwned\n")
            print("rewrote the script by reopening it")
        except OSError:
            pass
print("scripts seen", scripts, "done")
"""


def test_the_bash_env_script_is_nothing_a_command_can_rewrite(
    own_daemon: DaemonProcess, workspace: Path
) -> None:
    with Client(own_daemon.socket, timeout=30) as client:
        sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
        shutil.copy(GUARD, workspace / ".guard.py")
        (workspace / ".rewrite.py").write_text(REWRITE_ATTACK)
        command = f"{SYSTEM_PYTHON} .guard.py {host_pidns()} -- {SYSTEM_PYTHON} .rewrite.py"
        result = client.run_tool(sid, "Bash", {"command": command})
        assert "done" in result.text, result.text
        assert "channel file in TMPDIR" not in result.text, result.text
        assert "rewrote" not in result.text, result.text
        assert "scripts seen 1" in result.text, result.text  # the attempt was made
        # The next call still reports its cwd: nothing was changed for it.
        (workspace / "sub").mkdir()
        client.run_tool(sid, "Bash", {"command": "cd sub"})
        assert client.get_session(sid).cwd == str(workspace / "sub")
