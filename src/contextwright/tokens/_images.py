"""Image token counts by each provider's published rule, from an image's width and height.

OpenAI bills an image by 512-pixel tiles (GPT-4o, GPT-4.1, GPT-5, o-series: a base count plus
a count per tile after fitting the image into 2048x2048 and its shortest side into 768) or by
32-pixel patches (GPT-4.1-mini / -nano, GPT-5-mini / -nano, o4-mini: at most 1,536 patches
times a per-model multiplier). Anthropic counts about ``width * height / 750`` after scaling the
image to fit a 1,568-pixel long edge and about 1.15 megapixels. An image whose size is unknown
(a URL without width and height) is counted at the rule's maximum, and that count says it is an
estimate (``TokenCount.exact`` is False). Pure arithmetic; this module imports nothing of ours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class TokenCount:
    """A token count and whether it is the provider's own (``exact``) or an estimate."""

    tokens: int
    exact: bool = True

    def __add__(self, other: TokenCount) -> TokenCount:
        """Counts add up; the sum is exact only if both are."""
        return TokenCount(self.tokens + other.tokens, self.exact and other.exact)


ZERO = TokenCount(0)
"""No tokens, exactly."""


@runtime_checkable
class ImageTokenRule(Protocol):
    """How one model counts an image: ``count(width, height, detail)``."""

    @property
    def name(self) -> str:
        """Stable name (part of the build's cache keys)."""
        ...

    def count(self, width: int | None, height: int | None, detail: str) -> TokenCount:
        """Tokens of one image; ``width`` / ``height`` None when unknown (an estimate)."""
        ...


@dataclass(frozen=True, slots=True)
class OpenAITileRule:
    """OpenAI's tile rule: ``base`` for a low-detail image; high adds ``tile`` per 512px tile.

    High detail: fit the image into 2048x2048, then scale it down so its shortest side is at
    most 768, and count the 512-pixel tiles that cover it (images are never scaled up). With
    ``auto`` the model picks low or high itself, and ``original`` is not published for these
    models: both are counted as high and marked estimated.
    """

    name: str
    base: int
    tile: int

    def count(self, width: int | None, height: int | None, detail: str) -> TokenCount:
        """Tokens of one image under this rule."""
        if detail == "low":
            return TokenCount(self.base)
        if width is None or height is None:  # the largest a scaled image can be: 768 x 2048
            return TokenCount(self.base + 8 * self.tile, exact=False)
        tiles = _tiles(width, height)
        return TokenCount(self.base + tiles * self.tile, exact=detail == "high")


def _tiles(width: int, height: int) -> int:
    """512-pixel tiles covering the image once fitted into 2048x2048 and 768 on its short side."""
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    return math.ceil(math.floor(w) / 512) * math.ceil(math.floor(h) / 512)


PATCH = 32
MAX_PATCHES = 1536


@dataclass(frozen=True, slots=True)
class OpenAIPatchRule:
    """OpenAI's patch rule: 32-pixel patches covering the image, at most 1,536, times a multiplier.

    An image needing more patches is scaled down (keeping its aspect ratio) until at most
    1,536 patches cover it. ``detail`` does not change the count.
    """

    name: str
    multiplier: float

    def count(self, width: int | None, height: int | None, detail: str) -> TokenCount:
        """Tokens of one image under this rule."""
        if width is None or height is None:
            return TokenCount(math.ceil(MAX_PATCHES * self.multiplier), exact=False)
        return TokenCount(math.ceil(_patches(width, height) * self.multiplier))


def _patches(width: int, height: int) -> int:
    raw = math.ceil(width / PATCH) * math.ceil(height / PATCH)
    if raw <= MAX_PATCHES:
        return raw
    shrink = math.sqrt(PATCH * PATCH * MAX_PATCHES / (width * height))
    # Shrunk further so whole patches fit along each side, as the published steps do.
    across, down = width * shrink / PATCH, height * shrink / PATCH
    shrink *= min(math.floor(across) / across, math.floor(down) / down)
    return min(MAX_PATCHES, math.ceil(width * shrink / PATCH) * math.ceil(height * shrink / PATCH))


ANTHROPIC_LONG_EDGE = 1568
ANTHROPIC_MAX_PIXELS = 1568 * 784
"""The largest area Anthropic's table shows as not resized (784x1568, about 1.2 megapixels)."""
ANTHROPIC_PIXELS_PER_TOKEN = 750


@dataclass(frozen=True, slots=True)
class AnthropicImageRule:
    """Anthropic's rule: ``width * height / 750`` tokens after fitting the size limits.

    An image whose long edge passes 1,568 pixels, or whose area passes about 1.2 megapixels,
    is first scaled down keeping its aspect ratio. The provider calls the result approximate;
    it is rounded up here. ``detail`` does not apply.
    """

    name: str = "anthropic"

    def count(self, width: int | None, height: int | None, detail: str) -> TokenCount:
        """Tokens of one image under this rule."""
        if width is None or height is None:
            return TokenCount(math.ceil(ANTHROPIC_MAX_PIXELS / ANTHROPIC_PIXELS_PER_TOKEN),
                              exact=False)
        scale = min(1.0, ANTHROPIC_LONG_EDGE / max(width, height),
                    math.sqrt(ANTHROPIC_MAX_PIXELS / (width * height)))
        w, h = math.floor(width * scale), math.floor(height * scale)
        return TokenCount(math.ceil(w * h / ANTHROPIC_PIXELS_PER_TOKEN))


@dataclass(frozen=True, slots=True)
class LargestImageRule:
    """The largest count of several rules, marked estimated: for a build made for no one model.

    Without a model, a build does not know which provider will read the request; counting
    each image at the largest of the rules lets every rendering fit.
    """

    rules: tuple[ImageTokenRule, ...]
    name: str = "largest"

    def count(self, width: int | None, height: int | None, detail: str) -> TokenCount:
        """The largest of the rules' counts, never exact."""
        tokens = max(rule.count(width, height, detail).tokens for rule in self.rules)
        return TokenCount(tokens, exact=False)


GPT_4O_IMAGES = OpenAITileRule("openai-tiles-85-170", base=85, tile=170)
"""GPT-4o, GPT-4.1, GPT-4.5."""
GPT_4O_MINI_IMAGES = OpenAITileRule("openai-tiles-2833-5667", base=2833, tile=5667)
"""GPT-4o mini: the same tiles, many more tokens each."""
GPT_5_IMAGES = OpenAITileRule("openai-tiles-70-140", base=70, tile=140)
O_SERIES_IMAGES = OpenAITileRule("openai-tiles-75-150", base=75, tile=150)
"""o1, o3."""
ANTHROPIC_IMAGES = AnthropicImageRule()
DEFAULT_IMAGES = LargestImageRule((GPT_4O_IMAGES, ANTHROPIC_IMAGES), name="largest-gpt-4o-claude")
"""The rule of a build made for no model: GPT-4o's and Claude's counts, whichever is larger."""


def patch_rule(multiplier: float) -> OpenAIPatchRule:
    """OpenAI's patch rule with a model's multiplier (gpt-4.1-mini: 1.62)."""
    return OpenAIPatchRule(f"openai-patches-{multiplier:g}", multiplier)
