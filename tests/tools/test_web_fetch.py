"""WebFetch: against a real HTTP server on 127.0.0.1 — conversion, paging, redirects,
errors, the body cap, the cache and cancellation. Nothing here reaches past loopback.

The default refuses loopback and every other internal address (test_seams_webfetch.py
attacks that); these tests run with the daemon's opt-in for 127.0.0.1 and localhost."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agentd.foundation.config import Config
from agentd.network.address import AllowList
from agentd.sessions.session import Session
from agentd.sessions.store import Store
from agentd.tools.base import ToolContext, ToolError
from agentd.tools.web_fetch.address import CheckedBackend
from agentd.tools.web_fetch.http import MAX_BODY_BYTES
from agentd.tools.web_fetch.pages import Page, PageCache
from agentd.tools.web_fetch.tool import PAGE_CHARS, WebFetch
from agentd.tools.web_fetch.url import checked_url, is_same_host
from tests.support.data import TOOL_SCHEMAS
from tests.support.services import make_services

HTML = b"""<!doctype html>
<html><head><title>Fixture page</title>
<style>body { color: red; }</style>
<script>window.SECRET_SCRIPT = 1;</script></head>
<body>
<h1>Main title</h1>
<p>Some <strong>bold</strong> text and <a href="/docs/intro">a link</a>.</p>
<h2>Second part</h2>
<ul><li>first item</li><li>second item</li></ul>
<script>console.log("SECRET_SCRIPT again")</script>
</body></html>
"""
JSON_DOC = {"name": "agentd", "tools": ["Read", "WebFetch"], "count": 2}
BIG_TEXT = "".join(f"line {i:06d} of the big text\n" for i in range(10_000))  # 270,000 chars
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@dataclass
class Site:
    port: int
    hits: Counter[str] = field(default_factory=Counter)
    # The Host header of every request, in order.
    hosts: list[str] = field(default_factory=list)
    slow_started: threading.Event = field(default_factory=threading.Event)
    release_slow: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


def make_handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def send(self, code: int, ctype: str, body: bytes, **headers: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def redirect(self, location: str) -> None:
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
            site.hits[self.path] += 1
            site.hosts.append(self.headers.get("Host", ""))
            if self.path == "/page.html":
                self.send(200, "text/html; charset=utf-8", HTML)
            elif self.path == "/agent":
                self.send(200, "text/plain", self.headers.get("User-Agent", "").encode())
            elif self.path == "/data.json":
                self.send(200, "application/json", json.dumps(JSON_DOC).encode())
            elif self.path == "/big.txt":
                self.send(200, "text/plain; charset=utf-8", BIG_TEXT.encode())
            elif self.path == "/image.png":
                self.send(200, "image/png", PNG)
            elif self.path == "/missing":
                self.send(404, "text/plain", b"no such page here")
            elif self.path == "/broken":
                self.send(500, "text/html", b"<h1>Internal trouble</h1>")
            elif self.path == "/redirect-same":
                self.redirect("/page.html")
            elif self.path == "/redirect-chain":
                self.redirect(site.url("/redirect-same"))
            elif self.path == "/redirect-cross":
                self.redirect(site.url("/page.html", host="localhost"))
            elif self.path == "/redirect-loop":
                self.redirect("/redirect-loop")
            elif self.path == "/huge":
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                chunk = b"x" * 1023 + b"\n"
                try:
                    for _ in range(MAX_BODY_BYTES // len(chunk) + 2048):
                        self.wfile.write(chunk)
                except OSError:
                    pass  # the client stopped reading at the cap
            elif self.path == "/slow":
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "100")
                self.end_headers()
                self.wfile.flush()
                site.slow_started.set()
                site.release_slow.wait(10)
            else:
                self.send(404, "text/plain", b"unknown")

    return Handler


@pytest.fixture
def site() -> Iterator[Site]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server.daemon_threads = True
    s = Site(port=server.server_address[1])
    server.RequestHandlerClass = make_handler(s)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield s
    finally:
        s.release_slow.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


async def fetch(call, url: str, prompt: str = "Summarize the page", **kw):
    return await call("WebFetch", {"url": url, "prompt": prompt, **kw})


LOCAL_OK = Config(webfetch_allow_private_hosts=["127.0.0.1", "localhost", "::1"])


@pytest.fixture
def tool_config() -> Config:
    """The conftest's `call`, with a config that allows the local test site."""
    return LOCAL_OK


