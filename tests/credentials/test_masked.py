"""Masked credentials through the real daemon, with real clients in the sandbox: the
sandbox holds a placeholder of the secret's shape; curl, Python's requests and httpx,
the anthropic SDK and git over https authenticate with it, as the proxy puts the real
value in on the way to the entry's injectHosts and takes it out of every answer."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from tests.credentials import spelled
from tests.credentials.masked_world import (
    ANTHROPIC,
    API,
    GHE,
    GIT,
    GIT_CRED_PATH,
    NPMRC_PATH,
    OTHER,
    World,
    masked_world,
)
from tests.sandbox._sandbox_attack import bash, guarded_sh
from tests.support.waiting import wait_for_event

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with masked_world(tmp_path_factory.mktemp("agentd-masked")) as w:
        yield w


@pytest.fixture
def sid(world: World, net_workspace: Path) -> Iterator[tuple[Client, str]]:
    with Client(world.daemon.socket, timeout=240) as client:
        session = client.create_session(
            str(net_workspace),
            permission_mode="bypassPermissions",
            env={"AGENTD_TEST_DENIED": "from-the-session", "GITHUB_TOKEN": "from-the-session"},
        )
        yield client, session.id


def _placeholder(client: Client, sid: str, name: str) -> str:
    return bash(client, sid, f'printf %s "${name}"').text.strip()


def test_the_sandbox_sees_placeholders_of_the_same_shape(world: World, sid) -> None:
    client, s = sid
    gh = _placeholder(client, s, "GITHUB_TOKEN")
    key = _placeholder(client, s, "ANTHROPIC_API_KEY")
    assert gh.startswith("ghp_") and len(gh) == len(world.gh_token) and gh != world.gh_token
    assert key.startswith("sk-ant-api03-") and len(key) == len(world.anthropic_key)
    assert key != world.anthropic_key
    out = bash(client, s, f'echo "[$AGENTD_TEST_DENIED]"; cat {GIT_CRED_PATH}').text
    assert "[]" in out, out  # denied: unset, whatever the session's environment said
    # The file's secret is a placeholder of its own entry, shaped the same.
    shown = re.search(r"agentd-bot:(ghp_[0-9a-z]+)@" + GIT, out)
    assert shown is not None and len(shown.group(1)) == len(world.gh_token), out
    assert world.gh_token not in out


def test_placeholders_are_per_session(world: World, sid, net_workspace: Path) -> None:
    client, s = sid
    other = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
    assert _placeholder(client, s, "GITHUB_TOKEN") != _placeholder(client, other, "GITHUB_TOKEN")


def test_curl_with_a_bearer_header_from_the_environment(world: World, sid) -> None:
    client, s = sid
    out = bash(
        client, s, f'curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" {world.url(API, "/user")}'
    ).text
    assert '"login":"octo"' in out, out
    first = wait_for_event(
        client,
        s,
        lambda e: (
            e.HasField("permission_decided")
            and e.permission_decided.behavior == "allow"
            and "envVars GITHUB_TOKEN" in e.permission_decided.decided_by
        ),
    ).permission_decided
    assert f"{API}:{world.api_port}" in first.reason and "first use" in first.reason, first


def test_curl_through_socks5_too(world: World, sid) -> None:
    client, s = sid
    out = bash(
        client,
        s,
        f'curl -sS -x "$ALL_PROXY" -H "Authorization: Bearer $GITHUB_TOKEN" '
        f"{world.url(API, '/user')}",
    ).text
    assert '"login":"octo"' in out, out


@pytest.mark.skipif(shutil.which("gh") is None, reason="gh is not installed (make system-deps)")
def test_gh_api_with_the_token_from_the_environment(world: World, sid) -> None:
    """gh against a GitHub Enterprise host (ghe.test): GH_ENTERPRISE_TOKEN from the
    masked variable, through the proxy, trusting the session's CA."""
    if not world.ghe:
        pytest.skip("no loopback address with a free port 443 for ghe.test")
    client, s = sid
    out = bash(
        client,
        s,
        f'GH_ENTERPRISE_TOKEN="$GITHUB_TOKEN" GH_CONFIG_DIR=/tmp/gh gh api user --hostname {GHE}',
    ).text
    assert '"login":"octo"' in out, out


def test_python_requests_and_httpx(world: World, sid) -> None:
    client, s = sid
    code = (
        "import os, requests, httpx\n"
        "h = {'Authorization': 'token ' + os.environ['GITHUB_TOKEN']}\n"
        f"print('requests', requests.get('{world.url(API, '/user')}', headers=h).text)\n"
        f"print('httpx', httpx.get('{world.url(API, '/user')}', headers=h).text)\n"
    )
    out = bash(client, s, f"{_python(world)} -c {_quote(code)}").text
    assert 'requests {"login":"octo"}' in out, out
    assert 'httpx {"login":"octo"}' in out, out


