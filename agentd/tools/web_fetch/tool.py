"""WebFetch: fetch a URL and return its content as markdown, for the model to read.

agentd runs no model, so the `prompt` is not applied here: the result carries it above
the content and the calling model applies it. Redirects are followed within one host
only; a redirect elsewhere is reported, not followed, so the permission for the new host
is asked for again.

Every connection goes through web_address.CheckedTransport: loopback, private,
link-local (cloud metadata), unique-local, multicast and reserved addresses are refused
after DNS resolution, and the socket is pinned to the address that was checked, unless
the daemon's config lists the host in `webfetch_allow_private_hosts`.

This module is the tool: its input, the cache, cancellation and the result the model
reads. The URL rules are in web_url.py, the HTTP fetch in web_http.py, the conversion
to text in web_text.py, the page and cache types in web_pages.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, ClassVar, NotRequired, TypedDict

from agentd.network.address import AllowList
from agentd.tools.base import Hints, InputError, Tool, ToolContext, ToolError, ToolResult
from agentd.tools.web_fetch.address import Resolver, system_resolve
from agentd.tools.web_fetch.http import MAX_BODY_BYTES, fetch_page
from agentd.tools.web_fetch.pages import Page, PageCache, Redirect
from agentd.tools.web_fetch.text import describe_size
from agentd.tools.web_fetch.url import checked_url

PAGE_CHARS = 100_000
CACHE_TTL_S = 15 * 60
CACHE_MAX_ENTRIES = 50
CACHE_MAX_CHARS = 50 * 1024 * 1024

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

A status of 400 or more is returned as the result (the status, not the body); it is not
a failed call. Redirects within the same host are followed. A redirect to a different
host is not: the result gives the new URL, and you call WebFetch again with it.

Only public addresses can be fetched: localhost, private networks, link-local and
cloud metadata addresses are refused unless the operator has allowed that host.

This tool only reads, but it reaches the network; it asks for permission per domain
unless a rule such as WebFetch(domain:example.com) allows it."""


class WebFetchInput(TypedDict):
    url: str
    prompt: str
    offset: NotRequired[int]


class WebFetch(Tool[WebFetchInput]):
    name: ClassVar[str] = "WebFetch"
    hints = Hints(read_only=True, destructive=False, idempotent=True, open_world=True)
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

    def is_read_only(self, args: WebFetchInput) -> bool:
        return True

    def is_concurrency_safe(self, args: WebFetchInput) -> bool:
        return True

    async def validate_input(self, args: WebFetchInput, ctx: ToolContext) -> None:
        checked_url(str(args.get("url", "")))

    async def call(self, args: WebFetchInput, ctx: ToolContext) -> ToolResult:
        started = time.monotonic()
        allow = AllowList(ctx.services.config.webfetch_allow_private_hosts)
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
            # The status is a result, not a failed call (as the reference): the model reads
            # it and decides; the body is not read.
            status = f"{page.code} {page.code_text}".rstrip()
            message = (
                f"The server returned HTTP {status}.\n\n"
                f"Its body was not read. If the page needs a login, fetch it with a tool "
                f"that has one (for example `gh` for GitHub, or an MCP server's fetch tool) "
                f"instead of WebFetch."
            )
            return ToolResult.text(message, data(message))

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
                f"The response was larger than {describe_size(MAX_BODY_BYTES)}; only the first "
                f"{describe_size(MAX_BODY_BYTES)} were read, so the content below is incomplete."
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
        fetch = asyncio.ensure_future(fetch_page(url, allow, self.resolve))
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


TOOL = WebFetch
