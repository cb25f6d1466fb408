"""A caller that goes away while its foreground call runs: the call is cancelled.

Every way a caller goes, with the real agentctl: SIGTERM, its terminal closed (SIGHUP
from the kernel), SIGKILL (no chance to say anything: the daemon sees the connection
close), and a dropped SSH connection to a real sshd on loopback, with and without a
terminal (without one sshd sends no signal; agentctl sees nobody left to read its
output). Each time the call's end is journaled as cancelled and its sandbox is gone;
a call waiting for approval has its prompt withdrawn on the terminal that showed it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentd_client import Client
from agentd_client.core.calls import ToolResult
from tests.support import ctl
from tests.support.daemon import DaemonProcess
from tests.support.ports import free_port
from tests.support.waiting import wait_for_event

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def _started(call_id: str):
    return lambda e: e.HasField("call_started") and e.call_started.tool_use_id == call_id


def _finished(call_id: str):
    return lambda e: e.HasField("call_finished") and e.call_finished.result.tool_use_id == call_id


def _sandbox_gone(marker: str, timeout: float = 30) -> bool:
    """No process left whose command line holds `marker` (the call's sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        if found.returncode != 0:
            return True
        # Waiting on the kernel reaping a tree: nothing to subscribe to but /proc.
        time.sleep(0.1)
    return False


@dataclass
class Sshd:
    port: int
    key: Path

    def ssh(self, *command: str, tty: bool = False) -> list[str]:
        return [
            "ssh", "-p", str(self.port), "-i", str(self.key), "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "LogLevel=ERROR", *(["-tt"] if tty else ["-T"]), "root@127.0.0.1", *command,
        ]  # fmt: skip


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    if os.geteuid() != 0 or not os.access(SSHD, os.X_OK) or not shutil.which("ssh"):
        pytest.skip("needs root, sshd and ssh (openssh-server, openssh-client)")
    base = Path(tempfile.mkdtemp(prefix="agentd-sshd-"))
    for name in ("host", "user"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / name)],
                       check=True)  # fmt: skip
    (base / "authorized_keys").write_text((base / "user.pub").read_text())
    port = free_port()
    (base / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {base / 'host'}\n"
        f"AuthorizedKeysFile {base / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        f"PidFile {base / 'sshd.pid'}\nStrictModes no\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # its privilege separation dir
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(base / "sshd_config")],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    server = Sshd(port, base / "user")
    try:
        probe = subprocess.run([*server.ssh("true")], capture_output=True, text=True, timeout=30)
        for _ in range(50):  # until it listens: each try is a real connection
            if probe.returncode == 0:
                break
            probe = subprocess.run(server.ssh("true"), capture_output=True, text=True, timeout=30)
        assert probe.returncode == 0, probe.stderr
        yield server
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(base, ignore_errors=True)


def _call_argv(daemon: DaemonProcess, sid: str, call_id: str, marker: str) -> list[str]:
    command = f'{{"command": "sleep {marker}; touch late.txt"}}'
    return [ctl.AGENTCTL, "--socket", daemon.socket, "call", "-s", sid, "--id", call_id,
            "Bash", command]  # fmt: skip


def _check_cancelled(client: Client, sid: str, call_id: str, marker: str) -> ToolResult:
    finished = wait_for_event(client, sid, _finished(call_id), timeout=60)
    result = ToolResult.from_pb(finished.call_finished.result)
    said = result.text.lower()
    assert result.is_error and ("cancel" in said or "interrupted" in said), result.text
    assert _sandbox_gone(marker)
    return result


@pytest.mark.parametrize("how", ["sigterm", "sighup-terminal-closed", "sigkill"])
def test_a_killed_agentctl_call_cancels_its_call(
    daemon: DaemonProcess, client: Client, workspace: Path, how: str
) -> None:
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    call_id = f"toolu_killed_{uuid.uuid4().hex[:12]}"
    marker = f"{3000 + int(uuid.uuid4().int % 900)}.{uuid.uuid4().int % 10**6}"
    argv = _call_argv(daemon, sid, call_id, marker)
    if how == "sighup-terminal-closed":
        term = ctl.on_pty(*argv[1:])
        wait_for_event(client, sid, _started(call_id))
        os.close(term.master)  # the terminal goes: the kernel hangs up its session
        assert term.proc.wait(60) == 128 + signal.SIGHUP
    else:
        proc = ctl.popen(*argv[1:])
        wait_for_event(client, sid, _started(call_id))
        proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        if how == "sigterm":
            assert proc.returncode == 128 + signal.SIGTERM
            line = ctl.one_line(err)
            assert line == f"agentctl: terminated (SIGTERM); cancelled Bash call {call_id}"
        else:
            assert proc.returncode == -signal.SIGKILL
    _check_cancelled(client, sid, call_id, marker)
    assert not (workspace / "late.txt").exists()
    assert client.status().running_calls == 0


