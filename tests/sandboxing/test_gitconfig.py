"""A git config judged by its content (agentd/sandboxing/gitconfig.py `inert`): what git
writes in ordinary work passes, anything that runs a program or reads more config does
not."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentd.sandboxing.gitconfig import inert


def test_what_git_init_clone_and_remote_write_is_inert(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    env = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": str(tmp_path)}
    for args in (
        ["init", "-q", "-b", "main", str(repo)],
        ["-C", str(repo), "remote", "add", "origin", "https://example.org/x.git"],
        ["-C", str(repo), "config", "branch.main.remote", "origin"],
        ["-C", str(repo), "config", "branch.main.merge", "refs/heads/main"],
        ["-C", str(repo), "config", "user.name", "Some One"],
    ):
        subprocess.run(["git", *args], check=True, env=env)
    assert inert((repo / ".git" / "config").read_bytes())


@pytest.mark.parametrize(
    "text",
    [
        "[core]\n\tfsmonitor = touch x\n",
        "[core]\n\thooksPath = h\n",
        "[include]\n\tpath = other\n",
        '[filter "lfs"]\n\tclean = x\n',
        '[remote "o"]\n\turl = x\n\tuploadpack = evil\n',
        "[alias]\n\tst = !sh\n",
        "[core]\n\tsshCommand = evil\n",
        "not a config",
    ],
)
def test_anything_else_is_not(text: str) -> None:
    assert not inert(text.encode())
