"""Image parts of messages: what an image is, checked once, and its size read from its bytes.

An ``ImagePart`` is a URL or base64 data with its media type, the OpenAI ``detail`` hint and
its width and height. Data is checked when the part is made: it must be base64 of a PNG, JPEG,
GIF or WebP image no larger than ``MAX_IMAGE_BYTES``, of the media type it claims; its width and
height are read from the image's header (pure Python, no imaging library). A URL's size is
known only when the caller gives it. ``image_from_part`` reads the image parts of every message
form contextwright accepts (OpenAI chat and Responses, Anthropic, LangChain's standard blocks);
anything wrong is an ``InvalidInputError`` naming the part, never its content. Pure; no I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from contextwright.errors import InvalidInputError

ImageDetail = Literal["auto", "low", "high", "original"]
DETAILS: frozenset[str] = frozenset(("auto", "low", "high", "original"))
MEDIA_TYPES: frozenset[str] = frozenset(("image/png", "image/jpeg", "image/gif", "image/webp"))
"""The image types every provider accepts."""
_DETAIL_MESSAGE = "image detail must be one of the strings auto, low, high or original"
_ALIASES = {"image/jpg": "image/jpeg"}
MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""The largest image data accepted (OpenAI's per-image limit; Anthropic takes 5 MB)."""
ANTHROPIC_MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""Anthropic's per-image limit, measured on the base64 string it is sent as (not the decoded
bytes: 4/3 as many), so an image of more than 3.75 MB is over it."""
ANTHROPIC_MAX_IMAGE_SIDE = 8000
"""The most pixels a side of an image may have for Anthropic (its vision guide's limits)."""
ANTHROPIC_MAX_IMAGES = 100
ANTHROPIC_MAX_IMAGES_LARGE_WINDOW = 600
"""The most images Anthropic takes in one request: for a model with a 200K-token window, and
for the others."""
ANTHROPIC_MANY_IMAGES = 20
ANTHROPIC_MANY_IMAGES_MAX_SIDE = 2000
"""In a request with more than ``ANTHROPIC_MANY_IMAGES`` images, Anthropic takes none with a
side of more than this many pixels (the request is refused, not the image resized)."""
ANTHROPIC_MAX_REQUEST_BYTES = 32_000_000
"""The largest request the Messages API takes: 32 MB (its request size limits; a larger one is
refused with 413 ``request_too_large`` before the API reads it), in decimal megabytes, the
stricter reading."""
OPENAI_MAX_IMAGES = 500
OPENAI_MAX_IMAGE_DATA = 50_000_000
"""The most images OpenAI takes in one request (Chat Completions and the Responses API), and
the most image data: 50 MB, which its guide calls the request's image bytes in one place and its
payload in another, so it is measured on the base64 text the images are sent as (more than the
images' bytes), in decimal megabytes: within either reading."""
MAX_URL_CHARS = 8192
_URL = re.compile(r"https?://[^\s]+", re.IGNORECASE)
_DATA_URL = re.compile(r"data:([^;,]*)(?:;[^;,]*)*;base64,(.*)", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagePart:
    """One image of a user or tool message: a URL, or base64 data with its media type."""

    url: str | None = None
    """An ``http(s)`` URL the provider fetches (a ``data:`` URL is read into ``data``)."""
    data: str | None = None
    """The image's bytes as base64 (no ``data:`` prefix)."""
    media_type: str | None = None
    """``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp``; read from the data when
    not given, and checked against it when given."""
    detail: ImageDetail = "auto"
    """OpenAI's detail hint (``low`` costs a fixed count); other providers have no such hint."""
    width: int | None = None
    """Pixels across: read from the data, given by the caller for a URL (else unknown)."""
    height: int | None = None
    """Pixels down, like ``width``."""

    def __post_init__(self) -> None:
        """Check the part and read the data's size and type; ``InvalidInputError`` if wrong."""
        url, data, media_type = self.url, self.data, self.media_type
        if isinstance(url, str) and data is None and url[:5].lower() == "data:":
            media_type, data = _split_data_url(url, media_type)
            url = None
        if (url is None) == (data is None):
            raise InvalidInputError("an image needs a url or base64 data (one of them)")
        if not isinstance(self.detail, str) or self.detail not in DETAILS:
            raise InvalidInputError(_DETAIL_MESSAGE)
        width, height = _checked_size(self.width, self.height)
        if data is not None:
            media_type, width, height = _read_data(data, media_type, width, height)
        else:
            url = _checked_url(url)
            media_type = _checked_media_type(media_type) if media_type is not None else None
        for name, value in (("url", url), ("data", data), ("media_type", media_type),
                            ("width", width), ("height", height)):
            object.__setattr__(self, name, value)

    @property
    def source(self) -> str:
        """What OpenAI's ``image_url`` takes: the URL, or the data as a ``data:`` URL."""
        if self.data is not None:
            return f"data:{self.media_type};base64,{self.data}"
        return cast(str, self.url)

    @property
    def size_bytes(self) -> int:
        """Bytes of the decoded data (0 for a URL)."""
        if self.data is None:
            return 0
        return len(self.data) * 3 // 4 - self.data[-2:].count("=")

    @property
    def longest_side(self) -> int | None:
        """Pixels of the image's longer side (None: a URL whose size was not given)."""
        if self.width is None or self.height is None:
            return None
        return max(self.width, self.height)

    def digest(self) -> str:
        """A short hash of what a provider sees of the image (source and detail)."""
        raw = f"{self.detail}\x1f{self.source}".encode("utf-8", "surrogatepass")
        return hashlib.blake2b(raw, digest_size=8).hexdigest()

    def placeholder(self) -> str:
        """A short line standing for the image where a format cannot carry it."""
        kind = self.media_type or "url"
        size = f" {self.width}x{self.height}" if self.width and self.height else ""
        return f"[image: {kind}{size}]"

    def to_chat_part(self) -> dict[str, Any]:
        """The OpenAI chat content part for the image (the form contextwright keeps).

        A URL's width and height, when known, ride along in ``image_url`` (they cannot be read
        from a URL later); data needs neither.
        """
        image_url: dict[str, Any] = {"url": self.source}
        if self.detail != "auto":
            image_url["detail"] = self.detail
        if self.data is None and self.width is not None and self.height is not None:
            image_url["width"], image_url["height"] = self.width, self.height
        return {"type": "image_url", "image_url": image_url}


def _split_data_url(url: str, media_type: str | None) -> tuple[str | None, str]:
    match = _DATA_URL.fullmatch(url)
    if match is None:
        raise InvalidInputError("an image data: URL must be data:<type>;base64,<data>")
    declared = match.group(1) or None
    if media_type is not None and declared is not None and (
            _checked_media_type(media_type) != _checked_media_type(declared)):
        raise InvalidInputError("the image's media type and its data: URL disagree")
    return media_type or declared, match.group(2)


def _checked_size(width: object, height: object) -> tuple[int | None, int | None]:
    if (width is None) != (height is None):
        raise InvalidInputError("an image's width and height are given together or not at all")
    for value in (width, height):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 < value <= 100_000):
            raise InvalidInputError("an image's width and height must be whole pixels, 1 or more")
    return cast(int | None, width), cast(int | None, height)


def _checked_url(url: object) -> str:
    if not isinstance(url, str) or len(url) > MAX_URL_CHARS or not _URL.fullmatch(url):
        raise InvalidInputError("an image url must be an http(s) URL without spaces "
                                f"(at most {MAX_URL_CHARS} characters)")
    return url


def _checked_media_type(media_type: object) -> str:
    if not isinstance(media_type, str):
        raise InvalidInputError("an image media type must be a string")
    normal = _ALIASES.get(media_type.lower(), media_type.lower())
    if normal not in MEDIA_TYPES:
        raise InvalidInputError("image media type must be image/png, image/jpeg, image/gif or "
                                "image/webp")
    return normal


def _read_data(data: object, media_type: str | None, width: int | None, height: int | None
               ) -> tuple[str, int, int]:
    """The data's media type and size, checked against what the caller said."""
    if not isinstance(data, str):
        raise InvalidInputError("image data must be base64 text")
    if len(data) > (MAX_IMAGE_BYTES + 2) // 3 * 4:
        raise InvalidInputError(f"image data is larger than {MAX_IMAGE_BYTES // 2**20} MB")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInputError("image data is not valid base64") from None
    found = image_header(raw)
    if found is None:
        raise InvalidInputError("image data is not a PNG, JPEG, GIF or WebP image")
    kind, found_width, found_height = found
    if media_type is not None and _checked_media_type(media_type) != kind:
        raise InvalidInputError(f"image data is {kind}, not the {media_type} it is said to be")
    if width is not None and (width, height) != (found_width, found_height):
        raise InvalidInputError("the image's width and height do not match its data")
    return kind, found_width, found_height


# --- headers -------------------------------------------------------------------------------


def image_header(raw: bytes) -> tuple[str, int, int] | None:
    """(media type, width, height) read from an image's first bytes; None if not one we read."""
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return _png(raw)
    if raw.startswith(b"\xff\xd8"):
        return _jpeg(raw)
    if raw[:6] in (b"GIF87a", b"GIF89a"):
        return _gif(raw)
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return _webp(raw)
    return None


def _positive(kind: str, width: int, height: int) -> tuple[str, int, int] | None:
    return (kind, width, height) if width > 0 and height > 0 else None


def _png(raw: bytes) -> tuple[str, int, int] | None:
    if len(raw) < 24 or raw[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", raw[16:24])
    return _positive("image/png", width, height)


def _gif(raw: bytes) -> tuple[str, int, int] | None:
    if len(raw) < 10:
        return None
    width, height = struct.unpack("<HH", raw[6:10])
    return _positive("image/gif", width, height)


def _webp(raw: bytes) -> tuple[str, int, int] | None:
    chunk = raw[12:16]
    if chunk == b"VP8 " and len(raw) >= 30 and raw[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", raw[26:30])
        return _positive("image/webp", width & 0x3FFF, height & 0x3FFF)
    if chunk == b"VP8L" and len(raw) >= 25 and raw[20] == 0x2F:
        bits = int.from_bytes(raw[21:25], "little")
        return _positive("image/webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8X" and len(raw) >= 30:
        width = int.from_bytes(raw[24:27], "little") + 1
        height = int.from_bytes(raw[27:30], "little") + 1
        return _positive("image/webp", width, height)
    return None


# Start-of-frame markers (baseline, progressive, lossless, arithmetic...): not DHT, JPG or DAC.
_JPEG_FRAMES = frozenset((0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD,
                          0xCE, 0xCF))
_JPEG_STANDALONE = frozenset((0x01, *range(0xD0, 0xD9)))


def _jpeg(raw: bytes) -> tuple[str, int, int] | None:
    """Walk the segments to the first start-of-frame, which holds the size."""
    at = 2
    while at + 4 <= len(raw):
        if raw[at] != 0xFF:
            return None
        marker = raw[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _JPEG_STANDALONE:
            at += 2
            continue
        length = struct.unpack(">H", raw[at + 2:at + 4])[0]
        if marker in _JPEG_FRAMES:
            if length < 7 or at + 9 > len(raw):
                return None
            height, width = struct.unpack(">HH", raw[at + 5:at + 9])
            return _positive("image/jpeg", width, height)
        if marker == 0xDA or length < 2:  # scan data before any frame: not an image we read
            return None
        at += 2 + length
    return None


# --- the image parts of each message form --------------------------------------------------

IMAGE_PART_TYPES = frozenset(("image_url", "input_image", "image"))
"""``type`` of an image part in OpenAI chat, OpenAI Responses, and Anthropic / LangChain."""


def is_image_part(part: object) -> bool:
    """Whether ``part`` is an image part of any accepted form (or an ``ImagePart``)."""
    if isinstance(part, ImagePart):
        return True
    kind = part.get("type") if isinstance(part, Mapping) else None
    # A caller's JSON may put a list or an object where the type belongs: not an image part,
    # and never a set lookup, which would fail on a value that cannot be hashed.
    return isinstance(kind, str) and kind in IMAGE_PART_TYPES


def image_from_part(part: object, where: str) -> ImagePart:
    """The image of an image part in any accepted form; ``InvalidInputError`` names ``where``.

    OpenAI chat ``{"type": "image_url", "image_url": {"url", "detail"}}`` (LangChain also
    writes ``image_url`` as a bare string), OpenAI Responses ``{"type": "input_image",
    "image_url", "detail"}``, Anthropic ``{"type": "image", "source": {"type": "base64" |
    "url", ...}}`` and LangChain's standard blocks ``{"type": "image", "url" | "base64",
    "mime_type"}`` (and their older ``source_type`` form). A provider-side file id cannot be
    carried to another provider and is refused.
    """
    if isinstance(part, ImagePart):
        return part
    if not isinstance(part, Mapping):
        raise InvalidInputError(f"{where} must be an image part object")
    try:
        return _image_from_mapping(part, where)
    except InvalidInputError as error:
        if str(error).startswith(where):
            raise
        raise InvalidInputError(f"{where}: {error}") from None


def _image_from_mapping(part: Mapping[str, Any], where: str) -> ImagePart:
    kind = part.get("type")
    if kind == "image_url":
        return _openai_chat_image(part.get("image_url"))
    if kind == "input_image":
        if part.get("file_id") and not part.get("image_url"):
            raise InvalidInputError(f"{where} refers to an uploaded file (file_id), which only "
                                    "its provider can read; send the image's url or data")
        return ImagePart(url=_text(part.get("image_url"), "image_url"),
                         detail=image_detail(part.get("detail")))
    if kind == "image" and "source" in part:
        return _anthropic_image(part["source"], where)
    if kind == "image":
        return _langchain_image(part, where)
    raise InvalidInputError(f"{where} is not an image part")


def _openai_chat_image(image_url: object) -> ImagePart:
    if isinstance(image_url, str):
        return ImagePart(url=image_url)
    if not isinstance(image_url, Mapping):
        raise InvalidInputError("image_url must be an object with a url")
    return ImagePart(url=_text(image_url.get("url"), "image_url.url"),
                     detail=image_detail(image_url.get("detail")),
                     width=image_url.get("width"), height=image_url.get("height"))


def _anthropic_image(source: object, where: str) -> ImagePart:
    if not isinstance(source, Mapping):
        raise InvalidInputError("an image's source must be an object")
    kind = source.get("type")
    if kind == "base64":
        return ImagePart(data=_text(source.get("data"), "source.data"),
                         media_type=_text(source.get("media_type"), "source.media_type"))
    if kind == "url":
        return ImagePart(url=_text(source.get("url"), "source.url"))
    raise InvalidInputError(f"{where} has a {kind!r} image source; only base64 and url images "
                            "can be carried")


def _langchain_image(part: Mapping[str, Any], where: str) -> ImagePart:
    source_type = part.get("source_type")
    mime = part.get("mime_type")
    if part.get("base64") is not None or source_type == "base64":
        data = part.get("base64") if part.get("base64") is not None else part.get("data")
        return ImagePart(data=_text(data, "base64"), media_type=mime)
    if part.get("url") is not None:
        return ImagePart(url=_text(part.get("url"), "url"), media_type=mime)
    if part.get("file_id") is not None or source_type == "id":
        raise InvalidInputError(f"{where} refers to an uploaded file id, which only its "
                                "provider can read; send the image's url or data")
    raise InvalidInputError(f"{where} is an image without a url or base64 data")


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string")
    return value


def image_detail(value: object) -> ImageDetail:
    """An OpenAI detail hint as given (None: ``auto``); ``InvalidInputError`` for another.

    The value comes from a caller's JSON, so it may be a list or an object: it is checked to be
    a string before the set lookup, which could not hash it.
    """
    if value is None:
        return "auto"
    if not isinstance(value, str) or value not in DETAILS:
        raise InvalidInputError(_DETAIL_MESSAGE)
    return cast(ImageDetail, value)
