"""Code-bearing paths in a writable workspace are read-only inside the sandbox, while git
keeps working (issue 7, item 2).

A hostile command plants a git hook, a config that runs a program, editor tasks, agent
settings or shell rc files, for the person's next innocent step to run on the host.
"""

# ruff: noqa: F811  (pytest fixtures imported from _sandbox_attack, used as parameters)
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentd_client import Client
from tests.sandbox.conftest import DEFAULT_UID

from ._sandbox_attack import (  # noqa: F401  (fixtures are used by name)
    bash,
    guarded_sh,
    sandbox_daemon,
    sec_client,
    sec_session,
    sec_workspace,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

PROTECTED_FILES = [
    ".claude/settings.json", ".vscode/tasks.json", ".idea/workspace.xml", ".bashrc",
    ".profile", ".gitmodules", ".mcp.json", ".envrc-not-listed",
]  # fmt: skip
GIT = "git -c user.name=t -c user.email=t@example.com"


@pytest.fixture
def repo(sec_workspace: Path) -> Path:
    """A git repository with a submodule git dir and the protected files, as its owner."""
    ws = sec_workspace
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    sub = ws / ".git" / "modules" / "lib"
    sub.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "--bare", str(sub)], check=True)
    for name in PROTECTED_FILES:
        (ws / name).parent.mkdir(exist_ok=True)
        (ws / name).write_text("original\n")
    (ws / "a.txt").write_text("a\n")
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", f"{DEFAULT_UID}:{DEFAULT_UID}", str(ws)], check=True)
    return ws


ATTACK = """
try() { if sh -c "$1" 2>/dev/null; then echo "OPEN: $2"; else echo "SHUT: $2"; fi; }
try 'echo "#!/bin/sh" > .git/hooks/pre-commit' hook
try 'echo "[core] fsmonitor = evil" >> .git/config' config
try 'echo "[core] hooksPath = x" >> .git/modules/lib/config' submodule-config
try 'mv .git .git-moved' move-git
try 'rm -rf .git/hooks' remove-hooks
try 'mv .git/config .git/config-moved' move-config
for f in FILES; do try "echo evil > $f" "$f"; done
"""


def test_protected_paths_are_read_only_and_git_still_works(
    sec_client: Client, sec_session: str, repo: Path
) -> None:
    script = ATTACK.replace("FILES", " ".join(PROTECTED_FILES))
    r = bash(sec_client, sec_session, guarded_sh(script))
    opened = [line for line in r.text.splitlines() if line.startswith("OPEN")]
    # Not on any list: the control that shows a write here can succeed.
    assert opened == ["OPEN: .envrc-not-listed"], r.text
    assert (repo / ".claude/settings.json").read_text() == "original\n"
    assert "fsmonitor" not in (repo / ".git/config").read_text()
    assert not (repo / ".git/hooks/pre-commit").exists()

    work = (
        f"{GIT} add a.txt && {GIT} commit -qm one && {GIT} checkout -q -b feature && "
        f"echo b > a.txt && {GIT} commit -qam two && {GIT} branch && {GIT} log --format=%s"
    )
    r = bash(sec_client, sec_session, guarded_sh(work))
    assert not r.is_error, r.text
    assert "* feature" in r.text and "two\none" in r.text, r.text


def test_a_missing_hooks_directory_cannot_be_created(
    sec_client: Client, sec_session: str, repo: Path
) -> None:
    shutil.rmtree(repo / ".git" / "hooks")
    r = bash(
        sec_client,
        sec_session,
        guarded_sh("mkdir -p .git/hooks; echo evil > .git/hooks/post-checkout; echo END"),
    )
    assert "END" in r.text, r.text
    assert not (repo / ".git/hooks/post-checkout").exists()
