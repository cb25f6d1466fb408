"""Grep, Glob and LS against a symlink swapped in mid-call by the session's own command.

A background Bash task swaps a workspace file (or directory) for a symlink to a
root-only file (or directory) outside the workspace, in a tight loop, while the test
calls the tool hundreds of times. A tool that checks a path and then lets something
reopen it by name as root (rg, scandir) reads the secret in some of those calls; the
daemon must never show it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agentd_client import Client
from tests.security._leastpriv import Secret, root_only_secret, swapping

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="root-only files need a root daemon")

CALLS = 150
# The race is bounded in time as well as in calls, so a slow machine ends it too.
SECONDS = 60


@pytest.fixture
def secret() -> Secret:
    with root_only_secret() as s:
        yield s


def _hammer(client: Client, session_id: str, calls: list[tuple[str, dict]], token: str) -> int:
    """Run the calls round-robin until CALLS or SECONDS; fail at the first leak."""
    deadline = time.monotonic() + SECONDS
    done = 0
    while done < CALLS and time.monotonic() < deadline:
        name, args = calls[done % len(calls)]
        result = client.run_tool(session_id, name, args)
        assert token not in result.text, f"{name} {args} leaked the secret:\n{result.text}"
        done += 1
    return done


def test_grep_never_reads_a_root_only_file_swapped_in(
    client: Client, session_id: str, workspace: Path, secret: Secret
) -> None:
    (workspace / "f.txt").write_text("decoy\n")
    calls = [
        ("Grep", {"pattern": "SECRET|decoy", "output_mode": "content"}),
        ("Grep", {"pattern": "SECRET", "path": "f.txt", "output_mode": "content"}),
        ("Grep", {"pattern": "SECRET", "output_mode": "files_with_matches"}),
    ]
    with swapping(client, session_id, workspace, "file", "f.txt", secret.file):
        assert _hammer(client, session_id, calls, secret.token) >= 60


def test_glob_never_lists_a_root_only_directory_swapped_in(
    client: Client, session_id: str, workspace: Path, secret: Secret
) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "ok.txt").write_text("x\n")
    calls = [("Glob", {"pattern": "**/*"}), ("Glob", {"pattern": "*", "path": "sub"})]
    with swapping(client, session_id, workspace, "dir", "sub", secret.directory):
        assert _hammer(client, session_id, calls, secret.token) >= 60


def test_grep_never_walks_into_a_root_only_directory_swapped_in(
    client: Client, session_id: str, workspace: Path, secret: Secret
) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "ok.txt").write_text("x\n")
    calls = [("Grep", {"pattern": "x", "output_mode": "files_with_matches"})]
    with swapping(client, session_id, workspace, "dir", "sub", secret.directory):
        assert _hammer(client, session_id, calls, secret.token) >= 60


def test_ls_never_lists_a_root_only_directory_swapped_in(
    client: Client, session_id: str, workspace: Path, secret: Secret
) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "ok.txt").write_text("x\n")
    calls = [("LS", {}), ("LS", {"path": "sub"})]
    with swapping(client, session_id, workspace, "dir", "sub", secret.directory):
        assert _hammer(client, session_id, calls, secret.token) >= 60
