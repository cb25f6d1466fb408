"""WebFetch's conversion of a response body to text the model can read.

HTML becomes markdown with scripts and styles dropped; text, JSON and their kin pass
as they are; anything else (images, PDFs, archives) is not text and is refused by the
caller. Pure functions on bytes, so the caller can run them off the event loop.
"""

from __future__ import annotations

from bs4 import BeautifulSoup
from markdownify import MarkdownConverter

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


def to_markdown(body: bytes, charset: str | None) -> str:
    """An HTML body as markdown, without the page's scripts, styles and embeds."""
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


def describe_size(n: int) -> str:
    """A byte count as a person reads it (1.5 MB, 12.0 KB, 300 bytes)."""
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MB"
    if n >= 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n} bytes"
