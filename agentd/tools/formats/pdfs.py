"""Read of a PDF: the PDF itself as a `document` block, as the reference sends it, so the
model sees the pages' layout, figures and scans, not only their text.

The reference's rules (Claude Code 2.1.328, recorded in tests/data/oracle: pdf_reads):

- A whole PDF of at most 10 pages and at most 20 MB is sent as it is: a text block
  "PDF file read: PATH (SIZE)" then the document. More pages ask for `pages`; an empty
  file, a larger one, and one without the `%PDF-` header are refused.
- `pages` is one page ("3") or one range ("1-5", blanks allowed around the dash),
  counted from 1, at most 20 pages ("5-" means to the end, and counts as more than 20);
  anything else is an input error. A range running past the last page stops there; one
  starting past it is refused. Page ranges are read whatever the file's size.

Where agentd differs (docs/parity.md, "Differences from the reference"): the reference renders
the chosen pages to JPEG images with poppler's pdftoppm; agentd sends those pages as a
PDF of their own (pypdf copies them), the same kind of document block as a whole read,
so the API gives the model both each page's image and its text, and nothing renders a
workspace's PDF on the daemon's host. A PDF pypdf cannot parse at all is refused, where
the reference sends it on: the API would refuse the whole request for an invalid PDF.

Counting pages and copying them parses hostile bytes with pypdf, pure Python that a
crafted file can keep busy: it runs in a bounded worker process (isolated.py).
"""

from __future__ import annotations

import re

from agentd.foundation.errors import InputError, ToolError
from agentd.tools.base import DocumentBlock, TextBlock, ToolResult
from agentd.tools.formats import isolated

MEDIA_TYPE = "application/pdf"
# Pages a whole read may have; more need `pages`.
MAX_WHOLE_PAGES = 10
# Pages one `pages` range may cover.
MAX_PDF_PAGES = 20
# Bytes a whole PDF (or the PDF of the chosen pages) may have.
MAX_PDF_BYTES = 20 * 1024 * 1024
_PAGES = re.compile(r"(\d{1,9})(?:\s*(-)\s*(\d{1,9})?)?")


def parse_pages(pages: str) -> tuple[int, int | None]:
    """(first, last) of a `pages` value, last None for "to the end"; InputError if it is
    not one page or one range of at most MAX_PDF_PAGES pages."""
    m = _PAGES.fullmatch(pages.strip())
    first, last = 0, None
    if m:
        first = int(m.group(1))
        last = int(m.group(3)) if m.group(3) else None if m.group(2) else first
    if not m or first < 1 or (last is not None and last < first):
        raise InputError(
            f'Invalid pages value "{pages}": give one page ("3") or one range ("1-5"), '
            "counted from 1, not a list; read other pages in further calls."
        )
    if last is None or last - first + 1 > MAX_PDF_PAGES:
        raise InputError(
            f'The range "{pages}" covers more than {MAX_PDF_PAGES} pages, the most one '
            "call reads: ask for a smaller range."
        )
    return first, last


def is_pdf_name(path: str) -> bool:
    return path.lower().endswith(".pdf")


def human_size(n: int) -> str:
    """A size as the reference words it: 856 bytes, 1.1KB, 21MB."""
    if n < 1024:
        return f"{n} bytes"
    for unit, scale in (("KB", 1024), ("MB", 1024**2), ("GB", 1024**3)):
        if n < scale * 1024 or unit == "GB":
            return f"{n / scale:.1f}".removesuffix(".0") + unit
    raise AssertionError("unreachable")


def render_pdf(
    path: str, data: bytes, pages: str | None, identity: tuple[int, int] | None = None
) -> ToolResult:
    """The PDF at `path` (its bytes `data`) for the model: whole, or the chosen pages.
    Blocks on a worker process (acting as `identity`): call it from a worker thread."""
    if not data:
        raise ToolError(f"{path} is empty: there is no PDF to read.")
    if not data.startswith(b"%PDF-"):
        raise ToolError(
            f"{path} is not a PDF (it does not start with %PDF-). Look at it with `file` "
            "through Bash, or Read it under a name without .pdf."
        )
    first, last = parse_pages(pages) if pages is not None else (0, 0)
    if pages is None and len(data) > MAX_PDF_BYTES:
        raise ToolError(
            f"{path} is {human_size(len(data))}, over the {human_size(MAX_PDF_BYTES)} a whole "
            f'PDF may have: read it in parts with pages, e.g. pages: "1-5".'
        )
    try:
        params = [str(first), str(last or 0), str(MAX_PDF_BYTES)]
        meta, part = isolated.run("pdf", params, data, identity)
    except isolated.DecodeError as exc:
        raise ToolError(
            f"{path} could not be read as a PDF ({exc}), so it was not sent: the API refuses "
            "a PDF it cannot parse. Repair or convert it (qpdf, a PDF printer) and Read the "
            "result."
        ) from None
    count = int(meta["pages"])
    if pages is None:
        if count > MAX_WHOLE_PAGES:
            raise ToolError(
                f"{path} has {count} pages, more than the {MAX_WHOLE_PAGES} read whole: give "
                f'pages, e.g. pages: "1-5", at most {MAX_PDF_PAGES} pages per call.'
            )
        text = f"PDF file read: {path} ({human_size(len(data))})"
        return _result(text, data, path, len(data), count)
    if first > count:
        raise ToolError(
            f'Pages "{pages}" lie outside {path}, which has {count} page'
            f"{'s' if count != 1 else ''}: ask for pages within 1-{count}."
        )
    last = min(last or count, count)
    if not meta["part"]:
        part = data  # all of its pages: the file as it is
    if len(part) > MAX_PDF_BYTES:
        raise ToolError(
            f"Pages {first}-{last} of {path} make a PDF of {human_size(len(part))}, over the "
            f"{human_size(MAX_PDF_BYTES)} one call may send: ask for fewer pages."
        )
    text = f"PDF pages extracted: {last - first + 1} page(s) from {path} ({human_size(len(data))})"
    result = _result(text, part, path, len(data), count)
    result.data["file"].update({"startPage": first, "endPage": last, "pagesSize": len(part)})
    return result


def _result(text: str, document: bytes, path: str, size: int, count: int) -> ToolResult:
    return ToolResult(
        [TextBlock(text), DocumentBlock(MEDIA_TYPE, document)],
        data={
            "type": "pdf",
            # The bytes themselves are in the document block, not repeated here.
            "file": {"filePath": path, "originalSize": size, "numPages": count},
        },
    )
