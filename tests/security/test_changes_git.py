"""Git's entry points a sandboxed command creates or changes are held (issue 17, class
"protected by name, where it existed"; item 3).

Each attack plants, through the daemon's Bash, what makes the person's next ordinary
git command run a program: on the main before the change tracker, the planted file
stays and `git status` (or commit, or an object lookup) obeys it. Here it is reverted
when the command ends, the result says so, and real git, run as the person would in a
sandbox of the test's own, runs nothing planted.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from pathlib import Path

import pytest

from agentd_client import Client
from tests.sandbox._sandbox_attack import bash, guarded_sh
from tests.security._held import (
    GIT,
    as_sandbox_user,
    git,
    held_paths,
    marker,
    person_runs,
    session_tmp,
    touch_marker,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
Q = shlex.quote


@pytest.fixture
def repo(workspace: Path) -> Path:
    """A repository with one commit, the person's."""
    git(workspace, "init", "-q")
    (workspace / "a.txt").write_text("a\n")
    git(workspace, "add", "a.txt")
    git(workspace, "commit", "-qm", "one")
    as_sandbox_user(workspace)
    return workspace


@pytest.fixture
def sid(client: Client, workspace: Path) -> str:
    return client.create_session(str(workspace), permission_mode="bypassPermissions").id


def git_status(ws: Path, *, also: list[str] = ()) -> str:
    ran = person_runs([*GIT, "status", "--short"], cwd=ws, writable=[str(ws), *also])
    return ran.out


def test_a_rewritten_submodule_gitfile_is_held(client: Client, sid: str, repo: Path) -> None:
    lib = Path(tempfile.mkdtemp(prefix="agentd-lib-", dir="/tmp"))
    try:
        git(lib, "init", "-q")
        git(lib, "commit", "-q", "--allow-empty", "-m", "lib")
        git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
        git(repo, "commit", "-qm", "submodule")
    finally:
        shutil.rmtree(lib, ignore_errors=True)
    as_sandbox_user(repo)
    gitfile = (repo / "lib" / ".git").read_text()
    tmp = session_tmp(client, sid)
    evil = f"{tmp}/evil"
    # A copy of the submodule's git dir outside the workspace, with a planted fsmonitor,
    # and the submodule's gitfile pointed at it.
    plant = (
        f"cp -r .git/modules/lib {Q(evil)} && "
        f"git config -f {Q(evil + '/config')} core.worktree {Q(str(repo / 'lib'))} && "
        f"git config -f {Q(evil + '/config')} core.fsmonitor {Q(touch_marker(repo))} && "
        f"echo 'gitdir: {evil}' > lib/.git && echo planted"
    )
    r = bash(client, sid, guarded_sh(plant))
    assert "planted" in r.text, r.text
    git_status(repo, also=[tmp])
    assert not marker(repo).exists()  # on main: git status ran the planted fsmonitor
    assert str(repo / "lib" / ".git") in held_paths(r.text), r.text
    assert (repo / "lib" / ".git").read_text() == gitfile


def test_a_nested_repository_with_a_gitlink_is_held(client: Client, sid: str, repo: Path) -> None:
    g = " ".join(GIT)
    plant = (
        f"git init -q sub && {g} -C sub commit -q --allow-empty -m x && "
        f"git -C sub config core.fsmonitor {Q(touch_marker(repo))} && "
        "git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub && "
        "echo planted"
    )
    r = bash(client, sid, guarded_sh(plant))
    assert "planted" in r.text, r.text
    assert "sub" in git_status(repo)  # the gitlink is there (the index is the command's)
    assert not marker(repo).exists()  # on main: git status entered sub and ran its fsmonitor
    assert str(repo / "sub" / ".git" / "config") in held_paths(r.text), r.text
    assert not (repo / "sub" / ".git" / "config").exists()


