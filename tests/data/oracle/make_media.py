#!/usr/bin/env python3
"""Make the images and PDFs the media cases read (cases_parity.json), the same way for
the recording (run_oracle.py) and the replay (tests/oracle/test_parity.py).

    make_media.py png OUT W H [solid|gradient|noise]
    make_media.py jpeg|gif|webp OUT W H
    make_media.py bad-png|half-png|bad-jpeg|bad-gif|bomb-png OUT
    make_media.py pdf OUT PAGES [PAD_BYTES]

PNGs are written by hand, a row at a time, so a 20000x20000 one costs no memory; the
other formats need Pillow (the recording and the tests run with the project's venv).
PDFs are written by hand too: one line of text per page ("Page N of M"), and PAD_BYTES
of incompressible bytes in an unreferenced stream to make a large file.
"""

from __future__ import annotations

import os
import struct
import sys
import zlib


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png(out: str, width: int, height: int, pattern: str = "gradient") -> None:
    """An RGB PNG; rows go through zlib one at a time."""
    rng = os.urandom if pattern == "noise" else None
    comp = zlib.compressobj(6)
    parts = [
        b"\x89PNG\r\n\x1a\n",
        _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)),
    ]
    data = bytearray()
    solid = bytes([30, 120, 200]) * width
    for y in range(height):
        if rng is not None:
            row = rng(width * 3)
        elif pattern == "solid":
            row = solid
        else:
            shade = (y * 255) // max(height - 1, 1)
            row = bytes([shade, 255 - shade, 128]) * width
        data += comp.compress(b"\x00" + row)
        if len(data) > 1 << 20:
            parts.append(_chunk(b"IDAT", bytes(data)))
            data.clear()
    data += comp.flush()
    parts.append(_chunk(b"IDAT", bytes(data)))
    parts.append(_chunk(b"IEND", b""))
    with open(out, "wb") as f:
        f.write(b"".join(parts))


def pillow(kind: str, out: str, width: int, height: int) -> None:
    from PIL import Image

    img = Image.new("RGB", (width, height))
    # Stripes, so a scaled copy is not a single colour.
    stripe = Image.new("RGB", (width, max(1, height // 8)), (220, 40, 40))
    for y in range(0, height, max(2, height // 4)):
        img.paste(stripe, (0, y))
    fmt = {"jpeg": "JPEG", "gif": "GIF", "webp": "WEBP"}[kind]
    img.save(out, fmt)


def broken(kind: str, out: str) -> None:
    if kind == "bad-png":
        body = b"\x89PNG\r\n\x1a\n" + b"this is not the rest of a png" * 4
    elif kind == "half-png":
        png(out, 300, 200, "noise")
        with open(out, "rb") as f:
            whole = f.read()
        body = whole[: len(whole) // 2]
    elif kind == "bad-jpeg":
        body = b"\xff\xd8\xff\xe0" + b"garbage after a jpeg start" * 4
    elif kind == "bad-gif":
        body = b"GIF89a" + b"garbage after a gif header" * 4
    elif kind == "bomb-png":
        # A header that claims 30000x30000 pixels, then data that is not an image.
        body = (
            b"\x89PNG\r\n\x1a\n"
            + _chunk(b"IHDR", struct.pack(">IIBBBBB", 30000, 30000, 8, 2, 0, 0, 0))
            + _chunk(b"IDAT", zlib.compress(b"\x00" * 1000))
            + _chunk(b"IEND", b"")
        )
    else:
        raise SystemExit(f"unknown kind {kind}")
    with open(out, "wb") as f:
        f.write(body)


def pdf(out: str, pages: int, pad: int = 0) -> None:
    """A PDF of `pages` pages, each with one line of text."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in below
    pages_obj = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    kids = []
    for n in range(1, pages + 1):
        text = f"BT /F1 24 Tf 72 720 Td (Page {n} of {pages}) Tj ET".encode()
        content = add(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(text), text))
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] "
                b"/Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>"
                % (pages_obj, font, content)
            )
        )
    if pad:
        blob = os.urandom(pad)
        add(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(blob), blob))
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % pages_obj
    objects[pages_obj - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    body = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, obj in enumerate(objects, 1):
        offsets.append(len(body))
        body += b"%d 0 obj\n%s\nendobj\n" % (i, obj)
    xref = len(body)
    body += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        body += b"%010d 00000 n \n" % off
    body += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        catalog,
        xref,
    )
    with open(out, "wb") as f:
        f.write(body)


def main(argv: list[str]) -> None:
    kind, out, *rest = argv
    if kind == "png":
        png(out, int(rest[0]), int(rest[1]), rest[2] if len(rest) > 2 else "gradient")
    elif kind in ("jpeg", "gif", "webp"):
        pillow(kind, out, int(rest[0]), int(rest[1]))
    elif kind == "pdf":
        pdf(out, int(rest[0]), int(rest[1]) if len(rest) > 1 else 0)
    else:
        broken(kind, out)


if __name__ == "__main__":
    main(sys.argv[1:])
