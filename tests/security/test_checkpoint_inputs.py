"""What a checkpoint reads that the workspace or a sandboxed command wrote, through the
real daemon: a FIFO the command made is recorded without being opened (the call
returns, the path says why it cannot be restored), and a workspace repository whose
config names programs (fsmonitor, hooks) gives its pre-images without running any."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from agentd_client import Client
from tests.security._held import as_sandbox_user


def test_a_fifo_the_command_made_is_listed_not_opened(
    client: Client, session_id: str, workspace: Path
) -> None:
    r = client.run_tool(session_id, "Bash", {"command": "mkfifo pipe && echo made"}, "t-fifo")
    assert r.text.strip() == "made", r.text  # the checkpoint did not block on the FIFO
    diff = client.diff_checkpoint(session_id, "t-fifo", fmt="names")
    (entry,) = [f for f in diff.files if f.path == "pipe"]
    assert entry.change == "added"
    assert entry.after.kind == "unknown" and "not a regular file" in entry.after.why


def test_a_hostile_repository_config_runs_nothing_for_a_pre_image(
    client: Client, session_id: str, workspace: Path
) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(workspace)}

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=workspace, env=env, check=True)

    git("init", "-q")
    (workspace / "notes.txt").write_text("as committed\n")
    git("add", "notes.txt")
    marker = workspace / "ran"
    git("config", "core.fsmonitor", f"touch {marker}; false")
    hooks = workspace / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("post-index-change", "pre-commit", "post-checkout"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / hook).chmod(0o755)
    as_sandbox_user(workspace)
    r = client.run_tool(session_id, "Bash", {"command": "echo more >> notes.txt"}, "t-git")
    assert not r.is_error, r.text
    (entry,) = client.diff_checkpoint(session_id, "t-git", fmt="names").files
    assert entry.before.kind == "file", entry  # its pre-image: git's index
    unified = client.diff_checkpoint(session_id, "t-git", fmt="unified").text
    assert " as committed" in unified and "+more" in unified, unified
    assert not marker.exists(), "a program the repository's config names was run"
