"""Shared pieces of the sandbox attack tests: a daemon with a config file, and guarded
commands for its Bash tool.

Every attack runs inside the sandbox behind tests/sandbox/guard.py, which exits 99
"NOT SANDBOXED" without attacking unless it proves it is inside.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from tests.sandbox.conftest import GUARD, NOT_SANDBOXED, SYSTEM_PYTHON, sandbox_dir
from tests.support.daemon import DaemonProcess, start_daemon

HOST_PIDNS = str(os.stat("/proc/self/ns/pid").st_ino)
TOKEN = "agentd-test-token-" + os.urandom(6).hex()
# A line only the daemon's config file holds (the token itself lives in the token file).
CONFIG_MARKER = "agentd-test-config-" + os.urandom(6).hex()


def guarded(*argv: str) -> str:
    """A Bash command that runs `argv` only once it has proved it is inside the sandbox."""
    return shlex.join([SYSTEM_PYTHON, GUARD, HOST_PIDNS, "--", *argv])


def guarded_sh(script: str) -> str:
    return guarded("sh", "-c", script)


def guarded_py(code: str, *args: str) -> str:
    return guarded(SYSTEM_PYTHON, "-c", code, *args)


def bash(client: Client, sid: str, command: str):
    """Run `command` through the daemon's Bash; fail loudly if the guard refused."""
    r = client.run_tool(sid, "Bash", {"command": command})
    assert f"Exit code {NOT_SANDBOXED}" not in r.text, r.text
    return r


class Daemon:
    """A daemon started with a config file in a place the sandbox identity could read."""

    def __init__(
        self, proc: DaemonProcess, config_file: str, token_file: str, allowed_socket: str
    ) -> None:
        self.proc = proc
        self.config_file = config_file
        self.token_file = token_file
        self.allowed_socket = allowed_socket


@pytest.fixture(scope="module")
def sandbox_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    conf_dir = sandbox_dir("agentd-sec-conf-")
    config_file = os.path.join(conf_dir, "config.toml")
    allowed = os.path.join(sandbox_dir("agentd-sec-allowed-"), "allowed.sock")
    token_file = os.path.join(conf_dir, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    with open(config_file, "w") as f:
        f.write(f'# {CONFIG_MARKER}\ntoken_file = "{token_file}"\n')
        f.write(f'sandbox_sockets = ["{allowed}"]\n')
    # Readable by the sandbox uid on the host: only hiding protects them.
    os.chmod(config_file, 0o644)
    os.chmod(token_file, 0o644)
    proc = start_daemon(tmp_path_factory.mktemp("agentd-sec"), ["--config", config_file])
    yield Daemon(proc, config_file, token_file, allowed)
    code = proc.stop()
    shutil.rmtree(conf_dir, ignore_errors=True)
    shutil.rmtree(os.path.dirname(allowed), ignore_errors=True)
    assert code == 0, proc.log


@pytest.fixture
def sec_client(sandbox_daemon: Daemon) -> Iterator[Client]:
    with Client(sandbox_daemon.proc.socket, timeout=60) as c:
        yield c


@pytest.fixture
def sec_workspace() -> Iterator[Path]:
    root = Path(sandbox_dir("agentd-sec-ws-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def sec_session(sec_client: Client, sec_workspace: Path) -> str:
    return sec_client.create_session(str(sec_workspace), permission_mode="bypassPermissions").id


def temp_dir_in(parent: str, prefix: str) -> str:
    """A world-readable directory the test creates (and removes) under `parent`."""
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    os.chmod(path, 0o755)
    return path
