"""A held change is a person's to decide, on any attached terminal (issue 17 item 3).

The ask is the existing permission request (tool_name KeepChanges): every `agentctl
attach` shows it with the diff, the first answer wins. A yes puts in place exactly
what the command wrote, whatever the path holds by then; a no leaves the workspace as
it was before the command.
"""

from __future__ import annotations

import os
import shlex
import threading
from pathlib import Path

import pytest

from agentd_client import Client, ToolResult
from tests.security._held import as_sandbox_user
from tests.support import ctl
from tests.support.daemon import DaemonProcess

SETTINGS = b'{"terminal.integrated.profiles.linux": {"x": {"path": "/ws/evil.sh"}}}\n'
HOOK = b"#!/bin/sh\necho pushed\n"
PLANT = (
    "mkdir -p .vscode sub/.git/hooks && "
    f"printf %s {shlex.quote(SETTINGS.decode())} > .vscode/settings.json && "
    "chmod 640 .vscode/settings.json && "
    f"printf %s {shlex.quote(HOOK.decode())} > sub/.git/hooks/pre-push && "
    "chmod 755 sub/.git/hooks/pre-push && echo planted"
)


@pytest.fixture
def sid(client: Client, workspace: Path) -> str:
    return client.create_session(str(workspace), permission_mode="bypassPermissions").id


def attached(daemon: DaemonProcess, client: Client, sid: str, tag: str) -> ctl.OnPty:
    """`agentctl attach` on a pty of its own, once it shows a call made after it started."""
    term = ctl.on_pty("--socket", daemon.socket, "attach", sid, "--from", "now")
    for i in range(20):
        client.run_tool(sid, "LS", {"path": "."}, f"toolu_{tag}_{i}")
        try:
            term.read_until(f"toolu_{tag}_{i}".encode(), timeout=3)
            return term
        except TimeoutError:
            continue
    term.close()
    raise AssertionError(f"attach did not follow: {term.seen[-500:]!r}")


def in_background(client: Client, sid: str, command: str) -> tuple[threading.Thread, list]:
    out: list[ToolResult] = []
    thread = threading.Thread(
        target=lambda: out.append(client.run_tool(sid, "Bash", {"command": command}))
    )
    thread.start()
    return thread, out


def tree(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path below `root`: its mode, and a file's bytes."""
    found: dict[str, tuple[int, bytes | None]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            body = path.read_bytes() if path.is_file() and not path.is_symlink() else None
            found[str(path.relative_to(root))] = (st.st_mode, body)
    return found


def test_approved_from_a_second_attach_it_is_reapplied_exactly_as_written(
    daemon: DaemonProcess, client: Client, sid: str, workspace: Path
) -> None:
    first = attached(daemon, client, sid, "first")
    second = attached(daemon, client, sid, "second")
    try:
        thread, out = in_background(client, sid, PLANT)
        for term in (first, second):  # every terminal is asked, with the diff
            seen = term.read_until(b"Allow?", timeout=60).decode(errors="replace")
            assert "KeepChanges" in seen and "terminal.integrated.profiles" in seen, seen
        # Reverted meanwhile, and the path written again by someone else (as the
        # sandbox uid): a yes puts back what the command wrote and the person saw, not
        # what is there by then.
        assert not (workspace / ".vscode" / "settings.json").exists()
        (workspace / ".vscode").mkdir(exist_ok=True)
        (workspace / ".vscode" / "settings.json").write_bytes(b"{}\n")
        as_sandbox_user(workspace / ".vscode")
        os.write(second.master, b"y\n")
        thread.join(60)
        first.read_until(b"allow (once)", timeout=30)  # the other terminal is told
    finally:
        first.close()
        second.close()
    result = out[0]
    assert "A person approved them" in result.text, result.text
    settings = workspace / ".vscode" / "settings.json"
    hook = workspace / "sub" / ".git" / "hooks" / "pre-push"
    assert settings.read_bytes() == SETTINGS, result.text
    assert hook.read_bytes() == HOOK
    assert settings.stat().st_mode & 0o777 == 0o640
    assert hook.stat().st_mode & 0o777 == 0o755


def test_refused_the_workspace_is_as_it_was_before(
    daemon: DaemonProcess, client: Client, sid: str, workspace: Path
) -> None:
    (workspace / "keep.txt").write_text("mine\n")
    before = tree(workspace)
    term = attached(daemon, client, sid, "refuse")
    try:
        thread, out = in_background(client, sid, PLANT)
        term.read_until(b"Allow?", timeout=60)
        os.write(term.master, b"n\n")
        thread.join(60)
    finally:
        term.close()
    assert "They stay reverted" in out[0].text, out[0].text
    assert tree(workspace) == before
