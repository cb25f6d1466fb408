"""Code-bearing by kind, not by name: inside a git directory everything git does not write
in ordinary work is held (its rebase state among it); outside, toolchain selectors,
version managers' and editors' rc files, and every dotfile of a workspace that is a
home. Each attack plants through the daemon's Bash and then runs the real program a
person would run next, in a sandbox of the test's own: it runs nothing planted.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from agentd_client import Client
from tests.security._held import (
    GIT,
    as_sandbox_user,
    git,
    held_paths,
    marker,
    person_runs,
    touch_marker,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
Q = shlex.quote


@pytest.fixture
def sid(client: Client, workspace: Path) -> str:
    return client.create_session(str(workspace), permission_mode="bypassPermissions").id


def _repo(ws: Path) -> Path:
    """A nested repository with two commits, the person's."""
    sub = ws / "sub"
    sub.mkdir()
    git(sub, "init", "-q")
    for n in ("one", "two"):
        (sub / f"{n}.txt").write_text(n)
        git(sub, "add", f"{n}.txt")
        git(sub, "commit", "-qm", n)
    as_sandbox_user(ws)
    return sub


def test_rebase_state_that_would_run_a_command_on_continue_is_held(
    client: Client, sid: str, workspace: Path
) -> None:
    sub = _repo(workspace)
    # The run leaves a rebase stopped at a `break`, with an `exec` still to come.
    command = (
        f"cd sub && GIT_SEQUENCE_EDITOR=\"sed -i '1i break'\" "
        f"{shlex.join(GIT)} rebase -q -i HEAD~1 -x {Q(touch_marker(workspace))}; echo done"
    )
    r = client.run_tool(sid, "Bash", {"command": command})
    assert "done" in r.text, r.text
    assert any("/sub/.git/rebase-merge/" in p for p in held_paths(r.text)), r.text
    assert "its work is not complete" in r.text, r.text  # not a plain success
    ran = person_runs([*GIT, "rebase", "--continue"], cwd=sub, writable=[str(workspace)])
    assert not marker(workspace).exists(), ran.out


def test_a_file_git_never_writes_is_held_and_what_it_writes_is_not(
    client: Client, sid: str, workspace: Path
) -> None:
    _repo(workspace)
    command = (
        f"cd sub && echo x > three.txt && {shlex.join(GIT)} add three.txt && "
        f"{shlex.join(GIT)} commit -qm three && echo hi > .git/unknown && echo done"
    )
    r = client.run_tool(sid, "Bash", {"command": command})
    assert "done" in r.text, r.text
    assert held_paths(r.text) == [str(workspace / "sub" / ".git" / "unknown")], r.text
    assert git(workspace / "sub", "log", "--format=%s", "-1") == "three"


def test_a_homes_config_dir_is_held_and_git_runs_nothing(
    client: Client, sid: str, workspace: Path
) -> None:
    (workspace / ".profile").write_text("# the person's\n")  # the workspace is a home
    sub = _repo(workspace)
    config = f"[core]\n\tfsmonitor = {touch_marker(workspace)}\n"
    command = f"mkdir -p .config/git && printf %s {Q(config)} > .config/git/config; echo done"
    r = client.run_tool(sid, "Bash", {"command": command})
    assert "done" in r.text, r.text
    assert str(workspace / ".config" / "git" / "config") in held_paths(r.text), r.text
    ran = person_runs(
        [*GIT, "status", "--short"],
        cwd=sub,
        writable=[str(workspace)],
        env={"HOME": str(workspace), "XDG_CONFIG_HOME": str(workspace / ".config")},
    )
    assert not marker(workspace).exists(), ran.out


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim missing")
def test_an_exrc_is_held_and_vim_runs_nothing(client: Client, sid: str, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    as_sandbox_user(workspace)
    exrc = f"silent !{touch_marker(workspace)}\n"
    r = client.run_tool(sid, "Bash", {"command": f"printf %s {Q(exrc)} > sub/.exrc; echo done"})
    assert "done" in r.text, r.text
    assert str(workspace / "sub" / ".exrc") in held_paths(r.text), r.text
    ran = person_runs(  # a person whose vimrc sets 'exrc'
        ["vim", "-N", "-i", "NONE", "-X", "-c", "qa!"],
        cwd=workspace / "sub",
        writable=[str(workspace)],
        env={"TERM": "dumb", "VIMINIT": "set exrc"},
        wall=60,
    )
    assert not marker(workspace).exists(), ran.out


@pytest.mark.parametrize(
    "rel",
    ["crate/rust-toolchain.toml", "web/.nvmrc", "py/.python-version", "svc/go.work",
     "x/.tool-versions", "x/mise.toml", "x/.mise.toml", "x/.config/mise/config.toml",
     "x/.nvim.lua", "x/.dir-locals.el", "x/.exrc"],
)  # fmt: skip
def test_selectors_and_rc_files_are_held_at_any_depth(
    client: Client, sid: str, workspace: Path, rel: str
) -> None:
    r = client.run_tool(
        sid, "Bash", {"command": f"mkdir -p $(dirname {rel}) && echo x > {rel}; echo done"}
    )
    assert str(workspace / rel) in held_paths(r.text), r.text
    assert not (workspace / rel).exists()
