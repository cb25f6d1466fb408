"""Attacks on the credential routes from inside a proxied sandbox, through the real
daemon, each behind the guard (tests/sandbox/guard.py): read the token (environment,
every process's /proc, the source's file, an upstream that echoes it, redirects out
and back), make the route reach another host or another path (traversal as written
and encoded, absolute request lines, a foreign Host), use a route no rule allows, and
have the daemon's `git credential fill` run a workspace's hostile helper.

Each was checked to get through with the route's check taken out (see the report)."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest

from tests.credentials import spelled
from tests.credentials.conftest import GIT_HOST, ROUTE_PORT, Routes
from tests.sandbox._sandbox_attack import bash, guarded_py, guarded_sh

pytestmark = pytest.mark.timeout(300)

# Inside the sandbox: one raw request to the route listener, printed as received.
RAW = r"""
import base64, socket, sys
head = base64.b64decode(sys.argv[1])
s = socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=60)
s.sendall(head)
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print(data.decode("latin-1"))
"""


@pytest.fixture
def sid(routes: Routes, net_workspace: Path):
    with routes.client() as client:
        yield (
            client,
            client.create_session(str(net_workspace), permission_mode="bypassPermissions").id,
        )


def raw(client, sid: str, line: str, host: str = f"127.0.0.1:{ROUTE_PORT}", first: str = "") -> str:
    head = f"{line} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode("latin-1")
    if first:  # an earlier request on the same connection
        head = f"{first} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode("latin-1") + head
    return bash(client, sid, guarded_py(RAW, base64.b64encode(head).decode(), str(ROUTE_PORT))).text


def test_the_token_is_nowhere_inside(routes: Routes, sid) -> None:
    """Not in the environment, any visible process's environ or argv (while a clone
    through the route runs), nor the source's file; the route did work meanwhile."""
    client, s = sid
    url = f"https://{GIT_HOST}:{routes.git_port}/demo.git"
    out = bash(
        client,
        s,
        guarded_sh(
            f"(git clone -q {url} /tmp/c && echo CLONED) & "
            "env; for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null; echo; done; "
            f"cat {routes.token_file} 2>&1; grep -rs {routes.git_token[:10]} /tmp 2>/dev/null "
            "| head -3; wait; for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null; "
            "done; git -C /tmp/c config --list"
        ),
    ).text
    assert "CLONED" in out, out
    assert "127.0.0.1:3130/git/" in out, out  # the sandbox sees the route, not the token
    for token in (routes.git_token, routes.pypi_token):
        assert token not in out, out
        assert token[:12] not in out, out


def test_an_upstream_echoing_the_token_has_it_masked(routes: Routes, sid) -> None:
    client, s = sid
    out = raw(client, s, "GET /git/echo-auth")
    assert "200 OK" in out and "you sent: ********" in out, out
    assert routes.git_token not in out
    encoded = base64.b64encode(f"agentd-bot:{routes.git_token}".encode()).decode()
    assert encoded not in out and encoded[:16] not in out, out
    out = raw(client, s, "GET /pypi/echo-auth")
    assert "you sent: ********" in out and routes.pypi_token not in out, out


@pytest.mark.parametrize("route", ["git", "pypi"])
def test_an_upstream_echoing_the_token_in_any_spelling_has_it_masked(
    routes: Routes, sid, route: str
) -> None:
    """JSON, percent and HTML escapes, base64 and base64url of the token and of the
    `user:token` pair, sent in 7-byte chunks: streamed (git) and held whole (pypi)."""
    client, s = sid
    url = f"http://127.0.0.1:{ROUTE_PORT}/{route}/echo-spellings"
    out = bash(client, s, guarded_sh(f"curl -sS --max-time 60 {url}")).text
    token = routes.git_token if route == "git" else routes.pypi_token
    for name in spelled.every(token, "agentd-bot"):
        assert f"\n{name}: " in "\n" + out, out
    assert not spelled.leaks(out, token), out