# --- content ------------------------------------------------------------------------------


async def test_html_becomes_markdown_without_scripts(call, site: Site) -> None:
    r = await fetch(call, site.url("/page.html"), prompt="List the headings")
    assert not r.is_error, r.text
    assert "# Main title" in r.text
    assert "## Second part" in r.text
    assert "[a link](/docs/intro)" in r.text
    assert "**bold**" in r.text
    assert "- first item" in r.text
    assert "SECRET_SCRIPT" not in r.text
    assert "color: red" not in r.text
    # The header names the page and carries the prompt for the model to apply.
    assert site.url("/page.html") in r.text
    assert "200 OK" in r.text
    assert "text/html" in r.text
    assert "Apply this request to the content below: List the headings" in r.text

    d = r.data
    assert d["url"] == site.url("/page.html")
    assert (d["code"], d["codeText"]) == (200, "OK")
    assert d["contentType"].startswith("text/html")
    assert d["bytes"] == len(HTML)
    assert "# Main title" in d["result"] and "SECRET_SCRIPT" not in d["result"]
    assert (d["offset"], d["nextOffset"]) == (0, None)
    assert isinstance(d["durationMs"], int)


async def test_json_comes_back_as_text(call, site: Site) -> None:
    r = await fetch(call, site.url("/data.json"))
    assert not r.is_error, r.text
    assert json.loads(r.data["result"]) == JSON_DOC
    assert '"tools": ["Read", "WebFetch"]' in r.text
    assert r.data["contentType"] == "application/json"


async def test_user_agent_names_agentd(call, site: Site) -> None:
    r = await fetch(call, site.url("/agent"))
    assert r.data["result"].startswith("agentd/")


async def test_large_text_is_paged_by_offset_and_fetched_once(call, site: Site) -> None:
    r = await fetch(call, site.url("/big.txt"))
    assert not r.is_error
    assert r.data["result"] == BIG_TEXT[:PAGE_CHARS]
    assert r.data["nextOffset"] == PAGE_CHARS
    assert f"offset: {PAGE_CHARS}" in r.text
    assert f"Characters 0-{PAGE_CHARS} of {len(BIG_TEXT)}" in r.text

    parts = [r.data["result"]]
    offset = r.data["nextOffset"]
    while offset is not None:
        r = await fetch(call, site.url("/big.txt"), offset=offset)
        assert not r.is_error and r.data["offset"] == offset
        parts.append(r.data["result"])
        offset = r.data["nextOffset"]
    assert "".join(parts) == BIG_TEXT
    assert "offset:" not in r.text.split("---")[-1]  # the last part promises nothing more
    # Paging read the cache, not the server.
    assert site.hits["/big.txt"] == 1

    r = await fetch(call, site.url("/big.txt"), offset=len(BIG_TEXT) + 5)
    assert r.is_error and r.text.startswith("<tool_use_error>")
    assert "past the end" in r.text


async def test_body_over_the_cap_is_cut_with_a_note(call, site: Site) -> None:
    r = await fetch(call, site.url("/huge"))
    assert not r.is_error, r.text[:500]
    assert r.data["bytes"] == MAX_BODY_BYTES
    assert "only the first 10.0 MB were read" in r.text
    assert r.data["nextOffset"] == PAGE_CHARS


# --- errors -------------------------------------------------------------------------------


async def test_http_errors_are_results_with_the_status(call, site: Site) -> None:
    """As the reference: the status is the result (not a failed call), the body unread."""
    r = await fetch(call, site.url("/missing"))
    assert not r.is_error
    assert r.text.startswith("The server returned HTTP 404 Not Found.")
    assert "no such page here" not in r.text
    assert r.data["code"] == 404 and r.data["bytes"] == 0

    r = await fetch(call, site.url("/broken"))
    assert not r.is_error and "500" in r.text and "Internal trouble" not in r.text
    # Errors are not cached: the next call asks the server again.
    await fetch(call, site.url("/broken"))
    assert site.hits["/broken"] == 2