def test_the_anthropic_sdk_against_a_messages_api(world: World, sid) -> None:
    client, s = sid
    code = (
        "import anthropic\n"
        f"c = anthropic.Anthropic(base_url='{world.url(ANTHROPIC, '')}')\n"
        "m = c.messages.create(model='claude-test', max_tokens=16,"
        " messages=[{'role': 'user', 'content': 'hi'}])\n"
        "print(m.content[0].text)\n"
    )
    out = bash(client, s, f"{_python(world)} -c {_quote(code)}").text
    assert "hello from the fake Messages API" in out, out


def test_git_over_https_with_a_masked_credential_file(world: World, sid) -> None:
    client, s = sid
    out = bash(
        client,
        s,
        # The store helper for "get" only: the file is read-only.
        f"git -c credential.helper='!f() {{ test $1 = get && "
        f"git credential-store --file={GIT_CRED_PATH} get; }}; f' clone -q "
        f"{world.url(GIT, '/demo.git')} /tmp/demo && cat /tmp/demo/MARKER",
    ).text
    assert "MARKER-MASKED" in out, out


def test_npm_installs_with_a_masked_npmrc_token(world: World, sid) -> None:
    client, s = sid
    out = bash(
        client,
        s,
        f"cat {NPMRC_PATH}; cd /tmp && NPM_CONFIG_USERCONFIG={NPMRC_PATH} npm install "
        "--no-audit --no-fund --cache /tmp/npm-cache agentd-masked-npm 2>&1 | tail -3 && "
        "node -e \"console.log(require('agentd-masked-npm'))\"",
    ).text
    assert "from-agentd-masked-npm-1.0.0" in out, out
    assert world.gh_token not in out and "_authToken=ghp_" in out, out


def test_an_echo_of_the_real_value_comes_back_as_the_placeholder(world: World, sid) -> None:
    """api.test echoes what it got (the real value, in the URL, a header and the body,
    also base64-encoded): the sandbox reads the placeholder, or `*`s."""
    client, s = sid
    gh = _placeholder(client, s, "GITHUB_TOKEN")
    out = bash(
        client,
        s,
        guarded_sh(
            f'curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" -d "body=$GITHUB_TOKEN" '
            f'"{world.url(API, "/echo")}?q=$GITHUB_TOKEN"',
        ),
    ).text
    echoed = json.loads(out)
    assert echoed["auth"] == f"Bearer {gh}", out
    assert echoed["path"] == f"/echo?q={gh}", out
    assert echoed["body"] == f"body={gh}", out
    assert world.gh_token not in out
    assert base64.b64encode(f"Bearer {world.gh_token}".encode()).decode()[8:40] not in out
    # The upstream did get the real value, everywhere the placeholder was.
    host, _, path, headers, body = world.seen.requests[-1]
    assert path == f"/echo?q={world.gh_token}"
    assert headers["authorization"] == f"Bearer {world.gh_token}"
    assert body == f"body={world.gh_token}".encode()


def test_an_echo_compressed_against_our_asking_comes_back_masked(world: World, sid) -> None:
    """An upstream that gzips although asked for identity: inflated and masked."""
    client, s = sid
    gh = _placeholder(client, s, "GITHUB_TOKEN")
    for flag in ("", "--compressed"):
        out = bash(
            client,
            s,
            guarded_sh(
                f'curl -sS {flag} -H "Authorization: Bearer $GITHUB_TOKEN" '
                f'"{world.url(API, "/echo-gzip")}?q=$GITHUB_TOKEN"'
            ),
        ).text
        assert json.loads(out) == {"auth": f"Bearer {gh}", "path": f"/echo-gzip?q={gh}"}, out
        assert world.gh_token not in out


def test_the_real_value_echoed_in_every_spelling_does_not_come_back(world: World, sid) -> None:
    """git.test echoes the token it got (inside Basic credentials, swapped there) in
    every spelling a body can carry it in, 7 bytes a chunk: none of it can be read."""
    client, s = sid
    out = bash(
        client,
        s,
        guarded_sh(f'curl -sS -u "agentd-bot:$GITHUB_TOKEN" {world.url(GIT, "/echo-spellings")}'),
    ).text
    assert "json-u-lower:" in out and "b64-pair:" in out, out
    assert not spelled.leaks(out, world.gh_token), spelled.leaks(out, world.gh_token)


