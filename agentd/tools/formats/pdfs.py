"""Read of a PDF: its text per page, a page range at a time."""

from __future__ import annotations

import io
import re
from typing import Any

from agentd.foundation.errors import InputError, ToolError
from agentd.tools.base import ToolResult, reminder

MAX_PDF_PAGES = 20
_PAGES = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_pages(pages: str) -> tuple[int, int]:
    m = _PAGES.match(pages)
    if not m:
        raise InputError(
            f'Invalid pages value "{pages}": give one page ("3") or a range ("1-5"), '
            "counted from 1."
        )
    first = int(m.group(1))
    last = int(m.group(2) or first)
    if first < 1 or last < first:
        raise InputError(
            f'Invalid pages value "{pages}": pages count from 1 and a range must not run backwards.'
        )
    if last - first + 1 > MAX_PDF_PAGES:
        raise InputError(
            f'The range "{pages}" has {last - first + 1} pages; at most {MAX_PDF_PAGES} pages '
            "can be read per call. Read it in several calls."
        )
    return first, last


def is_pdf_name(path: str) -> bool:
    return path.lower().endswith(".pdf")


def render_pdf(args: dict[str, Any], data: bytes, pages: str | None) -> ToolResult:
    """Text per page, pages chosen or all (at most MAX_PDF_PAGES)."""
    import pypdf

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        count = len(reader.pages)
    except Exception as exc:  # pypdf raises many types on a damaged file
        raise ToolError(f"{args['file_path']} could not be read as a PDF: {exc}") from None
    if pages is None:
        if count > MAX_PDF_PAGES:
            raise InputError(
                f"This PDF has {count} pages; at most {MAX_PDF_PAGES} can be read per call. "
                'Choose pages with the pages parameter, e.g. pages: "1-20".'
            )
        first, last = 1, count
    else:
        first, last = parse_pages(pages)
        if last > count:
            raise InputError(f'The PDF has {count} pages, so pages "{pages}" is out of range.')
    parts: list[str] = []
    for number in range(first, last + 1):
        try:
            page_text = reader.pages[number - 1].extract_text() or ""
        except Exception as exc:  # one bad page does not spoil the others
            page_text = f"[text of this page could not be extracted: {exc}]"
        parts.append(f'<page number="{number}">\n{page_text.strip()}\n</page>')
    text = "\n".join(parts)
    if count == 0:
        text = reminder("Note: this PDF has no pages.")
    elif not any(p.strip() for p in text.split("\n") if not p.startswith(("<page", "</page"))):
        text += "\n\n" + reminder(
            "Note: no text could be extracted from these pages; they may be scanned images."
        )
    return ToolResult.text(
        text,
        {
            "type": "pdf",
            "file": {
                "filePath": args["file_path"],
                "originalSize": len(data),
                "numPages": count,
                "startPage": first,
                "endPage": last,
                "content": text,
            },
        },
    )