def test_a_redirect_out_of_the_route_is_not_passed_on(routes: Routes, sid) -> None:
    client, s = sid
    out = raw(client, s, "GET /git/redirect-out")
    assert "502" in out.split("\r\n")[0] and "redirected outside the route" in out, out
    assert "evil.test" not in out and routes.git_token not in out, out
    # One back onto the upstream under the route's prefix is mapped onto the route.
    out = raw(client, s, "GET /git/redirect-in")
    assert f"location: http://127.0.0.1:{ROUTE_PORT}/git/demo.git/info/refs" in out.lower(), out


@pytest.mark.parametrize(
    "line",
    [
        "GET /git/../pypi/x",
        "GET /git/demo.git/../../etc",
        "GET /git/%2e%2e/%2e%2e/x",
        "GET /git/demo.git/..%2f..%2fx",
        "GET /git/%252e%252e/x",
        "GET /git//other-host.test/x",
        "GET /pypi/../../other/path",
        "GET /pypi/%2E%2E/admin",
        f"GET https://{GIT_HOST}:1/demo.git/info/refs",
        "GET http://evil.test/demo.git/info/refs",
        "GET /git\\..\\x",
    ],
)
def test_the_route_refuses_paths_outside_its_prefix(routes: Routes, sid, line: str) -> None:
    client, s = sid
    before = (len(routes.git_seen.requests), len(routes.pypi_seen.requests))
    out = raw(client, s, line)
    status = out.split("\r\n")[0]
    assert " 403 " in status or " 400 " in status or " 404 " in status, out
    git_new = routes.git_seen.requests[before[0] :]
    pypi_new = routes.pypi_seen.requests[before[1] :]
    assert not git_new and not pypi_new, (git_new, pypi_new)
    assert all(p.startswith("/simple/") for p in routes.pypi_seen.paths())


@pytest.mark.parametrize("host", ["evil.test", f"{GIT_HOST}:1", "127.0.0.1:3128"])
def test_a_foreign_host_header_is_refused(routes: Routes, sid, host: str) -> None:
    client, s = sid
    before = len(routes.git_seen.requests)
    out = raw(client, s, "GET /git/demo.git/info/refs?service=git-upload-pack", host=host)
    assert " 403 " in out.split("\r\n")[0] and "ask it as 127.0.0.1" in out, out
    assert len(routes.git_seen.requests) == before


def test_a_route_no_rule_allows_is_refused(routes: Routes, sid) -> None:
    """nowhere.test is allowed by no rule; in bypassPermissions nobody is asked."""
    client, s = sid
    out = raw(client, s, "GET /nowhere/agentdcredsdemo/")
    assert " 403 " in out.split("\r\n")[0] and "nowhere.test" in out, out
    assert "X-Agentd-Route: refused" in out, out


def test_a_workspace_credential_helper_never_runs_in_the_daemon(
    routes: Routes, sid, net_workspace: Path, tmp_path: Path
) -> None:
    """The workspace's .git/config names a credential.helper and a core.askPass that
    would leave a mark; the route's `git credential fill` source answers from the
    configured HOME only, asked about the configured host only."""
    client, s = sid
    marker = tmp_path / "pwned"
    hostile = tmp_path / "hostile.sh"
    hostile.write_text(f"#!/bin/sh\ntouch {marker}\necho password=stolen\n")
    hostile.chmod(0o755)
    git_dir = net_workspace / ".git"
    (git_dir / "hooks").mkdir(parents=True, exist_ok=True)
    owner = net_workspace.stat()
    for path in (git_dir, git_dir / "hooks"):
        os.chown(path, owner.st_uid, owner.st_gid)
    (git_dir / "config").write_text(
        f"[credential]\n\thelper = {hostile}\n[core]\n\taskPass = {hostile}\n"
        f'[credential "https://{GIT_HOST}"]\n\thelper = {hostile}\n'
    )
    url = f"https://{GIT_HOST}:{routes.git_port}/fill/demo.git"
    out = bash(client, s, guarded_sh(f"git clone -q {url} /tmp/f && cat /tmp/f/MARKER")).text
    assert "MARKER-FILL" in out, out
    assert not marker.exists()
    asked = (routes.token_file.parent / "fill-home" / "asked").read_text()
    assert f"host={GIT_HOST}:{routes.git_port}" in asked
    assert all(
        line.split("=", 1)[1] in (f"{GIT_HOST}:{routes.git_port}",)
        for line in asked.splitlines()
        if line.startswith("host=")
    ), asked
    assert routes.git_token not in out
    os.unlink(git_dir / "config")


