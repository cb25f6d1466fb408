"""WebFetch cannot reach inside: through the real daemon, every spelling of loopback,
private, link-local (cloud metadata), unique-local, multicast and reserved addresses is
refused after resolution, and a redirect to one of them is not a way in. A test site on
127.0.0.1 counts every request that reaches it: a refusal must leave it untouched."""

from __future__ import annotations

import shutil
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agentd_client import Client
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.workspaces import reachable_workspace


class Site:
    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
                site.hits[self.path] += 1
                if self.path.startswith("/to/"):
                    self.send_response(302)
                    self.send_header("Location", "http://" + self.path.removeprefix("/to/"))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = b"<html><body><h1>inside the machine</h1></body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,))
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


def _daemon(base: Path, allow: list[str] | None) -> DaemonProcess:
    args: list[str] = []
    if allow is not None:
        config = base / "config.toml"
        base.mkdir(parents=True, exist_ok=True)
        config.write_text(f"webfetch_allow_private_hosts = {allow!r}\n".replace("'", '"'))
        args = ["--config", str(config)]
    return start_daemon(base, args)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    d = _daemon(tmp_path_factory.mktemp("plain"), None)
    yield d
    assert d.stop() == 0, d.log
    assert "Traceback" not in d.log, d.log


@pytest.fixture(scope="module")
def opted_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """A daemon whose operator allowed the name `localhost` (and nothing else inside)."""
    d = _daemon(tmp_path_factory.mktemp("optin"), ["localhost"])
    yield d
    assert d.stop() == 0, d.log
    assert "Traceback" not in d.log, d.log


def fetch(daemon: DaemonProcess, url: str):
    with Client(daemon.socket, timeout=60) as c:
        ws = reachable_workspace()
        try:
            sid = c.create_session(str(ws), permission_mode="bypassPermissions").id
            return c.run_tool(sid, "WebFetch", {"url": url, "prompt": "What is inside?"})
        finally:
            shutil.rmtree(ws, ignore_errors=True)


SPELLINGS = [
    "127.0.0.1:{port}",
    "localhost:{port}",
    "[::1]:{port}",
    "2130706433:{port}",  # 127.0.0.1 as one decimal number
    "0x7f.1:{port}",  # hex, short form
    "0x7f000001:{port}",
    "017700000001:{port}",  # octal
    "127.1:{port}",
    "[::ffff:127.0.0.1]:{port}",  # IPv4-mapped IPv6
    "[::ffff:7f00:1]:{port}",
    "0.0.0.0:{port}",  # reaches the local listener on Linux
    "[::]:{port}",
]
ELSEWHERE_INSIDE = [
    ("169.254.169.254/latest/meta-data/", "cloud metadata"),
    ("[fd00:ec2::254]/latest/meta-data/", "unique-local"),
    ("10.0.0.1/", "private"),
    ("172.16.0.1/", "private"),
    ("192.168.1.1/", "private"),
    ("100.64.0.1/", "CGNAT"),
    ("169.254.1.1/", "link-local"),
    ("[fe80::1]/", "link-local"),
    ("[fc00::1]/", "unique-local"),
    ("224.0.0.1/", "multicast"),
    ("[ff02::1]/", "multicast"),
    ("240.0.0.1/", "reserved"),
    ("255.255.255.255/", "reserved"),
    ("[64:ff9b::a00:1]/", "IPv4-embedding private"),
]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_loopback_in_any_spelling_is_refused(plain: DaemonProcess, site: Site, spelling: str):
    before = sum(site.hits.values())
    r = fetch(plain, "http://" + spelling.format(port=site.port) + "/page")
    assert r.is_error
    assert "refused to connect" in r.text and "webfetch_allow_private_hosts" in r.text, r.text
    assert "inside the machine" not in r.text
    assert sum(site.hits.values()) == before


# Spellings that fail before any connection here (the resolver does not know the name,
# or httpx refuses the URL): still never a way in.
FAIL_EARLIER = ["LOCALHOST.:{port}", "0177.0.0.1:{port}", "127.0.0.1.nip.io:{port}"]


@pytest.mark.parametrize("spelling", FAIL_EARLIER)
def test_other_spellings_never_reach_the_site(plain: DaemonProcess, site: Site, spelling: str):
    before = sum(site.hits.values())
    r = fetch(plain, "http://" + spelling.format(port=site.port) + "/page")
    assert r.is_error and "inside the machine" not in r.text
    assert sum(site.hits.values()) == before


@pytest.mark.parametrize(("where", "reason"), ELSEWHERE_INSIDE)
def test_internal_networks_are_refused(plain: DaemonProcess, where: str, reason: str) -> None:
    r = fetch(plain, "http://" + where)
    assert r.is_error
    assert "refused to connect" in r.text and reason in r.text, r.text


def test_the_opt_in_names_one_host_and_only_that_host(opted_in: DaemonProcess, site: Site):
    r = fetch(opted_in, f"http://localhost:{site.port}/page")
    assert not r.is_error, r.text
    assert "inside the machine" in r.text
    # The same address under another name is not named by the rule.
    r = fetch(opted_in, f"http://127.0.0.1:{site.port}/page")
    assert r.is_error and "refused to connect" in r.text


def test_a_redirect_from_an_allowed_host_to_an_internal_one_is_no_way_in(
    opted_in: DaemonProcess, site: Site
) -> None:
    for target in (f"127.0.0.1:{site.port}/secret", "169.254.169.254/latest/meta-data/"):
        r = fetch(opted_in, f"http://localhost:{site.port}/to/{target}")
        assert not r.is_error
        assert "redirected (302 Found) to a different host" in r.text
        # Doing what the result suggests is refused in turn.
        r = fetch(opted_in, f"http://{target}")
        assert r.is_error and "refused to connect" in r.text, r.text
    assert site.hits["/secret"] == 0
