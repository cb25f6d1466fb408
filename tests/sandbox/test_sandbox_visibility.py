"""What of the host the sandbox sees: hidden homes with roots shown again, named sockets,
secrets under a visible home (agentd_sandbox.visibility)."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator

import pytest

from agentd_sandbox import SandboxPolicy
from agentd_sandbox.identity import DEFAULT_UID

from .conftest import policy, run_capture, sandbox_dir


@pytest.fixture
def home_tree() -> Iterator[str]:
    """/home/<tmp> with a project and a credential, readable by the sandbox uid."""
    home = tempfile.mkdtemp(prefix="agentd-sbx-home-", dir="/home")
    os.chmod(home, 0o755)
    os.makedirs(os.path.join(home, "proj"))
    files = {"proj/code.py": "print(1)\n", ".npmrc": "//registry:_authToken=T0K\n"}
    for name, text in files.items():
        with open(os.path.join(home, name), "w") as f:
            f.write(text)
    if os.geteuid() == 0:
        for root, dirs, files in os.walk(home):
            for n in dirs + files:
                os.chown(os.path.join(root, n), DEFAULT_UID, DEFAULT_UID)
    yield home
    shutil.rmtree(home, ignore_errors=True)


async def test_read_only_roots_are_visible_under_a_hidden_home(home_tree, guarded):
    """What a read-only run relies on: writable = a temp dir, the workspace read-only."""
    tmp = sandbox_dir("agentd-sbx-tmp-")
    proj = os.path.join(home_tree, "proj")
    try:
        pol = SandboxPolicy(writable=[tmp], read_only=[proj], cwd=proj)
        script = f"cat {proj}/code.py; touch {proj}/new && echo WROTE; cat {home_tree}/.npmrc"
        res = await run_capture(pol, guarded("sh", "-c", script))
        assert "print(1)" in res.out, res.err
        assert "WROTE" not in res.out and "T0K" not in res.out, res.out
        assert not os.path.exists(f"{proj}/new")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def test_secrets_stay_hidden_in_a_workspace_that_is_a_home(home_tree, guarded):
    res = await run_capture(policy(home_tree), guarded("sh", "-c", "cat .npmrc; cat proj/code.py"))
    assert "print(1)" in res.out, res.err
    assert "T0K" not in res.out


async def test_only_named_sockets_are_reachable(ws, guarded_py):
    sock_dir = sandbox_dir("agentd-sbx-sock-")
    paths = [os.path.join(sock_dir, n) for n in ("named.sock", "other.sock")]
    servers = []
    for p in paths:
        s = socket.socket(socket.AF_UNIX)
        s.bind(p)
        os.chmod(p, 0o777)
        s.listen(4)
        servers.append(s)
    code = (
        "import socket, sys\n"
        "for p in sys.argv[1:]:\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        "    print(p, s.connect_ex(p) == 0)\n"
    )
    try:
        res = await run_capture(policy(ws, sockets=[paths[0]]), guarded_py(code, *paths))
        assert res.out.split("\n")[:2] == [f"{paths[0]} True", f"{paths[1]} False"], res
    finally:
        for s in servers:
            s.close()
        shutil.rmtree(sock_dir, ignore_errors=True)


async def test_an_allowed_name_linked_to_a_secret_shows_nothing(home_tree, guarded):
    """A .gitconfig (allow-listed) that is a symlink to a credential is not shown."""
    os.symlink(".npmrc", os.path.join(home_tree, ".gitconfig"))
    ws = sandbox_dir("agentd-sbx-ws-")
    try:
        res = await run_capture(policy(ws), guarded("sh", "-c", f"cat {home_tree}/.gitconfig"))
        assert "T0K" not in res.out, res.out
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_an_allow_listed_file_removed_before_the_start_does_not_stop_the_sandbox(
    home_tree: str, ws: str
) -> None:
    """The allow-list is read when the command line is built; its owner may remove an
    entry before bwrap mounts it. Every sandbox of the machine must still start."""
    import subprocess

    from agentd_sandbox import runner

    gitconfig = os.path.join(home_tree, ".gitconfig")
    with open(gitconfig, "w") as f:
        f.write("[user]\n\tname = Gone Soon\n")
    os.chmod(gitconfig, 0o644)
    pol = policy(ws)
    pol.home_allow = [".gitconfig"]
    launch = runner.prepare(pol, ["/bin/true"])
    try:
        args_fd = launch.args_fd  # bwrap's options, in a memfd
        with open(f"/proc/self/fd/{args_fd}", "rb") as options:
            assert gitconfig.encode() in options.read(), "the entry must be on the line"
        os.unlink(gitconfig)  # the race: gone between the argv and bwrap's mounts
        proc = subprocess.run(
            launch.argv,
            capture_output=True,
            text=True,
            timeout=60,
            **{k: v for k, v in launch.popen_kwargs.items()},
        )
    finally:
        launch.close()
    assert proc.returncode == 0, proc.stderr
