"""A photo made fit for a vision model: read by Pillow (a decompression bomb is refused), scaled down to
``SWITCHBOARD_MEDIA_IMAGE_MAX_PX`` on its longer side and re-encoded as JPEG, then given as a data URL —
never the vendor's URL, which needs the channel's credentials."""

from __future__ import annotations

import asyncio
import base64
import io
import warnings

from PIL import Image, UnidentifiedImageError

from gateway.core.errors import GatewayError

__all__ = ["ImageUnreadable", "data_url"]

MAX_PIXELS = 50_000_000  # an image claiming more is a bomb, not a photo


class ImageUnreadable(GatewayError):
    """Not an image Pillow reads, or one too large to open safely."""


def _reencoded(data: bytes, max_px: int) -> bytes:
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(data)) as image:
                if image.width * image.height > MAX_PIXELS:
                    raise ImageUnreadable(f"the image is {image.width}×{image.height} pixels: too large to open")
                image.thumbnail((max_px, max_px))
                out = io.BytesIO()
                image.convert("RGB").save(out, "JPEG", quality=85)
        except (UnidentifiedImageError, OSError, Image.DecompressionBombError, Image.DecompressionBombWarning,
                ValueError) as exc:
            raise ImageUnreadable(f"the image could not be read: {type(exc).__name__}") from None
    return out.getvalue()


async def data_url(data: bytes, max_px: int) -> str:
    """The image as a ``data:image/jpeg;base64,…`` URL; ``ImageUnreadable`` when it is not a usable image."""
    jpeg = await asyncio.to_thread(_reencoded, data, max_px)
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
