"""A push's commands and whether its pack proves each update a fast-forward, on packs
real git makes."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agentd.credentials import push

ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}


def git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    return subprocess.run(
        ["git", "-C", str(repo), *ident, *args],
        input=data,
        capture_output=True,
        check=True,
        env=ENV,
    ).stdout


def pkt(line: bytes) -> bytes:
    return b"%04x" % (len(line) + 4) + line


def test_commands_and_fast_forwards(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "1")
    old = git(tmp_path, "rev-parse", "HEAD").decode().strip()
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "2")
    new = git(tmp_path, "rev-parse", "HEAD").decode().strip()
    git(tmp_path, "commit", "-q", "--amend", "--allow-empty", "-m", "2b")
    rewritten = git(tmp_path, "rev-parse", "HEAD").decode().strip()
    pack = git(tmp_path, "pack-objects", "--stdout", "--revs", data=f"{new}\n^{old}\n".encode())
    body = (
        pkt(f"{old} {new} refs/heads/main\0report-status side-band-64k\n".encode())
        + pkt(f"{push.ZERO} {new} refs/heads/new\n".encode())
        + pkt(f"{new} {push.ZERO} refs/heads/gone\n".encode())
        + pkt(f"{rewritten} {new} refs/heads/forced\n".encode())
        + b"0000"
        + pack
    )
    commands = push.parse_commands(body)
    assert [u.ref for u in commands.updates] == [
        "refs/heads/main",
        "refs/heads/new",
        "refs/heads/gone",
        "refs/heads/forced",
    ]
    assert "report-status" in commands.capabilities
    parents = push.commit_parents(body[commands.pack_offset :])
    main, created, gone, forced = commands.updates
    assert push.fast_forward(main, parents)
    assert not push.fast_forward(forced, parents)  # not an ancestor: a force push
    assert created.creation and gone.deletion
    assert not push.fast_forward(main, None)  # no readable pack proves nothing
    answer = push.refusal(commands, "refused by alice")
    # git shows the side band's line as `remote: agentd: refused by alice`, once.
    assert b"\x02agentd: refused by alice\n" in answer and b"agentd: agentd" not in answer
    assert b"ng refs/heads/main agentd: refused by alice\n" in answer
    answer = push.refusal(commands, "agentd could not read the push")
    assert b"\x02agentd could not read" in answer


def test_an_empty_packs_fast_forward_is_proven_by_the_commits_known(tmp_path: Path) -> None:
    """The commits went up in an earlier push: moving another branch onto them sends no
    objects, and the route's known commits prove the fast-forward."""
    git(tmp_path, "init", "-q")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "1")
    old = git(tmp_path, "rev-parse", "HEAD").decode().strip()
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "2")
    new = git(tmp_path, "rev-parse", "HEAD").decode().strip()
    pack = git(tmp_path, "pack-objects", "--stdout", "--revs", data=f"{new}\n^{old}\n".encode())
    empty = git(tmp_path, "pack-objects", "--stdout", "--revs", data=f"{new}\n^{new}\n".encode())
    first = pkt(f"{push.ZERO} {new} refs/heads/feat\0report-status\n".encode()) + b"0000"
    later = pkt(f"{old} {new} refs/heads/base\0report-status\n".encode()) + b"0000"
    known = push.KnownCommits()
    assert push.read(b"", later + empty, True, known)[1] == set()  # type: ignore[index]
    push.read(b"", first + pack, True, known)
    assert push.read(b"", later + empty, True, known)[1] == {"refs/heads/base"}  # type: ignore[index]
    assert push.read(b"", later + empty, True)[1] == set()  # type: ignore[index]


def test_protected_patterns() -> None:
    patterns = ("refs/heads/main", "refs/heads/release/*", "refs/tags/*")
    assert push.protected("refs/heads/release/1.2", patterns)
    assert push.protected("refs/tags/v1", patterns)
    assert not push.protected("refs/heads/mainline", patterns)


def test_malformed_commands_are_refused() -> None:
    for body in (b"", b"zzzz", b"0008abcd0000", pkt(b"a b c\n") + b"0000"):
        try:
            push.parse_commands(body)
        except push.PushError:
            continue
        raise AssertionError(body)


def _pkt(text: bytes) -> bytes:
    return b"%04x" % (len(text) + 4) + text


def test_the_advertisement_names_what_a_push_would_update() -> None:
    main, other = "1" * 40, "2" * 40
    body = (
        _pkt(b"# service=git-receive-pack\n")
        + b"0000"
        + _pkt(
            f"{main} refs/heads/main\0report-status symref=refs/heads/m:refs/heads/main\n".encode()
        )
        + _pkt(f"{main} refs/heads/alias\n".encode())
        + _pkt(f"{other} refs/heads/feature\n".encode())
        + b"0000"
    )
    seen = push.advertised(body)
    assert seen is not None
    assert seen.tips == {
        "refs/heads/main": main,
        "refs/heads/alias": main,
        "refs/heads/feature": other,
    }
    patterns = ("refs/heads/main",)
    new = "3" * 40
    assert seen.guarded(push.RefUpdate(main, new, "refs/heads/main"), patterns) == "protected"
    assert "symbolic ref of refs/heads/main" in seen.guarded(
        push.RefUpdate(push.ZERO, new, "refs/heads/m"), patterns
    )
    assert "tip of refs/heads/main" in seen.guarded(
        push.RefUpdate(main, new, "refs/heads/alias"), patterns
    )
    assert seen.guarded(push.RefUpdate(other, new, "refs/heads/feature"), patterns) == ""
    assert seen.guarded(push.RefUpdate(push.ZERO, new, "refs/heads/new"), patterns) == ""
    assert push.advertised(b"zzzz") is None
