"""The mount list never follows a link the sandbox or the repository made (issue 17, item 1).

A protected name (`.idea`, `.bashrc`, `.git/hooks`…) that is a symlink used to be bound
read-only at its *target*, after the homes, /run and /tmp were hidden, so the target
showed again: a read-only `cat`, which runs unasked in `default` mode, read a hidden host
file. A `.git/modules` link made the next call bind every git dir found through it
writable, outside the workspace. Each attack here runs through the real daemon, with
links shipped in a cloned repository (git stores links) or made by the sandbox, to each
kind of hidden place: a home, /run, the host's /tmp, another session's temp and output
dirs, and a file of the daemon's own.
"""

# ruff: noqa: F811  (pytest fixtures imported from _sandbox_attack, used as parameters)
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import pytest

from agentd_client import Client
from tests.sandbox._sandbox_attack import (  # noqa: F401  (fixtures are used by name)
    CONFIG_MARKER,
    Daemon,
    bash,
    guarded_sh,
    sandbox_daemon,
    sec_client,
)
from tests.sandbox.conftest import DEFAULT_UID, sandbox_dir
from tests.support.daemon import start_daemon
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

SECRET = "agentd-mounts-secret-" + os.urandom(6).hex()
# Protected names that are directories, and those that are files (protected.py's lists).
DIR_NAMES = (".claude", ".vscode", ".idea")
FILE_NAMES = (
    ".bashrc", ".bash_profile", ".zshrc", ".zprofile", ".profile", ".gitconfig",
    ".gitmodules", ".ripgreprc", ".mcp.json", ".claude.json",
)  # fmt: skip
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=m"]


def _secret_dir(parent: str) -> str:
    """A world-readable directory under `parent` holding `secret`: only hiding keeps it."""
    path = tempfile.mkdtemp(prefix="agentd-mounts-", dir=parent)
    os.chmod(path, 0o755)
    with open(os.path.join(path, "secret"), "w") as f:
        f.write(SECRET + "\n")
    os.chmod(os.path.join(path, "secret"), 0o644)
    return path


def _as_sandbox_uid(path: str) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", f"{DEFAULT_UID}:{DEFAULT_UID}", path], check=True)


def _clone_with_links(links: dict[str, str]) -> str:
    """A workspace cloned from a repository whose commit holds `links` (name -> target)."""
    src = tempfile.mkdtemp(prefix="agentd-mounts-src-", dir="/var/tmp")
    try:
        subprocess.run([*GIT, "init", "-q", src], check=True)
        for name, target in links.items():
            os.symlink(target, os.path.join(src, name))
        subprocess.run([*GIT, "-C", src, "add", "-A"], check=True)
        subprocess.run([*GIT, "-C", src, "commit", "-qm", "links"], check=True)
        ws = sandbox_dir("agentd-mounts-ws-")
        os.rmdir(ws)
        subprocess.run([*GIT, "clone", "-q", src, ws], check=True)
    finally:
        shutil.rmtree(src, ignore_errors=True)
    os.chmod(ws, 0o755)
    _as_sandbox_uid(ws)
    for name in links:
        assert os.path.islink(os.path.join(ws, name)), name
    return ws


def _links_to(target_dir: str, secret_file: str) -> dict[str, str]:
    links = dict.fromkeys(DIR_NAMES, target_dir)
    # git refuses to add a .gitmodules that is a link: the sandbox's own links test it.
    links.update((name, secret_file) for name in FILE_NAMES if name != ".gitmodules")
    return links


def _reads() -> str:
    """A read-only command: what each protected name shows."""
    paths = [f"{d}/secret" for d in DIR_NAMES] + list(FILE_NAMES)
    return "hostname; cat " + " ".join(paths)


def _session_dirs(session_id: str) -> list[str]:
    """A session's temp and output dirs on the host, wherever this daemon keeps them."""
    found = glob.glob(f"/tmp/agentd-*/{session_id}") + glob.glob(f"/tmp/agentd-*/{session_id}/*")
    return sorted(p for p in found if os.path.isdir(p) and not os.path.islink(p))


@pytest.fixture
def other_session(sec_client: Client) -> Iterator[tuple[str, list[str]]]:
    """Session B: a command left a secret in its temp dir and printed one to its output."""
    ws = sandbox_dir("agentd-mounts-b-")
    sid = sec_client.create_session(ws, permission_mode="bypassPermissions").id
    r = bash(sec_client, sid, f'echo {SECRET} > "$TMPDIR/secret"; echo {SECRET}')
    assert SECRET in r.text, r.text
    dirs = _session_dirs(sid)
    assert dirs, "session B's directories were not found on the host"
    yield sid, dirs
    sec_client.close_session(sid)
    shutil.rmtree(ws, ignore_errors=True)


