"""WebFetch's HTTP side: one GET, redirects followed within one host only, the body
read up to a size limit, the whole bounded in time, and the response made a Page.

Every connection goes through web_address.CheckedTransport, so each hop is checked
against private addresses; a redirect to another host comes back as a Redirect for the
caller to report, so the permission for the new host is asked for again.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urljoin, urlsplit

import httpx

from agentd import __version__ as AGENTD_VERSION
from agentd.network.address import AllowList
from agentd.tools.base import ToolError
from agentd.tools.web_fetch.address import CheckedTransport, Resolver
from agentd.tools.web_fetch.pages import Page, Redirect
from agentd.tools.web_fetch.text import describe_size, to_text
from agentd.tools.web_fetch.url import is_same_host

FETCH_TIMEOUT_S = 30.0
MAX_REDIRECTS = 10
MAX_BODY_BYTES = 10 * 1024 * 1024
USER_AGENT = f"agentd/{AGENTD_VERSION} (WebFetch tool; +https://github.com/agentd)"
ACCEPT = "text/markdown, text/html;q=0.9, text/*;q=0.8, application/json;q=0.8, */*;q=0.5"


async def fetch_page(url: str, allow: AllowList, resolve: Resolver) -> Page | Redirect:
    """The page at `url` as text, or the redirect to another host; a ToolError with a
    readable message for timeouts, failed connections and content that is not text."""
    try:
        async with asyncio.timeout(FETCH_TIMEOUT_S):
            fetched = await _fetch_following(url, allow, resolve)
    except (TimeoutError, httpx.TimeoutException):
        raise ToolError(f"Fetching {url} timed out after {FETCH_TIMEOUT_S:.0f} seconds.") from None
    except httpx.ConnectError as exc:
        raise ToolError(f"Could not connect to {urlsplit(url).netloc}: {exc}") from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise ToolError(
            f"Fetching {url} failed: {type(exc).__name__}: {exc or 'no details'}"
        ) from None
    if isinstance(fetched, Redirect):
        return fetched
    # Converting is outside the time limit: it is our work, not the server's.
    return await _page(*fetched)


async def _fetch_following(
    url: str, allow: AllowList, resolve: Resolver
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
        transport=CheckedTransport(allow, resolve),
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
                if resp.status_code >= 400:
                    # As the reference: the status is the answer; an error page's body
                    # is not read (it is often a login or a block page, not content).
                    return current, resp, b"", False
                body, cut = await _read_capped(resp)
                return current, resp, body, cut
        raise ToolError(f"Fetching {url} gave more than {MAX_REDIRECTS} redirects; giving up.")


async def _page(url: str, resp: httpx.Response, body: bytes, cut: bool) -> Page:
    content_type = resp.headers.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    charset = resp.charset_encoding
    if resp.status_code >= 400:
        text = ""
    else:
        converted = await asyncio.to_thread(to_text, body, media_type, charset)
        if converted is None:
            raise ToolError(
                f"{url} is {media_type or 'of no stated type'} "
                f"({describe_size(len(body))}{' or more' if cut else ''}), which WebFetch "
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