@pytest.mark.parametrize("tty", [False, True], ids=["ssh", "ssh-tt"])
def test_a_dropped_ssh_connection_cancels_the_call(
    daemon: DaemonProcess, client: Client, workspace: Path, sshd: Sshd, tty: bool
) -> None:
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    call_id = f"toolu_ssh_{uuid.uuid4().hex[:12]}"
    marker = f"{3000 + int(uuid.uuid4().int % 900)}.{uuid.uuid4().int % 10**6}"
    remote = " ".join(f"'{a}'" for a in _call_argv(daemon, sid, call_id, marker))
    ssh = subprocess.Popen(sshd.ssh(remote, tty=tty), stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_for_event(client, sid, _started(call_id))
        ssh.kill()  # the connection drops: sshd closes the session's pipes or terminal
        ssh.wait(10)
        _check_cancelled(client, sid, call_id, marker)
        # agentctl itself is gone too, on the far side.
        assert _sandbox_gone(call_id)
    finally:
        if ssh.poll() is None:
            ssh.kill()


def test_a_prompt_is_withdrawn_when_its_caller_is_killed(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace)).id  # default mode: the Bash call asks
    watcher = ctl.on_pty("--socket", daemon.socket, "attach", sid)
    try:
        client.run_tool(sid, "Glob", {"pattern": "nothing-*"})
        watcher.read_until(b"Glob")  # attached, and caught up
        call_id = f"toolu_asked_{uuid.uuid4().hex[:12]}"
        proc = ctl.popen("--socket", daemon.socket, "call", "-s", sid, "--id", call_id,
                         "Bash", '{"command": "touch asked.txt"}')  # fmt: skip
        watcher.read_until(b"[y/N/a")
        proc.kill()  # no word from it: the daemon sees its connection close
        proc.wait(30)
        seen = watcher.read_until(b"withdrawn")
        tail = seen[seen.rindex(b"withdrawn") :].split(b"\n")[0]
        assert b"cancelled" in tail, tail
        finished = wait_for_event(client, sid, _finished(call_id))
        assert finished.call_finished.result.is_error
        assert client.status().pending_asks == 0
        # The withdrawn prompt takes no answer: the terminal is back to events.
        os.write(watcher.master, b"y\n")
        client.run_tool(sid, "Glob", {"pattern": "after-*"})
        watcher.read_until(b"after-*")
        assert not (workspace / "asked.txt").exists()
    finally:
        watcher.close()


def test_a_killed_sdk_caller_cancels_its_unary_call_and_the_rest_of_its_batch(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    """The library's two shapes: CallTool (unary) and RunTools (a batch, streamed)."""
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    for shape in ("run_tool", "run_tools"):
        first, second = (f"toolu_{shape}_{n}_{uuid.uuid4().hex[:8]}" for n in (1, 2))
        marker = f"{3000 + int(uuid.uuid4().int % 900)}.{uuid.uuid4().int % 10**6}"
        calls = [("Bash", {"command": f"sleep {marker}"}, first),
                 ("Bash", {"command": "touch second.txt"}, second)]  # fmt: skip
        code = "import sys; from agentd_client import Client; c = Client(sys.argv[1]); " + (
            f"c.run_tool({sid!r}, *{calls[0]!r}[:2], {first!r})"
            if shape == "run_tool"
            else f"c.run_tools({sid!r}, {calls!r})"
        )
        proc = subprocess.Popen([ctl.sys.executable, "-c", code, daemon.socket])
        wait_for_event(client, sid, _started(first))
        proc.kill()
        proc.wait(30)
        _check_cancelled(client, sid, first, marker)
    assert not (workspace / "second.txt").exists()  # the batch's next call never started
    assert client.status().running_calls == 0


def test_a_terminated_agent_cancels_its_calls_and_records_why(
    daemon: DaemonProcess, client: Client, workspace: Path, tmp_path: Path
) -> None:
    from agentd_client.integrations import conversation as conv
    from tests.support.fake_messages import running

    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    marker = f"{3000 + int(uuid.uuid4().int % 900)}.{uuid.uuid4().int % 10**6}"
    script = [[{"name": "Bash", "input": {"command": f"sleep {marker}"}}]]
    with running(script, tmp_path / "api") as api:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.url}
        agent = ctl.popen("--socket", daemon.socket, "agent", "-s", sid, "go", env=env)
        started = wait_for_event(client, sid, lambda e: e.HasField("call_started"))
        agent.send_signal(signal.SIGTERM)
        _, err = agent.communicate(timeout=60)
    assert agent.returncode == 128 + signal.SIGTERM, err
    _check_cancelled(client, sid, started.call_started.tool_use_id, marker)
    stops = [e.agent.stopped for e in conv.session_events(client, sid)
             if e.HasField("agent") and e.agent.HasField("stopped")]  # fmt: skip
    assert [(s.reason, s.message) for s in stops] == [
        ("interrupted", "stopped: its caller went away (SIGTERM)")
    ]
