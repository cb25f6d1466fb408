"""Images for the model: scaled and compressed to what the reference sends.

Claude Code 2.1.328 (recorded: image_budget) fits an image inside 2000x2000, keeping
JPEG and WebP and making anything else PNG, and then holds it to a byte budget of
512,000 bytes (the API itself refuses 5 MB of base64, 3.75 MB raw): an image still over
it becomes a JPEG, at quality 90 or the highest quality a five-step halving search finds
within the budget (a 2500x2500 photo-like PNG goes out as a 2000x2000 JPEG); only a PNG
over 3.75 MB first tries a palette PNG within the budget. An image already inside both
the size and the budget is sent as it is, without being decoded (Pillow reads only its
header), as the reference sends a truncated PNG whose header is sound.

What the reference refuses is refused (recorded: image_undecodable): bytes whose header
cannot be read (an image signature over garbage), and an image that needs scaling or
compressing but cannot be decoded. Up to sharp's pixel limit (16383 x 16383, which the
reference's decoder enforces) an image is decoded and scaled, a 12000x12000 PNG
included; a header claiming more is refused before any pixel is decoded.

The bytes come from a workspace, so they are hostile: an image that needs work is
decoded in a bounded worker process acting as the session (isolated.py, decoding.py),
never in the daemon.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from PIL import Image

from agentd.tools.formats import isolated

MAX_WIDTH = 2000
MAX_HEIGHT = 2000
# 5 MB of base64, as raw bytes (the reference's targetRawSize): the API's own limit.
MAX_RAW_BYTES = 5 * 1024 * 1024 * 3 // 4
# What the reference holds an image it sends from Read to (its byteBudget).
BYTE_BUDGET = 512_000
# sharp's limitInputPixels (0x3FFF squared), past which the reference's decoder refuses.
MAX_PIXELS = 0x3FFF * 0x3FFF
# header_size compares the pixel count with MAX_PIXELS itself, and says so in its words;
# the worker (decoding.py) sets a limit again before decoding.
Image.MAX_IMAGE_PIXELS = None


class ImageError(Exception):
    """The image cannot be sent: its message says why, for the model."""


@dataclass(frozen=True, slots=True)
class Fitted:
    data: bytes
    media_type: str
    # originalWidth/Height, displayWidth/Height (the reference's `dimensions`).
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


def header_size(data: bytes) -> tuple[int, int]:
    """The (width, height) the image's header gives, read without decoding a pixel;
    ImageError when there is no readable header."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            return img.size
    except Exception as exc:  # Pillow raises many types on hostile bytes
        raise ImageError(f"its header cannot be read ({_reason(exc)})") from None


def fit(data: bytes, media_type: str, identity: tuple[int, int] | None = None) -> Fitted:
    """`data` as the model should get it: itself when inside the limits, else scaled
    (decoding.fit_image) in a worker acting as `identity` (uid, gid; None: the daemon's
    own). ImageError when it cannot be sent. Blocks: call it from a worker thread."""
    width, height = header_size(data)
    if width * height > MAX_PIXELS:
        raise ImageError(
            f"it is {width}x{height} pixels, more than the {MAX_PIXELS:,} that can be decoded"
        )
    if len(data) <= BYTE_BUDGET and target_size(width, height) == (width, height):
        return Fitted(data, media_type, dims(width, height, width, height))
    return _in_worker(data, media_type, identity)


def _in_worker(data: bytes, media_type: str, identity: tuple[int, int] | None) -> Fitted:
    try:
        meta, body = isolated.run("image", [media_type], data, identity)
    except isolated.DecodeError as exc:
        raise ImageError(f"it cannot be decoded ({exc})") from None
    return Fitted(body, meta["media_type"], meta["dimensions"])


def _reason(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def dims(ow: int, oh: int, dw: int, dh: int) -> dict[str, int]:
    return {"originalWidth": ow, "originalHeight": oh, "displayWidth": dw, "displayHeight": dh}
