"""WebFetch: fetch a URL and return its content as markdown, for the model to read.

agentd runs no model, so the `prompt` is not applied here: the result carries it above
the content and the calling model applies it. Redirects are followed within one host
only; a redirect elsewhere is reported, not followed, so the permission for the new host
is asked for again.

Every connection goes through web_address.CheckedTransport: loopback, private,
link-local (cloud metadata), unique-local, multicast and reserved addresses are refused
after DNS resolution, and the socket is pinned to the address that was checked, unless
the daemon's config lists the host in `webfetch_allow_private_hosts`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx
from bs4 import BeautifulSoup
from markdownify import MarkdownConverter

from agentd import __version__ as AGENTD_VERSION
from agentd.tools.base import InputError, Tool, ToolContext, ToolError, ToolResult
from agentd.tools.web_address import AllowList, CheckedTransport, Resolver, system_resolve

MAX_URL_LENGTH = 2000
FETCH_TIMEOUT_S = 30.0
MAX_REDIRECTS = 10
MAX_BODY_BYTES = 10 * 1024 * 1024
PAGE_CHARS = 100_000
CACHE_TTL_S = 15 * 60
CACHE_MAX_ENTRIES = 50
CACHE_MAX_CHARS = 50 * 1024 * 1024
USER_AGENT = f"agentd/{AGENTD_VERSION} (WebFetch tool; +https://github.com/agentd)"
ACCEPT = "text/markdown, text/html;q=0.9, text/*;q=0.8, application/json;q=0.8, */*;q=0.5"
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
# Elements whose content is not page text.
DROPPED_TAGS = ("script", "style", "noscript", "template", "iframe", "object", "embed", "svg")
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/ld+json",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/x-ndjson",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/x-sh",
        "application/sql",
        "application/graphql",
    }
)

DESCRIPTION = """\
Fetch a URL over HTTP(S) and return its content: web pages as markdown, text and JSON
as they are.

- `url`: a full http:// or https:// URL. http is upgraded to https (except for localhost).
- `prompt`: what you want from the page. agentd runs no model, so it cannot apply the
  prompt for you: the result repeats your prompt above the page's content, and you apply
  it yourself to the content that follows.
- `offset`: the content comes at most 100,000 characters at a time. When there is more,
  the result ends with the offset to pass to get the next part.

HTML is converted to markdown, with scripts and styles dropped. Images, PDFs and other
binary content are refused. Responses are kept for 15 minutes, so reading a long page
part by part fetches it only once.

Redirects within the same host are followed. A redirect to a different host is not:
the result gives the new URL, and you call WebFetch again with it.

Only public addresses can be fetched: localhost, private networks, link-local and
cloud metadata addresses are refused unless the operator has allowed that host.