@pytest.fixture
def hidden_places(sandbox_daemon: Daemon) -> Iterator[dict[str, tuple[str, str]]]:
    """kind -> (a directory the sandbox must not see, a secret file in it)."""
    made = {kind: _secret_dir(parent) for kind, parent in (("home", "/home"), ("run", "/run"))}
    made["host-tmp"] = _secret_dir("/tmp")
    places = {kind: (d, os.path.join(d, "secret")) for kind, d in made.items()}
    # The daemon's config file (it may hold the TCP token): a file of the daemon's own.
    conf = sandbox_daemon.config_file
    places["daemon-config"] = (os.path.dirname(conf), conf)
    yield places
    for d in made.values():
        shutil.rmtree(d, ignore_errors=True)


KINDS = ["home", "run", "host-tmp", "daemon-config"]


@pytest.mark.parametrize("kind", KINDS)
def test_links_shipped_in_the_repository_show_nothing_hidden_to_a_read_only_command(
    sec_client: Client, hidden_places: dict[str, tuple[str, str]], kind: str
) -> None:
    target_dir, secret_file = hidden_places[kind]
    ws = _clone_with_links(_links_to(target_dir, secret_file))
    try:
        # default mode, nobody attached: only a read-only command runs at all, unasked.
        sid = sec_client.create_session(ws, permission_mode="default").id
        r = sec_client.run_tool(sid, "Bash", {"command": _reads()})
        assert "agentd-sandbox" in r.text, r.text  # it ran, and in the sandbox
        assert SECRET not in r.text and CONFIG_MARKER not in r.text, r.text
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_links_to_another_sessions_dirs_show_nothing_of_it(
    sec_client: Client, other_session: tuple[str, list[str]]
) -> None:
    _, dirs = other_session
    for target in dirs:
        ws = _clone_with_links(_links_to(target, os.path.join(target, "secret")))
        try:
            sid = sec_client.create_session(ws, permission_mode="default").id
            r = sec_client.run_tool(sid, "Bash", {"command": _reads() + " " + target + "/*"})
            assert "agentd-sandbox" in r.text, r.text
            assert SECRET not in r.text, (target, r.text)
        finally:
            shutil.rmtree(ws, ignore_errors=True)


@pytest.mark.parametrize("kind", KINDS)
def test_links_the_sandbox_makes_show_nothing_hidden_to_its_next_command(
    sec_client: Client, hidden_places: dict[str, tuple[str, str]], kind: str
) -> None:
    target_dir, secret_file = hidden_places[kind]
    ws = sandbox_dir("agentd-mounts-made-")
    try:
        sid = sec_client.create_session(ws, permission_mode="bypassPermissions").id
        make = "; ".join(
            [f"ln -s {target_dir} {d}" for d in DIR_NAMES]
            + [f"ln -s {secret_file} {f}" for f in FILE_NAMES]
        )
        bash(sec_client, sid, guarded_sh(make))
        for mode in ("bypassPermissions", "default"):
            # Written with write access (bypass) and read-only, unasked (default).
            sec_client.update_permissions(sid, mode=mode)
            r = sec_client.run_tool(sid, "Bash", {"command": _reads()})
            assert "agentd-sandbox" in r.text, r.text
            assert SECRET not in r.text and CONFIG_MARKER not in r.text, (mode, r.text)
    finally:
        shutil.rmtree(ws, ignore_errors=True)


