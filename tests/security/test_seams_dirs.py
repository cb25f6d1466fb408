"""`agentd serve` at its seams: a bad config is one line and exit 2; shared directories
(a 1777 directory the test makes, never the real /tmp) are refused, never chmod-ed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agentd_client import Client
from tests.support.daemon import start_daemon

SANDBOX_UID = 65534


def serve(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run `agentd serve` expecting it to refuse to start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    return subprocess.run(
        [sys.executable, "-m", "agentd", "serve", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def one_line_exit_2(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("agentd: ")
    return lines[0]


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A directory like /tmp: world-writable and sticky."""
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o1777)
    return d


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('trusted_workspaces = "/src/mine"', "trusted_workspaces"),
        ("bash_processes = true", "bash_processes"),
        ("task_output_bytes = -1", "task_output_bytes"),
        ('default_permission_mode = "yolo"', "default_permission_mode"),
        ('tcp_listen = "anywhere"', "tcp_listen"),
        ("not toml at all [", "cannot read config file"),
    ],
)
def test_bad_config_is_one_line_and_exit_2(tmp_path: Path, toml: str, key: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(toml + "\n")
    line = one_line_exit_2(
        serve("--config", str(config), "--socket", str(tmp_path / "run" / "s.sock"))
    )
    assert key in line
    assert not (tmp_path / "run").exists()  # nothing was set up on a bad config


def test_bad_flag_is_one_line_and_exit_2(tmp_path: Path) -> None:
    line = one_line_exit_2(
        serve("--log-level", "LOUDEST", "--socket", str(tmp_path / "run" / "s.sock"))
    )
    assert "log_level" in line


def test_socket_in_a_shared_directory_is_refused_and_the_directory_left_alone(
    tmp_path: Path, shared: Path
) -> None:
    line = one_line_exit_2(
        serve("--socket", str(shared / "agentd.sock"), "--state-dir", str(tmp_path / "state"))
    )
    assert f"socket directory {shared} is shared" in line
    assert "mode 1777" in line and "agentd-" in line  # names a path that works
    assert mode(shared) == 0o1777
    assert not (shared / "agentd.sock").exists()


def test_state_dir_that_is_shared_is_refused_and_left_alone(tmp_path: Path, shared: Path) -> None:
    line = one_line_exit_2(
        serve("--socket", str(tmp_path / "run" / "s.sock"), "--state-dir", str(shared))
    )
    assert f"state dir {shared} is shared" in line
    assert mode(shared) == 0o1777
    assert os.listdir(shared) == []


def test_directories_of_another_user_are_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory of another user")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, SANDBOX_UID, SANDBOX_UID)
    line = one_line_exit_2(
        serve("--socket", str(theirs / "s.sock"), "--state-dir", str(tmp_path / "state"))
    )
    assert "belongs to another user" in line
    assert os.stat(theirs).st_uid == SANDBOX_UID and mode(theirs) == 0o755


def test_readable_state_dir_is_used_with_a_warning_not_chmodded(tmp_path: Path) -> None:
    """Others may read it but not write it: not shared, so usable; not ours to chmod
    (systemd's StateDirectory= is 0755 unless StateDirectoryMode= says otherwise)."""
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)
    d = start_daemon(tmp_path / "d", ["--state-dir", str(state)])
    assert d.stop() == 0, d.log
    assert f"chmod 700 {state}" in d.log
    assert mode(state) == 0o755


def test_a_file_where_the_socket_goes_is_not_deleted(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    precious = run / "agentd.sock"
    precious.write_text("not a socket")
    line = one_line_exit_2(serve("--socket", str(precious), "--state-dir", str(tmp_path / "st")))
    assert "is not a socket" in line
    assert precious.read_text() == "not a socket"


def test_private_directories_inside_a_shared_one_are_made_0700(
    tmp_path: Path, shared: Path
) -> None:
    """The way to use a shared place: a directory of one's own inside it, which the
    daemon creates 0700; the shared directory keeps its mode."""
    sock = shared / f"agentd-{os.geteuid()}" / "agentd.sock"
    state = shared / "state-of-mine"
    d = start_daemon(tmp_path / "d", ["--socket", str(sock), "--state-dir", str(state)])
    try:
        with Client(str(sock)) as c:
            assert c.status().pid == d.proc.pid
        assert mode(sock.parent) == 0o700 and mode(state) == 0o700
        assert mode(sock) == 0o600
        assert mode(shared) == 0o1777
    finally:
        assert d.stop() == 0, d.log
    assert "Traceback" not in d.log
    # A restart reuses what it made before.
    d = start_daemon(tmp_path / "d", ["--socket", str(sock), "--state-dir", str(state)])
    assert d.stop() == 0, d.log
    assert mode(shared) == 0o1777
