"""Shared pieces of the held-changes attacks (issue 17, "protected by name, where it
existed"): plant through the daemon's Bash, then run the program a person would run
next (git, npm, Claude Code) in a sandbox of the test's own, behind the guard, so a
planted hook that does run cannot touch the host.

A planted payload proves it ran by creating a marker in the workspace: the marker's
absence after the person's program ran is what each test asserts, and its presence on
the current main (without the change tracker) is what each attack showed first.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from agentd_client import Client
from agentd_sandbox import Limits, SandboxPolicy, run
from tests.sandbox._sandbox_attack import HOST_PIDNS, bash
from tests.sandbox.conftest import DEFAULT_UID, GUARD, NOT_SANDBOXED, SYSTEM_PYTHON

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


@dataclass
class Ran:
    code: int
    out: str


def person_runs(
    argv: list[str],
    *,
    cwd: Path,
    writable: list[str],
    env: dict[str, str] | None = None,
    home_allow: list[str] | None = None,
    wall: float = 120,
) -> Ran:
    """`argv` as the person would run it, in a sandbox of the test's own (as the sandbox
    uid, network off, homes hidden), behind the guard: exit 99 if it is not inside."""
    policy = SandboxPolicy(
        writable=writable,
        cwd=str(cwd),
        env=env or {},
        home_allow=home_allow,
        limits=Limits(wall_seconds=wall),
    )
    with tempfile.TemporaryFile() as out:
        code = run(
            policy,
            [SYSTEM_PYTHON, GUARD, HOST_PIDNS, "--", *argv],
            stdout=out.fileno(),
            stderr=out.fileno(),
        )
        out.seek(0)
        text = out.read().decode(errors="replace")
    assert code != NOT_SANDBOXED, text
    return Ran(code, text)


def as_sandbox_user(path: Path) -> None:
    """Give the tree to the sandbox uid, as a person's own checkout would be theirs."""
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", f"{DEFAULT_UID}:{DEFAULT_UID}", str(path)], check=True)


def git(ws: Path, *args: str) -> str:
    """git run by the test on the host to set a repository up (never on planted config)."""
    argv = [*GIT, "-c", "safe.directory=*", "-C", str(ws), *args]
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def session_tmp(client: Client, sid: str) -> str:
    """The session's $TMPDIR (writable by its sandbox, outside the workspace)."""
    r = bash(client, sid, 'printf %s "$TMPDIR"')
    return r.text.strip()


def marker(ws: Path) -> Path:
    return ws / "PWNED"


def touch_marker(ws: Path) -> str:
    """A shell command a planted hook runs: it leaves the marker and fails quietly."""
    return f"touch {shlex.quote(str(marker(ws)))}; false"


def held_paths(text: str) -> list[str]:
    """The paths a Bash result says were held (the lines `  - PATH (change): …`)."""
    found: list[str] = []
    for line in text.splitlines():
        if line.startswith("  - ") and " (" in line:
            found.append(line[4:].split(" (", 1)[0])
    return found
