"""The daemon reads workspace settings files safely: a symlink, a FIFO, a huge file, or a
file swapped under it never widens anything, never hangs the daemon, and is reported.
Trust from the daemon's config is pinned to content too."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd_client import Client, ToolResult
from agentd_client.v1 import agentd_pb2 as pb
from tests.conftest import SANDBOX_UID
from tests.support.daemon import DaemonProcess, start_daemon

ALLOW_BASH = {"permissions": {"allow": ["Bash"]}}


def write_settings(ws: Path, body: dict[str, Any] | str, name: str = "settings.json") -> Path:
    d = ws / ".claude"
    d.mkdir(exist_ok=True)
    path = d / name
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def call(client: Client, sid: str, name: str, args: dict[str, Any]) -> ToolResult:
    """A tool call that must be answered within 20 s: a daemon stuck on a file fails it."""
    request = pb.RunToolRequest(
        session_id=sid, call=pb.ToolUse(tool_use_id="", name=name, input=args)
    )
    return ToolResult.from_pb(client.stub.CallTool(request, timeout=20))


def ignored_reasons(client: Client, sid: str) -> dict[str, str]:
    return {i.path: i.reason for i in client.get_session(sid).ignored_settings}


@pytest.fixture
def other_workspace() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="agentd-ws2-", dir="/tmp"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_settings_swapped_for_a_symlink_to_trusted_content(
    client: Client, workspace: Path, other_workspace: Path
) -> None:
    """The file, or its .claude directory, replaced by a symlink to trusted content
    elsewhere: the daemon does not follow it, so nothing of it applies."""
    elsewhere = write_settings(other_workspace, ALLOW_BASH)
    client.approve_trust(str(elsewhere), sha(elsewhere))
    path = write_settings(workspace, ALLOW_BASH)
    client.approve_trust(str(path), sha(path))  # the same bytes, trusted here too
    sid = client.create_session(str(workspace), permission_mode="default").id
    assert not call(client, sid, "Bash", {"command": "touch before"}).is_error

    path.unlink()
    path.symlink_to(elsewhere)
    r = call(client, sid, "Bash", {"command": "touch file-link"})
    assert r.is_error and not (workspace / "file-link").exists(), r.text
    assert "symlink" in ignored_reasons(client, sid)[str(path)]

    shutil.rmtree(workspace / ".claude")
    (workspace / ".claude").symlink_to(other_workspace / ".claude")
    r = call(client, sid, "Bash", {"command": "touch dir-link"})
    assert r.is_error and not (workspace / "dir-link").exists(), r.text
    assert "outside the workspace" in ignored_reasons(client, sid)[str(path)]


def test_settings_file_made_a_fifo_does_not_hang_the_daemon(
    client: Client, workspace: Path
) -> None:
    """settings.local.json is a FIFO nobody writes: the calls still finish, and the file
    is reported, not waited on. (One a sandboxed command makes is held and removed when
    the command ends, agentd/changes/; this one the workspace had before.)"""
    fifo = workspace / ".claude" / "settings.local.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    os.chown(fifo, SANDBOX_UID, SANDBOX_UID)
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    for _ in range(3):
        r = call(client, sid, "Bash", {"command": "echo alive"})
        assert not r.is_error and "alive" in r.text, r.text
    assert "not a regular file" in ignored_reasons(client, sid)[str(fifo)]
    assert client.status().open_sessions >= 1


def test_huge_settings_file_is_refused(client: Client, workspace: Path) -> None:
    path = write_settings(workspace, json.dumps(ALLOW_BASH) + " " * (1 << 20))
    os.chown(path, SANDBOX_UID, SANDBOX_UID)
    sid = client.create_session(str(workspace), permission_mode="default").id
    r = call(client, sid, "Bash", {"command": "touch huge"})
    assert r.is_error and not (workspace / "huge").exists(), r.text
    assert "larger than" in ignored_reasons(client, sid)[str(path)]


# --- trust from the daemon's config ----------------------------------------------------


@pytest.fixture(scope="module")
def config_setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, Path, Path]]:
    """A daemon whose config trusts one content of one workspace's settings.json, and the
    hash of an over-size file (which must still be refused)."""
    roots = [Path(tempfile.mkdtemp(prefix="agentd-cfgws-", dir="/tmp")) for _ in range(2)]
    for root in roots:
        root.chmod(0o755)
        os.chown(root, SANDBOX_UID, SANDBOX_UID)
    trusted, huge = roots
    t = write_settings(trusted, ALLOW_BASH)
    h = write_settings(huge, json.dumps(ALLOW_BASH) + " " * (1 << 20))
    base = tmp_path_factory.mktemp("cfgd")
    config = base / "config.toml"
    config.write_text(
        "trusted_settings = [\n"
        f'  {{path = "{t}", sha256 = "{sha(t)}"}},\n'
        f'  {{path = "{h}", sha256 = "{sha(h)}"}},\n'
        "]\n"
    )
    daemon: DaemonProcess = start_daemon(base, ["--config", str(config)])
    try:
        with Client(daemon.socket, timeout=60) as client:
            yield client, trusted, huge
    finally:
        daemon.stop()
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)


def test_config_trusts_exact_content_only(config_setup: tuple[Client, Path, Path]) -> None:
    client, ws, _ = config_setup
    path = ws / ".claude" / "settings.json"
    sid = client.create_session(str(ws), permission_mode="default").id
    assert not call(client, sid, "Bash", {"command": "touch by-config"}).is_error
    listed = {(e.state, e.source) for e in client.list_trust(str(path))}
    assert ("trusted", "config") in listed
    original = path.read_bytes()
    path.write_bytes(original.replace(b"Bash", b"Bash", 1) + b"\n")
    try:
        r = call(client, sid, "Bash", {"command": "touch after-change"})
        assert r.is_error and not (ws / "after-change").exists(), r.text
    finally:
        path.write_bytes(original)
    with pytest.raises(Exception, match="trusted by the daemon's config"):
        client.revoke_trust(str(path), sha(path))


def test_config_trusted_hash_of_a_huge_file_is_still_refused(
    config_setup: tuple[Client, Path, Path],
) -> None:
    client, _, ws = config_setup
    sid = client.create_session(str(ws), permission_mode="default").id
    r = call(client, sid, "Bash", {"command": "touch huge"})
    assert r.is_error and not (ws / "huge").exists(), r.text


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('trusted_workspaces = ["/home/me/src"]\n', "trusted_workspaces was removed"),
        ('trusted_settings = "/home/me/src"\n', "setting trusted_settings"),
        (
            'trusted_settings = [{path = "/ws/.claude/settings.json", sha256 = "abc"}]\n',
            "trusted_settings[0].sha256",
        ),
        (
            f'trusted_settings = [{{path = "/ws/settings.json", sha256 = "{"0" * 64}"}}]\n',
            "not a workspace settings file",
        ),
    ],
)
def test_a_path_alone_cannot_be_trusted(tmp_path: Path, toml: str, message: str) -> None:
    """Trust by path ("whatever it says") does not exist: the daemon refuses to start."""
    config = tmp_path / "config.toml"
    config.write_text(toml)
    argv = [sys.executable, "-m", "agentd", "serve", "--config", str(config)]
    argv += ["--socket", str(tmp_path / "s.sock"), "--state-dir", str(tmp_path / "state")]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
