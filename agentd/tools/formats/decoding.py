"""What the decoding worker (worker.py) runs on a workspace's bytes: an image decoded and
fitted to the API's limits, a PDF's pages counted and copied.

Only the worker imports this: it is the half of images.py and pdfs.py that decodes.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from PIL import Image

from agentd.tools.formats import images
from agentd.tools.formats.images import Fitted


def warm_up(job: str) -> None:
    """Do the job once on bytes of our own, so every module the libraries import on first
    use is imported now: after the worker drops to the session's identity, the daemon's
    Python (perhaps under /root) may be out of its reach."""
    if job == "image":
        Image.init()
        for media_type in ("image/png", "image/jpeg", "image/gif", "image/webp"):
            fmt = media_type.split("/")[1].upper()
            out = io.BytesIO()
            Image.new("RGB", (2400, 8), "white").save(out, fmt)
            fit_image(out.getvalue(), media_type)
        _encode(Image.new("RGB", (8, 8)), "PNG", palette=True)
        return
    import pypdf
    import pypdf.filters  # noqa: F401 (imported by the first compressed stream)
    from pypdf.generic import DecodedStreamObject, NameObject

    writer = pypdf.PdfWriter()
    for _ in range(2):
        page = writer.add_blank_page(width=72, height=72)
        stream = DecodedStreamObject()
        stream.set_data(b"0 0 m 1 1 l S")
        page[NameObject("/Contents")] = writer._add_object(stream)
        page.compress_content_streams()
    out = io.BytesIO()
    writer.write(out)
    pdf_pages(out.getvalue(), 2, 2, 0)


def fit_image(data: bytes, media_type: str) -> Fitted:
    """Decode `data` and fit it to the limits and the byte budget as the reference does
    (images.py says how)."""
    Image.MAX_IMAGE_PIXELS = images.MAX_PIXELS
    with Image.open(io.BytesIO(data)) as img:
        original = img.size
        target = images.target_size(*original)
        if img.format == "JPEG":
            # Let libjpeg decode at 1/2, 1/4 or 1/8 scale when that still covers the target.
            img.draft("RGB", target)
        img.load()
        return _fit_decoded(img, data, media_type, original, target)


def pdf_pages(data: bytes, first: int, last: int, whole_max: int) -> tuple[int, bytes | None]:
    """The PDF's page count, and with `first` a PDF of pages first..last (past the end: to
    the end); None instead when that is none, or every page of a file of at most
    `whole_max` bytes (the caller then sends the file as it is)."""
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(data))
    count = len(reader.pages)
    last = min(last, count)
    if not first or first > count or ((first, last) == (1, count) and len(data) <= whole_max):
        return count, None
    writer = pypdf.PdfWriter()
    for number in range(first, last + 1):
        writer.add_page(reader.pages[number - 1])
    out = io.BytesIO()
    writer.write(out)
    return count, out.getvalue()


def _fit_decoded(
    img: Image.Image,
    data: bytes,
    media_type: str,
    original: tuple[int, int],
    target: tuple[int, int],
) -> Fitted:
    sizes = images.dims(*original, *target)
    if target == original:
        scaled, out, fmt = img, data, media_type.split("/")[1].upper()
    else:
        # Scaled in the same format, except that anything but JPEG and WebP becomes PNG.
        fmt = {"image/jpeg": "JPEG", "image/webp": "WEBP"}.get(media_type, "PNG")
        scaled = img.resize(target, Image.Resampling.LANCZOS, reducing_gap=3.0)
        out = _encode(scaled, fmt)
    if len(out) <= images.BYTE_BUDGET:
        return Fitted(out, f"image/{fmt.lower()}", sizes)
    if fmt == "PNG" and len(out) > images.MAX_RAW_BYTES:
        paletted = _encode(scaled, "PNG", palette=True)
        if len(paletted) <= images.BYTE_BUDGET:
            return Fitted(paletted, "image/png", sizes)
    jpeg = _jpeg_within(scaled, out, images.BYTE_BUDGET, already_jpeg=fmt == "JPEG")
    if jpeg is out:
        if len(out) > images.MAX_RAW_BYTES:
            raise ValueError(
                f"no encoding of it fits the API's {images.MAX_RAW_BYTES // 1024} KB limit"
            )
        return Fitted(out, f"image/{fmt.lower()}", sizes)
    return Fitted(jpeg, "image/jpeg", sizes)


def _jpeg_within(img: Image.Image, current: bytes, budget: int, *, already_jpeg: bool) -> bytes:
    """The best JPEG of `img` within `budget` bytes, searched as the reference searches:
    quality 90 first (unless it is a JPEG already), then halving between 1 and 89 five
    times, keeping the highest quality that fits; if none fits, the smallest of them
    (or `current` itself when it was smaller still)."""
    smallest = current
    high = 90
    if not already_jpeg:
        out = _encode(img, "JPEG", quality=90)
        if len(out) < len(smallest):
            smallest = out
        if len(out) <= budget:
            return out
        high = 89
    low, best = 1, None
    for _ in range(5):
        quality = (low + high) // 2
        out = _encode(img, "JPEG", quality=quality)
        if len(out) < len(smallest):
            smallest = out
        if len(out) <= budget:
            best, low = out, quality + 1
        else:
            high = quality - 1
        if low > high:
            break
    return best if best is not None else smallest


def _encode(img: Image.Image, fmt: str, *, quality: int = 80, palette: bool = False) -> bytes:
    out = io.BytesIO()
    convert: Callable[[Image.Image], Image.Image]
    if fmt == "JPEG":
        convert = _rgb
    elif palette:
        convert = _palette
    else:
        convert = _as_is
    options = {"quality": quality} if fmt != "PNG" else {"optimize": True}
    convert(img).save(out, fmt, **options)
    return out.getvalue()


def _as_is(img: Image.Image) -> Image.Image:
    return img if img.mode in ("RGB", "RGBA", "L", "LA", "P", "1") else img.convert("RGBA")


def _rgb(img: Image.Image) -> Image.Image:
    if img.mode in ("RGBA", "LA", "P"):
        # Transparency onto white, as a viewer shows it, not onto black.
        rgba = img.convert("RGBA")
        canvas = Image.new("RGB", rgba.size, "white")
        canvas.paste(rgba, mask=rgba.getchannel("A"))
        return canvas
    return img if img.mode == "RGB" else img.convert("RGB")


def _palette(img: Image.Image) -> Image.Image:
    if img.mode == "P":
        return img
    return img.convert("RGBA").quantize(256)