def test_an_upstream_connection_closed_while_kept_is_opened_anew(routes: Routes, sid) -> None:
    """Not an attack: the route keeps its upstream connection between requests; one the
    upstream dropped meanwhile is replaced, and the second request is still answered."""
    client, s = sid
    out = raw(
        client,
        s,
        "GET /git/demo.git/info/refs?service=git-upload-pack",
        first="GET /git/close-next",
    )
    assert out.count("HTTP/1.1 200") == 2 and "bye" in out and "git-upload-pack" in out, out


def test_a_source_that_fails_is_one_line_naming_it(routes: Routes, sid) -> None:
    client, s = sid
    before = len(routes.pypi_seen.requests)
    out = raw(client, s, "GET /broken/agentdcredsdemo/")
    assert " 502 " in out.split("\r\n")[0], out
    body = out.split("\r\n\r\n", 1)[1].strip()
    assert body.count("\n") == 0 and "its credential" in body and "no-such-token" in body, body
    assert len(routes.pypi_seen.requests) == before


# Inside the sandbox: a receive-pack request for refs/heads/main (old == new, so a push
# that got through would answer "ok refs/heads/main"), posted at the path given.
PUSH = r"""
import hashlib, socket, sys
path, port, old = sys.argv[1], int(sys.argv[2]), sys.argv[3]
line = f"{old} {old} refs/heads/main\0report-status\n".encode()
pack = b"PACK" + (2).to_bytes(4, "big") + (0).to_bytes(4, "big")
body = b"%04x" % (len(line) + 4) + line + b"0000" + pack + hashlib.sha1(pack).digest()
head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
        "Content-Type: application/x-git-receive-pack-request\r\n"
        f"Content-Length: {len(body)}\r\n\r\n").encode()
s = socket.create_connection(("127.0.0.1", port), timeout=60)
s.sendall(head + body)
data = b""
while chunk := s.recv(65536):
    data += chunk
print(data.decode("latin-1"))
"""


@pytest.mark.parametrize(
    "path",
    [
        "/git/demo.git/git-receive-pack",
        "/git/demo.git/git-receive-pack?x=1",
        "/git/demo.git/git%2Dreceive-pack",
        "/git/demo.git/GIT-RECEIVE-PACK",
        "/git/demo.git/git-receive-pack/",
    ],
)
def test_a_push_to_a_protected_ref_is_read_whatever_its_path(routes: Routes, sid, path: str):
    """However the receive-pack path is spelled, its ref updates are read: main is
    protected, nobody is attached, so it is refused by the route (or the path is)."""
    client, s = sid
    main = subprocess.run(
        ["git", "--git-dir", str(routes.repos / "demo.git"), "rev-parse", "refs/heads/main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    out = bash(client, s, guarded_py(PUSH, path, str(ROUTE_PORT), main)).text
    assert "ok refs/heads/main" not in out, out
    assert "ng refs/heads/main agentd:" in out or " 403 " in out.split("\r\n")[0], out


def test_dumb_http_pushes_are_refused(routes: Routes, sid) -> None:
    client, s = sid
    for line in ("PUT /git/demo.git/objects/ab/cd", "MKCOL /git/demo.git/x", "POST /git/x"):
        out = raw(client, s, line)
        assert " 403 " in out.split("\r\n")[0] and "smart http only" in out, out


def test_an_http_route_carries_no_push(routes: Routes, sid) -> None:
    """A header-adding route to a git host would carry a push unread: refused."""
    client, s = sid
    out = bash(
        client, s, guarded_py(PUSH, "/pypi/demo.git/git-receive-pack", str(ROUTE_PORT), "0" * 40)
    ).text
    assert " 403 " in out.split("\r\n")[0] and "not a git route" in out, out
