"""What a WebFetch fetch gives back (a page, or a redirect to another host), and the
cache of pages that lets a model read a long page part by part with one fetch."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Page:
    """A fetched response, converted to text; what the cache holds."""

    url: str
    code: int
    code_text: str
    content_type: str
    bytes: int
    text: str
    cut: bool  # the body was larger than the fetch's size limit and was cut there


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