def test_a_large_body_is_swapped_as_it_streams(world: World, sid) -> None:
    """Past the 1 MiB held, a body streams: a placeholder 2 MiB in is still swapped; a
    foreign one that far in cuts the connection before it goes (the upstream sees the
    request cut short)."""
    client, s = sid
    gh = _placeholder(client, s, "GITHUB_TOKEN")
    make = (
        "head -c 2097152 /dev/zero | tr '\\0' a > /tmp/b; printf %s \"${0}\" >> /tmp/b; "
        "head -c 1048576 /dev/zero | tr '\\0' b >> /tmp/b"
    )
    out = bash(
        client,
        s,
        make.format("GITHUB_TOKEN")
        + f" && curl -sS --data-binary @/tmp/b {world.url(API, '/echo')} | head -c 100; echo",
    ).text
    assert "echo" in out, out
    _, _, _, _, body = world.seen.requests[-1]
    assert len(body) == 3 * 1048576 + len(gh)
    assert body[2097152 : 2097152 + len(gh)] == world.gh_token.encode()
    before = len(world.seen.requests)
    out = bash(
        client,
        s,
        make.format("ANTHROPIC_API_KEY")
        + f' && curl -sS --data-binary @/tmp/b {world.url(API, "/echo")}; echo " exit=$?"',
    ).text
    assert "exit=0" not in out, out
    # The upstream saw at most the part before the placeholder, cut short.
    shown = _placeholder(client, s, "ANTHROPIC_API_KEY").encode()
    for *_, body in world.seen.requests[before:]:
        assert len(body) <= 2097152, len(body)
        assert shown not in body and world.anthropic_key.encode() not in body
    assert "api.test" in _refusal(client, s, "envVars ANTHROPIC_API_KEY goes only to")


def test_other_hosts_are_tunnelled_untouched(world: World, sid) -> None:
    """other.test is in no entry's injectHosts: not terminated (the session's bundle
    does not trust its certificate; the test's CA does), and it gets the worthless
    placeholder as sent."""
    client, s = sid
    gh = _placeholder(client, s, "GITHUB_TOKEN")
    url = world.url(OTHER, "/echo")
    out = bash(client, s, f'curl -sS {url}; echo " exit=$?"').text
    assert "exit=60" in out, out
    auth = '-H "Authorization: Bearer $GITHUB_TOKEN"'
    out = bash(client, s, f"curl -sS --cacert {world.test_ca} {auth} {url}").text
    assert json.loads(out)["auth"] == f"Bearer {gh}", out
    host, _, _, headers, _ = world.seen.requests[-1]
    assert OTHER in host and headers["authorization"] == f"Bearer {gh}"


def _python(world: World) -> str:
    """The sandbox's python with the clients; httpx without socksio takes HTTPS_PROXY
    only when ALL_PROXY (socks) is not set."""
    return f"env -u ALL_PROXY -u all_proxy PYTHONPATH={world.pythonpath} python3"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _refusal(client: Client, sid: str, says: str) -> str:
    """The Network refusal event of the session that says `says` (its decided_by)."""
    return wait_for_event(
        client,
        sid,
        lambda e: (
            e.HasField("permission_decided")
            and e.permission_decided.tool_name == "Network"
            and e.permission_decided.behavior == "deny"
            and says in e.permission_decided.decided_by
        ),
    ).permission_decided.reason


def test_a_placeholder_sent_to_another_entrys_host_is_refused(world: World, sid) -> None:
    client, s = sid
    before = len(world.seen.requests)
    out = bash(
        client,
        s,
        guarded_sh(
            f'curl -sS -i -H "x-api-key: $GITHUB_TOKEN" {world.url(ANTHROPIC, "/v1/messages")}',
        ),
    ).text
    assert "403" in out and "envVars GITHUB_TOKEN" in out, out
    assert API in out, out  # where it may go
    assert len(world.seen.requests) == before  # nothing reached the upstream
    where = _refusal(client, s, "masked credential envVars GITHUB_TOKEN goes only to")
    assert ANTHROPIC in where, where


def test_a_placeholder_smuggled_in_a_redirect_is_refused(world: World, sid) -> None:
    client, s = sid
    target = world.url(ANTHROPIC, "/echo?leak=")
    out = bash(
        client,
        s,
        guarded_sh(
            f'curl -sS -L "{world.url(API, "/redirect")}?to={target}$GITHUB_TOKEN"; echo',
        ),
    ).text
    assert "envVars GITHUB_TOKEN" in out, out
    assert world.gh_token not in out
    assert not any(world.gh_token in p for h, _, p, _, _ in world.seen.requests if ANTHROPIC in h)


