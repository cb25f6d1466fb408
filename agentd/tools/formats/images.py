"""Images for the model: scaled to what the Messages API takes, as the reference does.

The API refuses an image over 5 MB of base64 (3.75 MB raw) and scales down any over
2000 px on a side anyway. Claude Code 2.1.328 fits an image inside 2000x2000 (keeping
its format: PNG stays PNG), and when the bytes are still too many tries a palette PNG,
then JPEG at quality 80, 60, 40, 20, and last a JPEG at most 1000 px wide at quality
20. This does the same with Pillow. An image already inside both limits is sent as it
is, without being decoded (Pillow reads only its header).

The bytes come from a workspace, so they are hostile: decoding is bounded by Pillow's
decompression-bomb check (a header claiming more pixels than MAX_PIXELS is refused
before any pixel is decoded), and an image Pillow cannot read is sent unchanged, as
before, for the API to judge.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

from PIL import Image

MAX_WIDTH = 2000
MAX_HEIGHT = 2000
# 5 MB of base64, as raw bytes (the reference's targetRawSize).
MAX_RAW_BYTES = 5 * 1024 * 1024 * 3 // 4
JPEG_QUALITIES = (80, 60, 40, 20)
LAST_RESORT_WIDTH = 1000
# Far above any photo or screenshot; a header claiming more is a decompression bomb.
MAX_PIXELS = 100_000_000


@dataclass(frozen=True, slots=True)
class Fitted:
    data: bytes
    media_type: str
    # originalWidth/Height, displayWidth/Height (the reference's `dimensions`); None
    # when the image could not be read.
    dimensions: dict[str, int] | None

    @property
    def note(self) -> str | None:
        """The reference's note for a scaled image, so the model can map coordinates."""
        d = self.dimensions
        if not d or (d["originalWidth"], d["originalHeight"]) == (
            d["displayWidth"],
            d["displayHeight"],
        ):
            return None
        scale = d["originalWidth"] / max(d["displayWidth"], 1)
        return (
            f"[Image: original {d['originalWidth']}x{d['originalHeight']}, displayed at "
            f"{d['displayWidth']}x{d['displayHeight']}. Multiply coordinates by "
            f"{scale:.2f} to map to original image.]"
        )


def target_size(width: int, height: int) -> tuple[int, int]:
    """(width, height) scaled to fit MAX_WIDTH x MAX_HEIGHT, width first (as the reference)."""
    if width > MAX_WIDTH:
        height, width = round(height * MAX_WIDTH / width), MAX_WIDTH
    if height > MAX_HEIGHT:
        width, height = round(width * MAX_HEIGHT / height), MAX_HEIGHT
    return max(width, 1), max(height, 1)


def fit(data: bytes, media_type: str) -> Fitted:
    """`data` as the model should get it: itself when inside the limits, else scaled."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            width, height = img.size
            if width * height > MAX_PIXELS:
                return Fitted(data, media_type, None)
            dw, dh = target_size(width, height)
            if len(data) <= MAX_RAW_BYTES and (dw, dh) == (width, height):
                return Fitted(data, media_type, _dims(width, height, width, height))
            img.load()
            return _shrink(img, media_type, (width, height), (dw, dh))
    except Exception:  # not decodable by Pillow (or a bomb): send as it is
        return Fitted(data, media_type, None)


def _shrink(
    img: Image.Image, media_type: str, original: tuple[int, int], target: tuple[int, int]
) -> Fitted:
    is_png = media_type == "image/png"
    dims = _dims(*original, *target)
    scaled = img if target == original else img.resize(target, Image.Resampling.LANCZOS)
    if target != original:
        # Same format, except GIF (and anything else but JPEG/WebP) becomes PNG.
        fmt = {"image/jpeg": "JPEG", "image/webp": "WEBP"}.get(media_type, "PNG")
        out = _encode(scaled, fmt)
        if len(out) <= MAX_RAW_BYTES:
            return Fitted(out, f"image/{fmt.lower()}", dims)
    if is_png:
        out = _encode(scaled, "PNG", palette=True)
        if len(out) <= MAX_RAW_BYTES:
            return Fitted(out, "image/png", dims)
    for quality in JPEG_QUALITIES:
        out = _encode(scaled, "JPEG", quality=quality)
        if len(out) <= MAX_RAW_BYTES:
            return Fitted(out, "image/jpeg", dims)
    width = min(target[0], LAST_RESORT_WIDTH)
    height = max(round(target[1] * width / max(target[0], 1)), 1)
    out = _encode(img.resize((width, height), Image.Resampling.LANCZOS), "JPEG", quality=20)
    return Fitted(out, "image/jpeg", _dims(*original, width, height))


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


def _dims(ow: int, oh: int, dw: int, dh: int) -> dict[str, int]:
    return {"originalWidth": ow, "originalHeight": oh, "displayWidth": dw, "displayHeight": dh}