This tool only reads, but it reaches the network; it asks for permission per domain
unless a rule such as WebFetch(domain:example.com) allows it."""


@dataclass(frozen=True, slots=True)
class Page:
    """A fetched response, converted to text; what the cache holds."""

    url: str
    code: int
    code_text: str
    content_type: str
    bytes: int
    text: str
    cut: bool  # the body was larger than MAX_BODY_BYTES and was cut there


@dataclass(frozen=True, slots=True)
class Redirect:
    """A redirect to another host, which is reported rather than followed."""

    url: str
    location: str
    code: int
    code_text: str
    content_type: str


class PageCache:
    """Pages by requested URL, least recently used first out; bounded in entries and size."""

    def __init__(self, ttl_s: float, max_entries: int, max_chars: int) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._pages: OrderedDict[str, tuple[float, Page]] = OrderedDict()
        self._chars = 0

    def get(self, url: str) -> Page | None:
        hit = self._pages.get(url)
        if hit is None:
            return None
        stored_at, page = hit
        if time.monotonic() - stored_at > self.ttl_s:
            self._drop(url)
            return None
        self._pages.move_to_end(url)
        return page

    def put(self, url: str, page: Page) -> None:
        if len(page.text) > self.max_chars:
            return
        if url in self._pages:
            self._drop(url)
        self._pages[url] = (time.monotonic(), page)
        self._chars += len(page.text)
        while len(self._pages) > self.max_entries or self._chars > self.max_chars:
            self._drop(next(iter(self._pages)))

    def _drop(self, url: str) -> None:
        _, page = self._pages.pop(url)
        self._chars -= len(page.text)


def checked_url(url: str, allow: AllowList | None = None) -> str:
    """The URL to fetch: validated, and upgraded to https unless it is loopback or a host
    the operator allowed as internal (internal services often speak plain http)."""
    if len(url) > MAX_URL_LENGTH:
        raise InputError(f"The URL is {len(url)} characters long; the limit is {MAX_URL_LENGTH}.")
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise InputError(f"Invalid URL {url!r}: {exc}.") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise InputError(f"Invalid URL {url!r}: only http:// and https:// URLs can be fetched.")
    if not host:
        raise InputError(f"Invalid URL {url!r}: it names no host.")
    if parts.username is not None or parts.password is not None:
        raise InputError(
            f"Invalid URL {url!r}: URLs with a user name or password cannot be fetched."
        )
    scheme = parts.scheme.lower()
    internal = host.lower() in LOOPBACK_HOSTS or (allow is not None and allow.names_host(host))
    if scheme == "http" and not internal:
        scheme = "https"
    return urlunsplit((scheme, parts.netloc, parts.path or "/", parts.query, ""))


def _effective_port(url: str) -> int | None:
    parts = urlsplit(url)
    return parts.port or {"http": 80, "https": 443}.get(parts.scheme)


def is_same_host(current: str, target: str) -> bool:
    """Whether a redirect from `current` to `target` stays on the same host (a leading
    "www." aside), on the same port, without credentials and without leaving http(s)."""
    a, b = urlsplit(current), urlsplit(target)
    if b.scheme not in ("http", "https") or b.username is not None or b.password is not None:
        return False
    if (a.hostname or "").removeprefix("www.") != (b.hostname or "").removeprefix("www."):
        return False
    if a.scheme == b.scheme:
        return _effective_port(current) == _effective_port(target)
    # http -> https on the default ports is the same site, upgraded.
    return a.scheme == "http" and b.scheme == "https" and a.port is None and b.port is None


def to_markdown(body: bytes, charset: str | None) -> str:
    soup = BeautifulSoup(body, "html.parser", from_encoding=charset)
    for tag in soup(DROPPED_TAGS):
        tag.decompose()
    text = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    # Collapse the runs of blank lines that layout markup leaves behind.
    lines: list[str] = []
    for line in text.splitlines():
        line = line.rstrip()
        if line or (lines and lines[-1]):
            lines.append(line)
    return "\n".join(lines).strip()


def _looks_textual(body: bytes) -> bool:
    sample = body[:4096]
    if b"\0" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(sample) - 3  # a character cut at the end of the sample
    return True


def to_text(body: bytes, media_type: str, charset: str | None) -> str | None:
    """The body as text for the model, or None if it is not text."""
    if not media_type and _looks_textual(body):
        media_type = "text/html" if b"<html" in body.lstrip()[:512].lower() else "text/plain"
    if media_type in HTML_TYPES:
        return to_markdown(body, charset)
    if (
        media_type.startswith("text/")
        or media_type in TEXT_TYPES
        or media_type.endswith(("+json", "+xml"))
    ):
        try:
            return body.decode(charset or "utf-8", errors="replace")
        except LookupError:  # an unknown charset name
            return body.decode("utf-8", errors="replace")
    return None


def _describe_size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MB"
    if n >= 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n} bytes"


class WebFetch(Tool):
    name: ClassVar[str] = "WebFetch"
    description: ClassVar[str] = DESCRIPTION
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "format": "uri"},
            "prompt": {"type": "string"},
            "offset": {"type": "integer", "minimum": 0, "maximum": 9007199254740991},
        },
        "required": ["url", "prompt"],
        "additionalProperties": False,
    }
    # A full page of content plus the header and the note fits without being saved to a file.
    max_result_chars: ClassVar[int] = PAGE_CHARS + 20_000

    def __init__(self, resolve: Resolver = system_resolve) -> None:
        self.cache = PageCache(CACHE_TTL_S, CACHE_MAX_ENTRIES, CACHE_MAX_CHARS)
        self.resolve = resolve

    def is_read_only(self, args: dict[str, Any]) -> bool:
        return True

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return True

    async def validate_input(self, args: dict[str, Any], ctx: ToolContext) -> None:
        checked_url(str(args.get("url", "")))

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        started = time.monotonic()
        config = ctx.services.get("config")
        allow = AllowList(getattr(config, "webfetch_allow_private_hosts", ()))
        url = checked_url(str(args.get("url", "")), allow)
        prompt = str(args.get("prompt", ""))
        offset = int(args.get("offset") or 0)

        page = self.cache.get(url)
        if page is None:
            fetched = await self._fetch_cancellable(url, allow, ctx)
            if isinstance(fetched, Redirect):
                return self._redirect_result(fetched, prompt, offset, started)
            page = fetched
            if page.code < 400:
                self.cache.put(url, page)

        def data(result: str, next_offset: int | None = None) -> dict[str, Any]:
            return {
                "url": page.url,
                "code": page.code,
                "codeText": page.code_text,
                "bytes": page.bytes,
                "contentType": page.content_type,
                "durationMs": int((time.monotonic() - started) * 1000),
                "result": result,
                "offset": offset,
                "nextOffset": next_offset,
            }

        if page.code >= 400:
            message = (
                f"Fetching {page.url} failed with HTTP {page.code} {page.code_text}".rstrip() + "."
            )
            if page.text.strip():
                message += f"\n\nThe response body was:\n{page.text[:2000]}"
            return ToolResult.text(message, data(message), is_error=True)

        total = len(page.text)
        if offset and offset >= total:
            raise InputError(
                f"offset {offset} is past the end of the content, which is {total} characters "
                f"long. Omit offset to read from the start."
            )
        chunk = page.text[offset : offset + PAGE_CHARS]
        end = offset + len(chunk)
        next_offset = end if end < total else None

        status = f"{page.code} {page.code_text}".rstrip()
        header = [f"Fetched {page.url} ({status}, {page.content_type or 'no content type'})."]
        if page.cut:
            header.append(
                f"The response was larger than {_describe_size(MAX_BODY_BYTES)}; only the first "
                f"{_describe_size(MAX_BODY_BYTES)} were read, so the content below is incomplete."
            )
        if offset or next_offset is not None:
            header.append(f"Characters {offset}-{end} of {total}.")
        header.append(f"Apply this request to the content below: {prompt}")
        text = "\n".join(header) + "\n\n---\n\n" + (chunk or "(The response was empty.)")
        if next_offset is not None:
            text += (
                f"\n\n---\n\n[The content continues: {total - end} more characters. Call "
                f"WebFetch again with the same url and offset: {next_offset} to read on.]"
            )
        return ToolResult.text(text, data(chunk, next_offset))

    def _redirect_result(
        self, redirect: Redirect, prompt: str, offset: int, started: float
    ) -> ToolResult:
        text = (
            f"{redirect.url} redirected ({redirect.code} {redirect.code_text}) to a different "
            f"host: {redirect.location}\n"
            f"The redirect was not followed. To read that page, call WebFetch again with "
            f'url: "{redirect.location}" and prompt: "{prompt}".'
        )
        data = {
            "url": redirect.url,
            "code": redirect.code,
            "codeText": redirect.code_text,
            "bytes": 0,
            "contentType": redirect.content_type,
            "durationMs": int((time.monotonic() - started) * 1000),
            "result": text,
            "offset": offset,
            "nextOffset": None,
        }
        return ToolResult.text(text, data)

    async def _fetch_cancellable(
        self, url: str, allow: AllowList, ctx: ToolContext
    ) -> Page | Redirect:
        fetch = asyncio.ensure_future(self._fetch(url, allow))
        cancelled = asyncio.ensure_future(ctx.cancelled.wait())
        try:
            await asyncio.wait({fetch, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
            if not fetch.done():
                fetch.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await fetch
        if not fetch.done() or fetch.cancelled() or ctx.cancelled.is_set():
            raise ToolError("The fetch was cancelled.")
        return fetch.result()

    async def _fetch(self, url: str, allow: AllowList) -> Page | Redirect:
        try:
            async with asyncio.timeout(FETCH_TIMEOUT_S):
                fetched = await self._fetch_following(url, allow)
        except (TimeoutError, httpx.TimeoutException):
            raise ToolError(
                f"Fetching {url} timed out after {FETCH_TIMEOUT_S:.0f} seconds."
            ) from None
        except httpx.ConnectError as exc:
            raise ToolError(f"Could not connect to {urlsplit(url).netloc}: {exc}") from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ToolError(
                f"Fetching {url} failed: {type(exc).__name__}: {exc or 'no details'}"
            ) from None
        if isinstance(fetched, Redirect):
            return fetched
        # Converting is outside the time limit: it is our work, not the server's.
        return await self._page(*fetched)

    async def _fetch_following(
        self, url: str, allow: AllowList
    ) -> tuple[str, httpx.Response, bytes, bool] | Redirect:
        """The final URL, its response and its body (and whether the body was cut), or a
        redirect to another host."""
        headers = {
            "User-Agent": USER_AGENT,
            "Accept": ACCEPT,
        }
        async with httpx.AsyncClient(
            timeout=FETCH_TIMEOUT_S,
            follow_redirects=False,
            headers=headers,
            transport=CheckedTransport(allow, self.resolve),
        ) as client:
            current = url
            for _ in range(MAX_REDIRECTS + 1):
                async with client.stream("GET", current) as resp:
                    media_type = resp.headers.get("content-type", "")
                    location = resp.headers.get("location")
                    if resp.is_redirect and location:
                        target = urljoin(current, location)
                        if not is_same_host(current, target):
                            return Redirect(
                                current, target, resp.status_code, resp.reason_phrase, media_type
                            )
                        current = target
                        continue
                    body, cut = await _read_capped(resp)
                    return current, resp, body, cut
            raise ToolError(f"Fetching {url} gave more than {MAX_REDIRECTS} redirects; giving up.")

    async def _page(self, url: str, resp: httpx.Response, body: bytes, cut: bool) -> Page:
        content_type = resp.headers.get("content-type", "")
        media_type = content_type.split(";", 1)[0].strip().lower()
        charset = resp.charset_encoding
        if resp.status_code >= 400:
            # The error page, if it is text, tells the model what went wrong.
            text = await asyncio.to_thread(to_text, body[:65536], media_type, charset) or ""
        else:
            converted = await asyncio.to_thread(to_text, body, media_type, charset)
            if converted is None:
                raise ToolError(
                    f"{url} is {media_type or 'of no stated type'} "
                    f"({_describe_size(len(body))}{' or more' if cut else ''}), which WebFetch "
                    f"cannot show: it returns web pages, text and JSON only. To work with this "
                    f"file, download it with Bash (for example curl -o) if that is allowed, "
                    f"then Read it."
                )
            text = converted
        return Page(
            url=url,
            code=resp.status_code,
            code_text=resp.reason_phrase,
            content_type=content_type,
            bytes=len(body),
            text=text,
            cut=cut,
        )


async def _read_capped(resp: httpx.Response) -> tuple[bytes, bool]:
    """The body, read as it arrives, up to MAX_BODY_BYTES; and whether it was cut there."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return b"".join(chunks)[:MAX_BODY_BYTES], True
    return b"".join(chunks), False


TOOL = WebFetch