def test_a_placeholder_in_plain_http_is_refused(world: World, sid) -> None:
    """Whatever the host: a masked credential goes over https to its hosts only."""
    client, s = sid
    out = bash(
        client,
        s,
        guarded_sh(f'curl -sS -i "http://{OTHER}:9/x?t=$GITHUB_TOKEN"; echo'),
    ).text
    assert "403" in out and "envVars GITHUB_TOKEN" in out and "over https" in out, out
    assert f"{OTHER}:9 (plain http)" in _refusal(client, s, "envVars GITHUB_TOKEN goes only")


def test_an_invalid_upstream_certificate_is_refused(world: World, sid) -> None:
    client, s = sid
    out = bash(
        client,
        s,
        guarded_sh(
            f'curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" {world.url("bad.test", "/user")}; '
            'echo " exit=$?"',
        ),
    ).text
    assert "exit=56" in out or "502" in out, out
    assert "login" not in out
    assert "bad.test" in _refusal(client, s, "certificate could not be verified")


def test_a_client_that_does_not_trust_the_sessions_ca_is_told_why(world: World, sid) -> None:
    """Like a client pinning its host's certificate: its handshake with agentd fails,
    the session's events say so in one line; nothing is bypassed."""
    client, s = sid
    out = bash(
        client,
        s,
        f'curl -sS --cacert {world.test_ca} {world.url(API, "/user")}; echo " exit=$?"',
    ).text
    assert "exit=60" in out, out
    assert API in _refusal(client, s, "the client refused agentd's certificate")


def test_the_ca_key_is_nowhere_in_the_sandbox(world: World, sid) -> None:
    """Neither the session CA's key nor the real token in any file or process the
    sandbox sees (the command's own text is in its environment: patterns are split)."""
    client, s = sid
    out = bash(
        client,
        s,
        guarded_sh(
            "ls /run/agentd-net; echo FILES; "
            "grep -rlE 'PRIVA[T]E KEY' /run /etc /tmp /root /home 2>/dev/null; "
            f"grep -rlE '{world.gh_token[4:10]}[{world.gh_token[10]}]' /run /etc /tmp "
            "2>/dev/null; "
            "for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null; echo; done "
            f"| grep -E 'PRIVA[T]E|{world.gh_token[4:10]}[{world.gh_token[10]}]'; echo END",
        ),
    ).text
    assert "ca.pem" in out, out
    assert out.split("FILES")[1].strip() == "END", out


def test_another_sessions_ca_is_not_trusted(world: World, sid, net_workspace: Path) -> None:
    client, s = sid
    other = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
    mine = bash(client, s, "cat /run/agentd-net/ca.pem").text.strip()
    theirs = bash(client, other, "cat /run/agentd-net/ca.pem").text.strip()
    assert "BEGIN CERTIFICATE" in mine and mine != theirs
    body = re.sub(r"-----[^-]+-----|\s", "", theirs)[:64]
    bundles = "/run/agentd-net/ca-bundle.pem /etc/ssl/certs/ca-certificates.crt"
    bundle = bash(client, s, f"cat {bundles} | grep -c '{body}'").text
    assert bundle.strip().startswith("0"), bundle


def test_agentctl_credentials_lists_entries_hosts_and_use(world: World, sid) -> None:
    client, s = sid
    bash(client, s, f'curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" {world.url(API, "/user")}')
    bash(client, s, f'curl -sS -H "x-api-key: $GITHUB_TOKEN" {world.url(ANTHROPIC, "/x")}')

    def agentctl(*args: str) -> str:
        cli = [sys.executable, "-m", "agentd_client.cli.main", "--socket", world.daemon.socket]
        return subprocess.run(
            [*cli, *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout

    text = agentctl("credentials")
    assert f"$GITHUB_TOKEN: masked, goes to {API}, {GIT}, bad.test, {GHE}" in text, text
    assert "$AGENTD_TEST_DENIED: denied" in text, text
    assert f"session {s}: 1 requests, 1 refused elsewhere" in text, text
    shown = json.loads(agentctl("credentials", "--json"))
    gh = next(m for m in shown["masked"] if m["name"] == "GITHUB_TOKEN")
    assert gh["inject_hosts"] == [API, GIT, "bad.test", GHE] and gh["mode"] == "mask"
    use = next(u for u in gh["sessions"] if u["session_id"] == s)
    assert use["requests"] == "1" and use["refused"] == "1", gh
    for secret in (world.gh_token, world.anthropic_key):
        assert secret not in text and secret not in json.dumps(shown)
