"""The list of code-bearing files (agentd/sandboxing/codebearing.toml) and matching paths
to it: by name at any depth, inside git directories by entry, config-named paths."""

from __future__ import annotations

import pytest

from agentd.sandboxing.codebearing import table
from agentd.sandboxing.protected import protected_name


def test_every_entry_says_what_reads_it_and_why() -> None:
    t = table()
    assert t.names and t.git and t.git_config
    for rule in t.names:
        assert rule.tool and len(rule.reason) > 20, rule
    for rule in (*t.git, *t.git_config):
        assert len(rule.reason) > 10, rule


@pytest.mark.parametrize(
    ("rel", "unit"),
    [
        (".vscode/tasks.json", ".vscode"),
        ("web/app/.vscode/tasks.json", "web/app/.vscode"),
        ("a/.claude/settings.local.json", "a/.claude"),
        ("a/.husky/pre-commit", "a/.husky"),
        ("pkg/.npmrc", "pkg/.npmrc"),
        (".venv/pip.conf", ".venv/pip.conf"),
        ("crate/.cargo/config.toml", "crate/.cargo/config.toml"),
        ("deep/down/.envrc", "deep/down/.envrc"),
        ("sub/.git", "sub/.git"),
    ],
)
def test_names_count_at_any_depth(rel: str, unit: str) -> None:
    match = table().by_name(rel)
    assert match is not None and match.unit == unit, match


@pytest.mark.parametrize("rel", ["src/app.py", ".cargo/registry/x", "npmrc", "a/.gitignore"])
def test_other_names_do_not(rel: str) -> None:
    assert table().by_name(rel) is None


def test_a_git_directory_counts_by_its_entries_not_its_name() -> None:
    t = table()
    assert t.by_name("sub/.git", is_dir=True) is None  # a directory: see [[git]]
    for entry in ("config", "config.worktree", "hooks/pre-commit", "info/attributes",
                  "objects/info/alternates", "commondir", "gitdir"):  # fmt: skip
        assert t.in_git_dir(entry), entry
    for entry in ("index", "HEAD", "refs/heads/config", "objects/ab/cdef", "info/exclude",
                  "hooks/pre-commit.sample", "FETCH_HEAD", "ORIG_HEAD", "packed-refs",
                  "COMMIT_EDITMSG", "logs/HEAD", "description", "config.lock",
                  "objects/pack/pack-1.idx"):  # fmt: skip
        assert t.in_git_dir(entry) is None, entry


def test_inside_a_git_directory_what_git_does_not_write_in_ordinary_work_counts() -> None:
    t = table()
    for entry in ("rebase-merge/git-rebase-todo", "rebase-apply/next", "sequencer/todo",
                  "unknown", "info/whatever", "objects/info/http-alternates",
                  "tools/run.sh"):  # fmt: skip
        assert t.in_git_dir(entry), entry


def test_the_file_tools_ask_for_the_same_names_and_anything_in_a_git_directory() -> None:
    assert protected_name("web/.vscode/settings.json") == ".vscode"
    assert protected_name("crate/.cargo/config.toml") == ".cargo/config.toml"
    assert protected_name("sub/.git/index") == ".git"
    assert protected_name("src/main.rs") is None


def test_config_keys_that_name_files_and_programs() -> None:
    t = table()
    assert t.config_rule("core", None, "hookspath").kind == "dir"
    assert t.config_rule("includeif", "gitdir:~/work/", "path").kind == "file"
    assert t.config_rule("core", None, "fsmonitor").kind == "program"
    assert t.config_rule("filter", "lfs", "process").kind == "program"
    assert t.config_rule("core", None, "bare") is None
