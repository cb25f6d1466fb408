"""A background task outlives its daemon (docs/operations.md, "Background tasks outlive the daemon")
and keeps a working ssh-agent: the sandbox sees the session's agent directory, not one
daemon's socket, and the next daemon serves it (and the proxy) as it takes the task over,
before any call of the session. Real daemons restarted with SIGTERM and kill -9, real
git and ssh in a real sandbox against a real sshd (tests/credentials/ssh_world.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from agentd_client import Client
from tests.credentials.ssh_world import SshWorld
from tests.network.support import GIT
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)


class Node:
    """A daemon with the ssh world's config and a config rule that allows git.test's
    logins (no person to ask), keeping its tasks when it stops."""

    def __init__(self, base: Path, world: SshWorld) -> None:
        self.base = base
        self.config = base / "config.toml"
        base.mkdir(parents=True)
        rule = f"SshAgent({GIT}:{world.git_port})"
        self.config.write_text(world.config.read_text() + f'allow_rules = ["{rule}"]\n')
        self.daemon = self._start()

    def _start(self) -> DaemonProcess:
        return start_daemon(self.base / "d", ["--config", str(self.config)], keep_tasks=True)

    def stop(self, sig: int) -> None:
        self.daemon.stop(sig)
        assert self.daemon.proc.poll() is not None

    def start(self) -> None:
        self.daemon = self._start()

    def client(self) -> Client:
        return Client(self.daemon.socket, timeout=240)

    def cleanup(self) -> None:
        d = self.daemon
        subprocess.run(
            [sys.executable, "-m", "agentd", "stop", "--tasks", "--socket", d.socket]
            + ["--state-dir", d.state_dir],
            capture_output=True,
            timeout=60,
        )
        d.stop(signal.SIGKILL)
        assert "Traceback" not in d.log, d.log


@pytest.fixture
def node(tmp_path: Path, ssh_world: SshWorld) -> Iterator[Node]:
    n = Node(tmp_path / "node", ssh_world)
    try:
        yield n
    finally:
        n.cleanup()


def _task(c: Client, sid: str, task_id: str) -> Any:
    return next(t for t in c.list_tasks(sid) if t.id == task_id)


def _ssh_agent_events(c: Client, sid: str, task_id: str) -> list[Any]:
    """The session's SshAgent decisions, replayed up to the task's end."""
    seen: list[Any] = []
    stream = c.attach(sid)
    timer = threading.Timer(60, stream.cancel)
    timer.start()
    try:
        for e in stream:
            if e.HasField("permission_decided") and e.permission_decided.tool_name == "SshAgent":
                seen.append(e.permission_decided)
            if e.HasField("task_finished") and e.task_finished.task.id == task_id:
                break
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.CANCELLED:
            raise
    finally:
        timer.cancel()
        stream.cancel()
    return seen


@pytest.mark.parametrize(
    ("network", "sig"),
    [
        ("on", signal.SIGTERM),
        ("on", signal.SIGKILL),
        ("proxied", signal.SIGTERM),
        ("proxied", signal.SIGKILL),
    ],
    ids=["on-sigterm", "on-kill9", "proxied-sigterm", "proxied-kill9"],
)
def test_a_task_logs_in_through_the_next_daemon(
    node: Node, ssh_world: SshWorld, net_workspace: Path, network: str, sig: int
) -> None:
    ws = net_workspace
    host_pub = ssh_world.known_hosts_line.split(maxsplit=1)[1]
    # What ssh in the sandbox trusts: git.test by name (proxied) or by address (on).
    (ws / "known_hosts").write_text(
        f"{ssh_world.known_hosts_line}\n[127.0.0.1]:{ssh_world.git_port} {host_pub}\n"
    )
    name = GIT if network == "proxied" else "127.0.0.1"
    url = f"ssh://root@{name}:{ssh_world.git_port}{ssh_world.repo}"
    ssh = (
        f'"$GIT_SSH_COMMAND -o UserKnownHostsFile={ws}/known_hosts '
        '-o StrictHostKeyChecking=yes -o BatchMode=yes -o LogLevel=ERROR"'
    )
    login = f'eval "$GIT_SSH_COMMAND -p {ssh_world.git_port} root@{name} echo LOGGED-IN"'
    # Logs in, says so, waits for the test's word (the daemon is restarted meanwhile),
    # then logs in again: git ls-remote and a plain ssh.
    command = (
        f"export GIT_SSH_COMMAND={ssh}; "
        f"git ls-remote {url} HEAD && echo BEFORE-OK; : > {ws}/ready; "
        f"while [ ! -e {ws}/go ]; do sleep 0.1; done; "
        f"git ls-remote {url} HEAD && echo AFTER-OK && {login}"
    )
    with node.client() as c:
        sid = c.create_session(str(ws), permission_mode="bypassPermissions", network=network).id
        session_dir = os.path.dirname(
            c.run_tool(sid, "Bash", {"command": "echo $TMPDIR"}).text.strip()
        )
        r = c.run_tool(sid, "Bash", {"command": command, "run_in_background": True})
        assert not r.is_error, r.text
        task_id = str(r.data["backgroundTaskId"])
        output = Path(_task(c, sid, task_id).output_path)
    agent_dir = Path(session_dir, "ssh-agent")
    wait_until(lambda: (ws / "ready").exists(), 120, "the task's first login")
    # Its shim copies what it printed into the output file a moment later.
    wait_until(
        lambda: "BEFORE-OK" in output.read_text(),
        30,
        lambda: f"the first login's output; it has: {output.read_text()!r}",
    )

    node.stop(sig)
    # What the task's sandbox sees stays for it: the directory and its hosts' keys.
    assert agent_dir.is_dir() and (agent_dir / "known_hosts").is_file()
    node.start()
    # Served at the takeover, before the session's next call (there is none before `go`).
    node.daemon.wait_for_log("serving the ssh-agent of 1 session")
    (ws / "go").touch()
    with node.client() as c:
        wait_until(lambda: _task(c, sid, task_id).status != "running", 120, "the task ends")
        done = _task(c, sid, task_id)
        text = output.read_text()
        assert (done.status, done.exit_code) == ("completed", 0), text + node.daemon.log
        assert "AFTER-OK" in text and "LOGGED-IN" in text, text
        head = subprocess.run(
            ["git", "-C", str(ssh_world.repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert text.count(head) == 2, text  # listed before and after the restart
        # Each login (3) signed by the config's rule, as before the restart.
        signed = _ssh_agent_events(c, sid, task_id)
        assert len(signed) == 3, signed
        assert all(s.behavior == "allow" and "daemon config" in s.decided_by for s in signed)
        # A session that closes leaves nothing of its agent.
        c.close_session(sid)
    assert not agent_dir.exists()


def test_a_daemon_stopping_with_no_task_left_removes_the_agent(
    node: Node, ssh_world: SshWorld, net_workspace: Path
) -> None:
    with node.client() as c:
        sid = c.create_session(str(net_workspace), permission_mode="bypassPermissions").id
        out = c.run_tool(sid, "Bash", {"command": "echo $TMPDIR; ls /run/agentd-ssh"}).text
    tmp, *listed = out.split()
    assert sorted(listed) == ["agent.sock", "known_hosts"], out
    agent_dir = Path(os.path.dirname(tmp), "ssh-agent")
    assert agent_dir.is_dir()
    node.stop(signal.SIGTERM)
    assert not agent_dir.exists()