async def test_binary_content_is_refused(call, site: Site) -> None:
    r = await fetch(call, site.url("/image.png"))
    assert r.is_error
    assert "image/png" in r.text
    assert "cannot show" in r.text


async def test_connection_refused_is_an_error(call) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = await fetch(call, f"http://127.0.0.1:{port}/")
    assert r.is_error
    assert not r.text.startswith("<tool_use_error>")
    assert f"Could not connect to 127.0.0.1:{port}" in r.text


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://127.0.0.1/file", "only http:// and https://"),
        ("file:///etc/passwd", "only http:// and https://"),
        ("http://", "names no host"),
        ("https:///path", "names no host"),
        ("not a url", "only http:// and https://"),
        ("http://user:secret@127.0.0.1/", "user name or password"),
        ("http://127.0.0.1:99999/", "Invalid URL"),
        ("https://example.com/" + "a" * 2000, "the limit is 2000"),
    ],
)
async def test_invalid_urls_are_input_errors(call, url: str, says: str) -> None:
    r = await fetch(call, url)
    assert r.is_error
    assert r.text.startswith("<tool_use_error>")
    assert says in r.text


# --- redirects ----------------------------------------------------------------------------


async def test_same_host_redirects_are_followed(call, site: Site) -> None:
    r = await fetch(call, site.url("/redirect-chain"))
    assert not r.is_error, r.text
    assert "# Main title" in r.text
    assert r.data["url"] == site.url("/page.html")
    assert site.hits["/redirect-chain"] == site.hits["/redirect-same"] == 1


async def test_cross_host_redirect_is_reported_not_followed(call, site: Site) -> None:
    r = await fetch(call, site.url("/redirect-cross"), prompt="Find the title")
    target = site.url("/page.html", host="localhost")
    assert not r.is_error
    assert f"redirected (302 Found) to a different host: {target}" in r.text
    assert f'call WebFetch again with url: "{target}"' in r.text
    assert 'prompt: "Find the title"' in r.text
    assert r.data["code"] == 302 and r.data["url"] == site.url("/redirect-cross")
    assert site.hits["/page.html"] == 0


async def test_redirect_loop_gives_up(call, site: Site) -> None:
    r = await fetch(call, site.url("/redirect-loop"))
    assert r.is_error
    assert "more than 10 redirects" in r.text
    assert site.hits["/redirect-loop"] == 11


# --- cancellation -------------------------------------------------------------------------


MakeCtx = Callable[[Config], ToolContext]


@pytest.fixture
def make_ctx(session: Session, tmp_path: Path) -> Iterator[MakeCtx]:
    """A call's context whose daemon has `config`."""
    stores: list[Store] = []

    async def progress(**kw: object) -> None:
        pass

    def make(config: Config) -> ToolContext:
        stores.append(Store(str(tmp_path / f"services-{len(stores)}.db")))
        return ToolContext(
            session=session,
            tool_use_id="t",
            state_dir=str(tmp_path),
            progress=progress,
            services=make_services(config, stores[-1]),
        )

    yield make
    for store in stores:
        store.close()


async def test_cancel_stops_the_fetch(site: Site, make_ctx: MakeCtx) -> None:
    ctx = make_ctx(LOCAL_OK)
    tool = WebFetch()
    task = asyncio.create_task(tool.call({"url": site.url("/slow"), "prompt": "p"}, ctx))
    assert await asyncio.to_thread(site.slow_started.wait, 10)
    ctx.cancelled.set()
    with pytest.raises(ToolError, match="The fetch was cancelled."):
        await asyncio.wait_for(task, 10)


# --- internal addresses ---------------------------------------------------------------


async def test_without_the_opt_in_the_local_site_is_refused(site: Site, make_ctx: MakeCtx) -> None:
    with pytest.raises(ToolError, match="refused to connect to 127.0.0.1: .* loopback"):
        await WebFetch().call({"url": site.url("/page.html"), "prompt": "p"}, make_ctx(Config()))
    assert site.hits["/page.html"] == 0