@pytest.fixture
def other_repo() -> Iterator[str]:
    """Another repository of the same user, outside the session's workspace: its .git
    is writable by the sandbox uid on the host, and read-only in the sandbox's view."""
    path = sandbox_dir("agentd-mounts-other-")
    subprocess.run([*GIT, "init", "-q", path], check=True)
    sub = os.path.join(path, "nested")
    subprocess.run([*GIT, "init", "-q", sub], check=True)
    _as_sandbox_uid(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("walked", ["modules", "worktrees"])
def test_a_walked_git_dir_that_is_a_link_binds_nothing_outside_the_workspace(
    sec_client: Client, other_repo: str, walked: str
) -> None:
    ws = sandbox_dir("agentd-mounts-git-")
    try:
        subprocess.run([*GIT, "init", "-q", ws], check=True)
        _as_sandbox_uid(ws)
        sid = sec_client.create_session(ws, permission_mode="bypassPermissions").id
        # The walk looked four levels deep for git dirs below the link, wherever it pointed.
        bash(sec_client, sid, guarded_sh(f"ln -s {other_repo} .git/{walked}"))
        write = (
            f"for d in {other_repo}/.git {other_repo}/nested/.git; do "
            'echo planted > "$d/description" && echo "WROTE $d"; done; true'
        )
        r = bash(sec_client, sid, guarded_sh(write))
        assert "WROTE" not in r.text, r.text
        for gitdir in (f"{other_repo}/.git", f"{other_repo}/nested/.git"):
            with open(os.path.join(gitdir, "description")) as f:
                assert "planted" not in f.read(), gitdir
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_a_git_config_behind_a_link_gets_no_stand_in_where_it_is_hidden(
    sec_client: Client, hidden_places: dict[str, tuple[str, str]]
) -> None:
    # A read-only run shows git a sanitised copy of each repository config it may read,
    # bound over the real file. Through a `.git` link into a home, that copy stood in at
    # the hidden path and showed what the config holds (a remote's URL and its token).
    home_dir, _ = hidden_places["home"]
    subprocess.run([*GIT, "init", "-q", home_dir], check=True)
    url = f"https://user:{SECRET}@example.com/repo.git"
    subprocess.run(["git", "-C", home_dir, "remote", "add", "origin", url], check=True)
    os.chmod(os.path.join(home_dir, ".git", "config"), 0o644)
    ws = sandbox_dir("agentd-mounts-gitlink-")
    try:
        sid = sec_client.create_session(ws, permission_mode="bypassPermissions").id
        bash(sec_client, sid, guarded_sh(f"ln -s {home_dir}/.git .git"))
        sec_client.update_permissions(sid, mode="default")
        r = sec_client.run_tool(sid, "Bash", {"command": "hostname; cat .git/config"})
        assert "agentd-sandbox" in r.text, r.text
        assert SECRET not in r.text, r.text
    finally:
        shutil.rmtree(ws, ignore_errors=True)


@pytest.fixture(scope="module")
def unchecked_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """A daemon that checks a running background task's changes only once an hour: links
    a task made stay in place for the next call, as they do between two checks (or once
    a person approved them) on any daemon."""
    base = tmp_path_factory.mktemp("agentd-mounts-unchecked")
    config = base / "agentd.toml"
    config.write_text("changes_check_seconds = 3600\n")
    daemon = start_daemon(base, ["--config", str(config)])
    try:
        with Client(daemon.socket, timeout=60) as c:
            yield c
    finally:
        assert daemon.stop() == 0, daemon.log


@pytest.mark.parametrize("kind", ["home", "run", "host-tmp"])
def test_links_a_running_task_made_show_nothing_hidden_to_the_next_command(
    unchecked_daemon: Client, kind: str
) -> None:
    client = unchecked_daemon
    target_dir = _secret_dir({"home": "/home", "run": "/run", "host-tmp": "/tmp"}[kind])
    secret_file = os.path.join(target_dir, "secret")
    ws = sandbox_dir("agentd-mounts-task-")
    try:
        sid = client.create_session(ws, permission_mode="bypassPermissions").id
        make = "; ".join(
            [f"ln -s {target_dir} {d}" for d in DIR_NAMES]
            + [f"ln -s {secret_file} {f}" for f in FILE_NAMES]
        )
        # The task makes the links, then stays (its changes are checked when it ends).
        started = client.run_tool(
            sid,
            "Bash",
            {"command": guarded_sh(f"{make}; exec sleep 3600"), "run_in_background": True},
        )
        assert not started.is_error, started.text
        task_id = started.data["backgroundTaskId"]
        try:
            wait_until(
                lambda: all(os.path.islink(os.path.join(ws, n)) for n in FILE_NAMES),
                30,
                "the task made its links",
            )
            client.update_permissions(sid, mode="default")
            # Read-only: it runs unasked, with nobody attached.
            r = client.run_tool(sid, "Bash", {"command": _reads()})
            assert "agentd-sandbox" in r.text, r.text
            assert SECRET not in r.text, r.text
        finally:
            client.run_tool(sid, "TaskStop", {"task_id": task_id})
    finally:
        shutil.rmtree(ws, ignore_errors=True)
        shutil.rmtree(target_dir, ignore_errors=True)