def test_a_linked_worktrees_commondir_cannot_be_pointed_elsewhere(
    client: Client, sid: str, repo: Path
) -> None:
    outside = Path(tempfile.mkdtemp(prefix="agentd-wt-", dir="/var/tmp"))
    linked = outside / "wt"
    try:
        git(repo, "worktree", "add", "-q", str(linked))
        as_sandbox_user(outside)
        as_sandbox_user(repo)
        commondir = repo / ".git" / "worktrees" / "wt" / "commondir"
        before = commondir.read_text()
        tmp = session_tmp(client, sid)
        evil = f"{tmp}/evil"
        plant = (
            f"cp -r .git {Q(evil)} && "
            f"git config -f {Q(evil + '/config')} core.fsmonitor {Q(touch_marker(repo))}; "
            f"echo {Q(evil)} > .git/worktrees/wt/commondir; echo tried"
        )
        r = bash(client, sid, guarded_sh(plant))
        assert "tried" in r.text, r.text
        person_runs([*GIT, "status"], cwd=linked, writable=[str(repo), str(outside), tmp])
        assert not marker(repo).exists()  # on main: status in the worktree ran it
        assert commondir.read_text() == before
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@pytest.mark.parametrize("hooks", ["scripts/githooks", ".husky"])
def test_hooks_in_the_tree_that_core_hookspath_names_are_held(
    client: Client, sid: str, repo: Path, hooks: str
) -> None:
    git(repo, "config", "core.hooksPath", hooks)
    as_sandbox_user(repo)
    plant = (
        f"mkdir -p {hooks} && printf '#!/bin/sh\\n{touch_marker(repo)}\\n' > {hooks}/pre-commit"
        f" && chmod +x {hooks}/pre-commit && echo planted"
    )
    r = bash(client, sid, guarded_sh(plant))
    assert "planted" in r.text, r.text
    ran = person_runs(
        [*GIT, "commit", "-qm", "two", "--allow-empty"], cwd=repo, writable=[str(repo)]
    )
    assert not marker(repo).exists()  # on main: the commit ran the planted hook
    assert ran.code == 0, ran.out
    assert str(repo / hooks / "pre-commit") in held_paths(r.text), r.text
    assert not (repo / hooks / "pre-commit").exists()


def test_a_workspace_without_git_cannot_get_git_init_and_an_fsmonitor(
    client: Client, sid: str, workspace: Path
) -> None:
    plant = f"git init -q && git config core.fsmonitor {Q(touch_marker(workspace))} && echo planted"
    r = bash(client, sid, guarded_sh(plant))
    assert "planted" in r.text, r.text
    git_status(workspace)
    assert not marker(workspace).exists()  # on main: git status ran it
    assert str(workspace / ".git" / "config") in held_paths(r.text), r.text
    assert not (workspace / ".git" / "config").exists()


def test_a_missing_config_worktree_is_held(client: Client, sid: str, repo: Path) -> None:
    git(repo, "config", "core.repositoryformatversion", "1")
    git(repo, "config", "extensions.worktreeConfig", "true")
    as_sandbox_user(repo)
    plant = (
        f"printf '[core]\\n\\tfsmonitor = \"{touch_marker(repo)}\"\\n' > .git/config.worktree"
        " && echo planted"
    )
    r = bash(client, sid, guarded_sh(plant))
    assert "planted" in r.text, r.text
    git_status(repo)
    assert not marker(repo).exists()  # on main: git status obeyed the new config.worktree
    assert str(repo / ".git" / "config.worktree") in held_paths(r.text), r.text


def test_a_missing_alternates_file_is_held(client: Client, sid: str, repo: Path) -> None:
    tmp = session_tmp(client, sid)
    store = f"{tmp}/store"
    plant = (
        f"git init -q --bare {Q(store)} && "
        f"sha=$(echo planted-object | git --git-dir={Q(store)} hash-object -w --stdin) && "
        f"echo {Q(store)}/objects > .git/objects/info/alternates && echo $sha"
    )
    r = bash(client, sid, guarded_sh(plant))
    sha = next(w for w in r.text.split() if len(w) == 40 and set(w) <= set("0123456789abcdef"))
    ran = person_runs([*GIT, "cat-file", "-e", sha], cwd=repo, writable=[str(repo), tmp])
    assert ran.code != 0, ran.out  # on main: git found the object in the planted store
    assert str(repo / ".git" / "objects" / "info" / "alternates") in held_paths(r.text), r.text
