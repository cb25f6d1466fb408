"""Images scaled to the Messages API's limits as the reference does
(agentd/tools/formats/images.py)."""

from __future__ import annotations

import base64
import io
import os
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from agentd.tools.base import ImageBlock, TextBlock
from agentd.tools.formats import images


def _png(width: int, height: int, noisy: bool = False) -> bytes:
    if noisy:
        img = Image.frombytes("RGB", (width, height), os.urandom(width * height * 3))
    else:
        img = Image.new("RGB", (width, height), (30, 120, 200))
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


def test_an_image_inside_the_limits_is_sent_as_it_is() -> None:
    data = _png(640, 480)
    fitted = images.fit(data, "image/png")
    assert fitted.data == data and fitted.media_type == "image/png"
    assert fitted.dimensions == {
        "originalWidth": 640,
        "originalHeight": 480,
        "displayWidth": 640,
        "displayHeight": 480,
    }
    assert fitted.note is None


def test_a_wide_png_is_fitted_inside_2000_px_and_stays_png() -> None:
    fitted = images.fit(_png(3000, 1200), "image/png")
    assert fitted.media_type == "image/png"
    with Image.open(io.BytesIO(fitted.data)) as img:
        assert img.size == (2000, 800)
    assert fitted.dimensions is not None and fitted.dimensions["displayWidth"] == 2000
    assert fitted.note == (
        "[Image: original 3000x1200, displayed at 2000x800. Multiply coordinates by 1.50 "
        "to map to original image.]"
    )


def test_over_the_byte_budget_an_image_becomes_a_jpeg_within_it() -> None:
    """The reference's budget of 512,000 bytes (recorded: image_budget, noisy.png): a
    PNG inside 2000x2000 but over it becomes a JPEG of the same size within it, and so
    does a JPEG; a palette PNG is tried first only for a PNG over 3.75 MB."""
    data = _png(1500, 1500, noisy=True)  # ~6.7 MB of incompressible pixels
    assert len(data) > images.MAX_RAW_BYTES
    fitted = images.fit(data, "image/png")
    assert fitted.media_type == "image/jpeg" and len(fitted.data) <= images.BYTE_BUDGET
    with Image.open(io.BytesIO(fitted.data)) as img:
        assert img.format == "JPEG" and img.size == (1500, 1500)
    assert fitted.note is None  # same size: nothing to map

    few_colours = Image.new("RGB", (1800, 1800))
    few_colours.putdata([(x % 7 * 30, 0, 0) for x in range(1800 * 1800)])  # palette-friendly
    out = io.BytesIO()
    few_colours.save(out, "PNG", compress_level=0)
    assert len(out.getvalue()) > images.MAX_RAW_BYTES
    fitted = images.fit(out.getvalue(), "image/png")
    assert fitted.media_type == "image/png" and len(fitted.data) <= images.BYTE_BUDGET
    with Image.open(io.BytesIO(fitted.data)) as img:
        assert img.mode == "P"

    noise = Image.frombytes("RGB", (2000, 2000), os.urandom(2000 * 2000 * 3))
    out = io.BytesIO()
    noise.save(out, "JPEG", quality=100)
    fitted = images.fit(out.getvalue(), "image/jpeg")
    assert fitted.media_type == "image/jpeg" and len(fitted.data) <= images.BYTE_BUDGET
    with Image.open(io.BytesIO(fitted.data)) as img:
        assert img.format == "JPEG" and img.size == (2000, 2000)


def test_a_gif_over_the_size_becomes_a_png() -> None:
    out = io.BytesIO()
    Image.new("P", (2600, 100)).save(out, "GIF")
    fitted = images.fit(out.getvalue(), "image/gif")
    assert fitted.media_type == "image/png"
    with Image.open(io.BytesIO(fitted.data)) as img:
        assert img.size == (2000, 77)


def _chunk(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(kind + body) & 0xFFFFFFFF
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


def test_a_header_past_the_pixel_limit_is_refused_undecoded() -> None:
    # A valid PNG header claiming 60000x60000 pixels with almost no data behind it.
    header = struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0)
    bomb = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IEND", b"")
    with pytest.raises(images.ImageError, match="60000x60000 pixels"):
        images.fit(bomb, "image/png")


def test_bytes_without_a_readable_header_are_refused() -> None:
    with pytest.raises(images.ImageError, match="header cannot be read"):
        images.fit(b"\x89PNG\r\n\x1a\nnot really", "image/png")


def test_an_image_to_scale_that_does_not_decode_is_refused() -> None:
    """A sound header over data that is not an image: sent as it is when it needs no
    scaling (the reference sends such a truncated PNG), refused when it does."""
    for width, want_error in ((300, False), (3000, True)):
        header = struct.pack(">IIBBBBB", width, 200, 8, 2, 0, 0, 0)
        data = (
            b"\x89PNG\r\n\x1a\n"
            + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", b"garbage, not zlib")
            + _chunk(b"IEND", b"")
        )
        if want_error:
            with pytest.raises(images.ImageError, match="cannot be decoded"):
                images.fit(data, "image/png")
        else:
            assert images.fit(data, "image/png").data == data


def test_the_worker_decodes_as_the_identity_it_is_given(tmp_path: Path) -> None:
    """Decoding runs in a process of its own, as the session's identity: an identity that
    cannot be taken (the daemon is not root) fails the decode, never the daemon."""
    data = _png(2500, 100)
    me = (os.getuid(), os.getgid())
    fitted = images.fit(data, "image/png", me)
    assert fitted.dimensions is not None and fitted.dimensions["displayWidth"] == 2000
    if os.geteuid() == 0:
        fitted = images.fit(data, "image/png", (65534, 65534))
        assert fitted.dimensions == {
            "originalWidth": 2500,
            "originalHeight": 100,
            "displayWidth": 2000,
            "displayHeight": 80,
        }


async def test_read_sends_the_scaled_image_and_the_note(call, ws: Path) -> None:
    (ws / "wide.png").write_bytes(_png(4000, 1000))
    r = await call("Read", {"file_path": f"{ws}/wide.png"})
    assert not r.is_error
    image, note = r.content
    assert isinstance(image, ImageBlock) and isinstance(note, TextBlock)
    with Image.open(io.BytesIO(image.data)) as img:
        assert img.size == (2000, 500)
    assert "original 4000x1000, displayed at 2000x500" in note.text
    assert r.data["file"]["dimensions"]["displayHeight"] == 500
    assert base64.b64decode(r.data["file"]["base64"]) == image.data