async def test_connection_is_pinned_to_the_checked_address(site: Site, make_ctx: MakeCtx) -> None:
    """The name is resolved once per connection, by the check; the socket goes to that
    address and the Host header keeps the name."""
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    config = Config(webfetch_allow_private_hosts=["intranet.test"])
    tool = WebFetch(resolve=resolve)
    url = f"http://intranet.test:{site.port}/redirect-same"
    r = await tool.call({"url": url, "prompt": "p"}, make_ctx(config))
    assert not r.is_error, r.text_content()
    assert "# Main title" in r.text_content()
    # Two requests (one redirect), two connections: one resolution each, by the check.
    assert asked == ["intranet.test"] * 2
    assert site.hosts == [f"intranet.test:{site.port}"] * 2


async def test_rebinding_is_refused_at_the_next_connection(site: Site) -> None:
    """A name that answers with an allowed address first and an internal one next (DNS
    rebinding) gets the first connection, to the address checked, and not the second."""
    answers = iter([["127.0.0.1"], ["10.0.0.1"]])

    async def resolve(host: str, port: int) -> list[str]:
        return next(answers)

    backend = CheckedBackend(AllowList(["127.0.0.1"]), resolve)
    stream = await backend.connect_tcp("rebind.test", site.port)
    assert stream.get_extra_info("server_addr")[0] == "127.0.0.1"
    await stream.aclose()
    with pytest.raises(ToolError, match=r"rebind.test \(it resolves to 10.0.0.1\).*private"):
        await backend.connect_tcp("rebind.test", site.port)


async def test_any_internal_answer_refuses_the_name(make_ctx: MakeCtx) -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return ["93.184.215.14", "169.254.169.254"]

    with pytest.raises(ToolError, match="cloud metadata"):
        await WebFetch(resolve=resolve).call(
            {"url": "https://mixed.test/", "prompt": "p"}, make_ctx(Config())
        )


# --- pieces -------------------------------------------------------------------------------


def test_http_is_upgraded_except_for_loopback() -> None:
    assert checked_url("http://example.com/a?b=1") == "https://example.com/a?b=1"
    assert checked_url("HTTP://Example.com") == "https://Example.com/"
    assert checked_url("http://127.0.0.1:8080/x") == "http://127.0.0.1:8080/x"
    assert checked_url("http://localhost/x") == "http://localhost/x"
    assert checked_url("http://[::1]:9/x") == "http://[::1]:9/x"
    assert checked_url("https://example.com/a#frag") == "https://example.com/a"


def test_same_host_rule() -> None:
    assert is_same_host("https://a.org/x", "https://a.org/y")
    assert is_same_host("https://a.org/x", "https://www.a.org/y")
    assert is_same_host("http://a.org/x", "https://a.org/x")
    assert not is_same_host("https://a.org/x", "https://b.org/x")
    assert not is_same_host("https://a.org/x", "https://a.org:8443/x")
    assert not is_same_host("http://127.0.0.1:1/x", "http://localhost:1/x")
    assert not is_same_host("https://a.org/x", "https://u:p@a.org/x")
    assert not is_same_host("https://a.org/x", "ftp://a.org/x")


def test_cache_is_bounded_and_least_recently_used_goes_first() -> None:
    def page(text: str) -> Page:
        return Page("u", 200, "OK", "text/plain", len(text), text, False)

    cache = PageCache(ttl_s=60, max_entries=2, max_chars=10)
    cache.put("a", page("aaa"))
    cache.put("b", page("bbb"))
    assert cache.get("a") is not None  # a is now the most recently used
    cache.put("c", page("ccc"))
    assert cache.get("b") is None and cache.get("a") and cache.get("c")
    cache.put("d", page("dddddddd"))  # over max_chars: the oldest go until it fits
    assert cache.get("a") is None and cache.get("c") is None and cache.get("d")

    expired = PageCache(ttl_s=-1, max_entries=2, max_chars=10)
    expired.put("a", page("a"))
    assert expired.get("a") is None


@pytest.mark.skipif(not TOOL_SCHEMAS.exists(), reason="reference schemas not present")
def test_schema_matches_reference() -> None:
    tools = {t["name"]: t for t in json.loads(TOOL_SCHEMAS.read_text())["tools"]}
    assert WebFetch.input_schema == tools["WebFetch"]["input_schema"]


def test_read_only_and_concurrency_safe() -> None:
    tool = WebFetch()
    args = {"url": "https://example.com", "prompt": "p"}
    assert tool.is_read_only(args) and tool.is_concurrency_safe(args)
    assert "runs no model" in tool.description
