"""The sanitised git config of a read-only run (agentd/sandboxing/gitconfig.py and
readonly.py).

The parser reads hostile text: it must read what git reads (checked against git itself
on the same files), and what it writes back must hold only allow-listed keys whatever
the input tries to smuggle (checked by letting git read the copy).
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from agentd.sandboxing import gitconfig, readonly

SYNTAX_CASES = [
    "[core]\n\tbare = false\n",
    "[core]\n\tbare\n",
    '[remote "origin"]\n\turl = https://example.com/r.git\n'
    "\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
    '[branch "feat/x"]\n\tremote = origin\n\tmerge = refs/heads/feat/x\n',
    "[Core]\n\tRepositoryFormatVersion = 1\n[extensions]\n\tobjectFormat = sha256\n",
    '[user]\n\tname = "  spaced  name "\n\temail = a@b ; comment\n',
    "[user]\n\tname = a \\\n  continued\n",
    '[user]\n\tname = "quo\\"te" and \\\\ slash # comment\n',
    "# top comment\n; other\n[core] bare = true\n",
    "[branch.old]\n\tremote = up\n",
    '[remote "a\\"b"]\n\turl = x\n',
    "[user]\n\tname = tab\\there\n",
]

# Where this file's sanitised copies are staged (the daemon has one of its own).
STAGING = readonly.StagingDir()


def _git_list(path: Path) -> list[tuple[str, str]]:
    out = subprocess.run(
        ["git", "config", "--file", str(path), "--list", "--null", "--no-includes"],
        capture_output=True,
        check=True,
        env={"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"},
    ).stdout.decode()
    pairs = []
    for item in out.split("\0"):
        if item:
            key, newline, value = item.partition("\n")
            # a bare `key` (no `=`) is git's implicit true
            pairs.append((key, value if newline else "true"))
    return pairs


def _ours(text: str) -> list[tuple[str, str]]:
    out = []
    for section, sub, key, value in gitconfig.parse(text):
        name = section if sub is None else f"{section}.{sub}"
        out.append((f"{name}.{key}", value))
    return out


@pytest.mark.parametrize("text", SYNTAX_CASES)
def test_the_parser_reads_what_git_reads(tmp_path: Path, text: str) -> None:
    f = tmp_path / "config"
    f.write_text(text)
    assert _ours(text) == _git_list(f)


HOSTILE = (
    '[remote "origin"]\n'
    '\turl = "x\\n[core]\\n\\tfsmonitor = /tmp/evil"\n'  # a newline escaped into a value
    "\tuploadpack = /tmp/evil\n"
    '[remote "o\\"]\\n[core]"]\n\turl = y\n'  # a subsection trying to close itself
    "[core]\n"
    "\tfsmonitor = /tmp/evil\n"
    "\tpager = /tmp/evil\n"
    "\thooksPath = /tmp/evil\n"
    "\tsshCommand = /tmp/evil\n"
    "\teditor = /tmp/evil\n"
    "\tbare = false\n"
    "[diff]\n\texternal = /tmp/evil\n"
    '[diff "x"]\n\ttextconv = /tmp/evil\n\tcommand = /tmp/evil\n'
    '[filter "x"]\n\tclean = /tmp/evil\n\tprocess = /tmp/evil\n'
    "[alias]\n\tst = !/tmp/evil\n"
    "[include]\n\tpath = /tmp/evil.cfg\n"
    '[includeIf "gitdir:/"]\n\tpath = /tmp/evil.cfg\n'
    "[credential]\n\thelper = /tmp/evil\n"
    "[gpg]\n\tprogram = /tmp/evil\n"
    "[pager]\n\tlog = /tmp/evil\n"
    '[submodule "s"]\n\tupdate = !/tmp/evil\n\turl = ../s\n'
    "[extensions]\n\tworktreeConfig = true\n"
)


def test_only_inert_keys_survive(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.write_text(gitconfig.sanitize(HOSTILE.encode()))
    keys = [k for k, _ in _git_list(copy)]
    assert "/tmp/evil" not in copy.read_text()
    # remote.origin.url is dropped: its value holds a newline. The odd subsection is kept,
    # as git itself reads it (a name, not a section header).
    assert keys == [
        'remote.o"]n[core].url',
        "core.bare",
        "submodule.s.url",
        "extensions.worktreeconfig",
    ], keys
    for key in keys:
        assert not key.startswith(("core.fsmonitor", "include", "alias", "diff", "filter"))


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe not utf-8",
        b"[core\n",
        b'[remote "x\n',
        b"key-before-section = 1\n",
        b'[core]\n\tbare = "unterminated\n',
        b"[core]\n\tbare = \\q\n",
        b"[core]\n\tbare = false\n" * 20000,  # over the size cap
    ],
)
def test_a_config_git_would_not_read_gives_an_empty_copy(data: bytes) -> None:
    assert gitconfig.sanitize(data) == ""


_FRAGMENTS = [
    "[core]", '[remote "o"]', '[remote "o\\"x"]', "[branch.b]", "[extensions]", "[alias]",
    "\turl = a", '\turl = "a;b"', "\turl = a\\\n[core]", "\tfsmonitor = /tmp/evil",
    "\tbare", "\tbare = true # c", '\tmerge = "x\\ty"', "\tmerge = \\\"q",
    "# [core] fsmonitor = x", "; x", "\tobjectformat = sha1", "\tpager = /tmp/evil",
    '\turl = "unterminated', "\tfetch = +refs/*:refs/*", "[core] bare = false",
    '\turl = x"\n\tfsmonitor=/tmp/evil"', "\tRemote = Up", "\t", "",
]  # fmt: skip


def test_whatever_the_input_git_reads_only_inert_keys_from_the_copy(tmp_path: Path) -> None:
    """A generative check: random hostile configs; the copy git reads holds only kept
    keys, with the values our parser read."""
    import random

    rng = random.Random(8)
    copy = tmp_path / "copy"
    for _ in range(300):
        text = "\n".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(1, 12))) + "\n"
        sanitized = gitconfig.sanitize(text.encode())
        copy.write_text(sanitized)
        read_back = _git_list(copy)
        # extensions.* is kept whole (git refuses unknown ones; none names a program)
        assert all("evil" not in v for k, v in read_back if not k.startswith("extensions.")), text
        expected = [(k, v) for k, v in _ours(sanitized)] if sanitized else []
        assert read_back == expected, text
        for key, _ in read_back:
            section, _, rest = key.partition(".")
            assert section in ("core", "remote", "branch", "extensions"), (text, key)


# --- which configs a read-only run covers, read safely -------------------------------------


def _repo(path: Path) -> Path:
    (path / ".git").mkdir(parents=True)
    (path / ".git" / "config").write_text("[core]\n\tbare = false\n\tfsmonitor = /tmp/evil\n")
    return path / ".git" / "config"


def test_every_repository_the_run_may_read_is_covered(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    top = _repo(ws)
    nested = _repo(ws / "vendor" / "lib")
    # a submodule: `.git` is a file naming a git dir under the top repository's modules/
    sub_gitdir = ws / ".git" / "modules" / "sub"
    sub_gitdir.mkdir(parents=True)
    (sub_gitdir / "config").write_text("[core]\n\tpager = /tmp/evil\n")
    (ws / "sub").mkdir()
    (ws / "sub" / ".git").write_text("gitdir: ../.git/modules/sub\n")
    # a linked worktree elsewhere whose commondir is the top repository
    wt_dir = ws / ".git" / "worktrees" / "w"
    wt_dir.mkdir(parents=True)
    (wt_dir / "commondir").write_text("../..\n")
    (wt_dir / "config.worktree").write_text("[core]\n\tpager = /tmp/evil\n")
    found = readonly.find_configs([str(ws)], str(ws / "sub"), [])
    assert str(top) in found
    assert str(nested) in found
    assert str(sub_gitdir / "config") in found
    assert str(wt_dir / "config.worktree") in found


def test_a_linked_config_is_covered_where_it_leads(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "evil.cfg").write_text("[core]\n\tfsmonitor = /tmp/evil\n")
    (ws / ".git" / "config").symlink_to(ws / "evil.cfg")
    staged = readonly.stage_git_configs(STAGING, [str(ws)], str(ws), [], None)
    try:
        assert [dest for _, dest in staged.ro_binds] == [str(ws / "evil.cfg")]
        ((source, _),) = staged.ro_binds
        assert "fsmonitor" not in Path(source).read_text()
    finally:
        staged.cleanup()
    assert not os.path.exists(source)


def test_a_fifo_config_does_not_block_and_is_not_bound(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    os.mkfifo(ws / ".git" / "config")
    result: list[readonly.Staged] = []
    t = threading.Thread(
        target=lambda: result.append(
            readonly.stage_git_configs(STAGING, [str(ws)], str(ws), [], None)
        )
    )
    t.start()
    t.join(10)
    assert not t.is_alive(), "reading the config blocked on a FIFO"
    assert result[0].ro_binds == []  # not a regular file: git cannot read it as config either


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a file the sandbox cannot read")
def test_a_config_the_sandbox_cannot_read_is_not_copied(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    config = _repo(ws)
    config.write_text('[remote "o"]\n\turl = https://secret-token@example.com/r\n')
    config.chmod(0o600)  # root's, unreadable to uid 65534
    for p in (tmp_path, ws, ws / ".git"):
        p.chmod(0o755)
    staged = readonly.stage_git_configs(STAGING, [str(ws)], str(ws), [], (65534, 65534))
    try:
        for source, _ in staged.ro_binds:
            assert "secret-token" not in Path(source).read_text()
    finally:
        staged.cleanup()


def test_the_copies_are_the_daemons(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _repo(ws)
    staged = readonly.stage_git_configs(STAGING, [str(ws)], str(ws), [], None)
    try:
        ((source, _),) = staged.ro_binds
        st = os.stat(source)
        assert st.st_uid == os.geteuid() and not st.st_mode & 0o222
        parent = os.stat(os.path.dirname(source))
        assert parent.st_uid == os.geteuid() and not parent.st_mode & 0o022
    finally:
        staged.cleanup()


@pytest.mark.parametrize(
    ("output", "what"),
    [
        ("touch: cannot touch 'p': Read-only file system", "p"),
        ("sort: open failed: p: Read-only file system", "p"),
        ("fatal: could not open 'out.txt' for writing: Read-only file system", "out.txt"),
        ("bash: line 1: f: Read-only file system", "f"),
        ("mkdir: cannot create directory ‘build’: Read-only file system", "build"),
        ("error: unable to write file: Read-only file system", ""),
        ("all fine", None),
    ],
)
def test_what_a_refused_write_tried_to_write(output: str, what: str | None) -> None:
    assert readonly.tried_to_write(output) == what


def test_a_repository_above_the_workspace_is_covered(tmp_path: Path) -> None:
    """A workspace that is a directory inside a cloned repository: git finds the
    repository above the root, so its config is covered too."""
    config = _repo(tmp_path / "clone")
    ws = tmp_path / "clone" / "packages" / "app"
    ws.mkdir(parents=True)
    assert str(config) in readonly.find_configs([str(ws)], str(ws), [])
