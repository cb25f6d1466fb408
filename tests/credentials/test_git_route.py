"""git over https through the daemon's credential route, with real git inside a
proxied sandbox: clone, fetch and push to an upstream that requires the token, which
the sandbox never holds; pushes that must ask are refused when nobody can answer."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentd_client import Client
from tests.credentials.conftest import GIT_HOST, Routes

pytestmark = pytest.mark.timeout(300)

IDENT = "-c user.name=a -c user.email=a@b"


def bash(client: Client, sid: str, command: str) -> str:
    return client.run_tool(sid, "Bash", {"command": command, "timeout": 240_000}).text


def _upstream_head(routes: Routes, ref: str) -> str:
    out = subprocess.run(
        ["git", "--git-dir", str(routes.repos / "demo.git"), "rev-parse", "--verify", "-q", ref],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


@pytest.fixture
def sid(routes: Routes, net_workspace: Path):
    with routes.client() as client:
        yield (
            client,
            client.create_session(str(net_workspace), permission_mode="bypassPermissions").id,
        )


def test_clone_fetch_and_push_a_branch_through_the_route(routes: Routes, sid) -> None:
    client, s = sid
    url = f"https://{GIT_HOST}:{routes.git_port}/demo.git"
    out = bash(
        client,
        s,
        f"git clone -q {url} work && cat work/MARKER && git -C work fetch -q origin && "
        f"echo FETCHED && cd work && git checkout -q -b feature && echo two > TWO && "
        f"git add TWO && git {IDENT} commit -qm two && git push -q origin feature && "
        f"echo PUSHED1 && echo three > THREE && git add THREE && git {IDENT} commit -qm three "
        "&& git push -q origin feature && echo PUSHED2 && echo HEAD=$(git rev-parse HEAD)",
    )
    assert "MARKER-HTTPS" in out and "FETCHED" in out and "PUSHED2" in out, out
    head = out.split("HEAD=", 1)[1].split()[0]
    assert _upstream_head(routes, "refs/heads/feature") == head
    # The upstream got the token on every request; the sandbox never saw it.
    assert routes.git_token not in out
    # Every push is an event: the repository, the ref, old -> new, who allowed it.
    pushes = git_pushes(client, s)
    assert len(pushes) == 2, pushes
    assert pushes[0].updates[0].kind == "create"
    last = pushes[-1]
    update = last.updates[0]
    assert update.ref == "refs/heads/feature" and update.new == head
    assert update.kind == "fast-forward" and last.allowed, last
    assert last.repository == f"https://{GIT_HOST}:{routes.git_port}/demo.git"


def test_pushes_that_must_ask_are_refused_with_nobody_to_ask(routes: Routes, sid) -> None:
    """main (protected), a force push, a deletion, a tag, a protected ref hidden in a
    multi-ref push and one reached by a renaming refspec: each asks a person, and with
    nobody attached it is refused; the upstream keeps what it had."""
    client, s = sid
    url = f"https://{GIT_HOST}:{routes.git_port}/demo.git"
    main_before = _upstream_head(routes, "refs/heads/main")
    out = bash(
        client,
        s,
        f"git clone -q {url} w2 && cd w2 && echo x > X && git add X && "
        f"git {IDENT} commit -qm x && git push origin main 2>&1; echo RC=$?; "
        "git push origin HEAD:refs/heads/side 2>&1; echo SIDE=$?; "
        "git push origin main:side2 HEAD:refs/heads/release/1 2>&1; echo MULTI=$?; "
        "git push origin HEAD:refs/tags/v1 2>&1; echo TAG=$?; "
        f"git {IDENT} commit -q --amend -m y && git push -f origin HEAD:refs/heads/side 2>&1; "
        "echo FORCE=$?; git push origin :refs/heads/side 2>&1; echo DELETE=$?",
    )
    assert "RC=1" in out and "[remote rejected]" in out, out
    assert "asks a person and none is attached" in out, out
    assert "SIDE=0" in out, out  # a new unprotected branch goes through
    assert "MULTI=1" in out and "TAG=1" in out and "FORCE=1" in out and "DELETE=1" in out, out
    assert _upstream_head(routes, "refs/heads/main") == main_before
    assert _upstream_head(routes, "refs/heads/release/1") == ""
    assert _upstream_head(routes, "refs/heads/side2") == ""
    assert _upstream_head(routes, "refs/tags/v1") == ""
    assert _upstream_head(routes, "refs/heads/side") != ""  # not deleted, not forced
    refused = [p for p in git_pushes(client, s) if not p.allowed]
    assert len(refused) == 5, refused
    assert all("none is attached" in p.decided_by for p in refused)


def git_pushes(client: Client, sid: str) -> list:
    """The session's journaled pushes."""
    return [e.git_push for e in client.attach(sid, follow=False) if e.HasField("git_push")]


def test_a_push_to_a_servers_alias_of_a_protected_ref_asks(routes: Routes, sid) -> None:
    """The server keeps refs/heads/trunk as a symbolic ref of refs/heads/main: a push to
    trunk updates main. Judged by what the server would update (the old id is main's
    tip), it asks as a push to main does; with nobody attached it is refused."""
    client, s = sid
    git_dir = str(routes.repos / "demo.git")
    alias = ["git", "--git-dir", git_dir, "symbolic-ref"]
    subprocess.run([*alias, "refs/heads/trunk", "refs/heads/main"], check=True)
    try:
        main_before = _upstream_head(routes, "refs/heads/main")
        url = f"https://{GIT_HOST}:{routes.git_port}/demo.git"
        out = bash(
            client,
            s,
            f"git clone -q {url} w3 && cd w3 && echo z > Z && git add Z && "
            f"git {IDENT} commit -qm z && git push origin HEAD:refs/heads/trunk 2>&1; "
            "echo TRUNK=$?",
        )
        assert "TRUNK=1" in out and "[remote rejected]" in out, out
        assert _upstream_head(routes, "refs/heads/main") == main_before
        (refused,) = [p for p in git_pushes(client, s) if p.updates[0].ref == "refs/heads/trunk"]
        assert not refused.allowed and refused.updates[0].protected, refused
    finally:
        subprocess.run([*alias, "--delete", "refs/heads/trunk"], check=True)


def test_a_fast_forward_whose_objects_went_up_before_is_proven(routes: Routes, sid) -> None:
    """The commits went up with one branch; moving another branch onto them sends an
    empty pack. The route proves the fast-forward from the commits it relayed before,
    so it goes through unasked."""
    client, s = sid
    url = f"https://{GIT_HOST}:{routes.git_port}/demo.git"
    out = bash(
        client,
        s,
        # base starts on a commit of its own: a branch on main's tip is main's alias.
        f"git clone -q {url} w3 && cd w3 && echo x > X && git add X && "
        f"git {IDENT} commit -qm x && git push -q origin HEAD:refs/heads/base && "
        f"echo y > Y && git add Y && git {IDENT} commit -qm y && "
        "git push -q origin HEAD:refs/heads/feat && "
        "git push origin HEAD:refs/heads/base 2>&1; echo RC=$?; echo HEAD=$(git rev-parse HEAD)",
    )
    assert "RC=0" in out, out
    head = out.split("HEAD=", 1)[1].split()[0]
    assert _upstream_head(routes, "refs/heads/base") == head
    last = git_pushes(client, s)[-1]
    assert last.updates[0].ref == "refs/heads/base", last
    assert last.updates[0].kind == "fast-forward" and last.allowed, last
