"""Model profiles: the tokenizer, context window and output reserve of a named model.

``ContextBuilder(model="gpt-4o")`` looks its model up here. The table holds the models' published
limits (provider documentation, 2025 and 2026: Claude up to the 5.x family, GPT up to 5.5); a
dated name (``gpt-4o-2024-08-06``,
``claude-sonnet-4-5-20250929``) or ``-latest`` matches its family. Add or override a
model with ``register_model``. No maintained package ships these limits offline without pulling
in a whole provider router, so the table is small and kept here.

Anthropic does not publish its tokenizer: Claude models count with ``o200k_base`` and their counts
are marked estimated (``BuildReport.exact_tokens`` is False), so keep a margin in the plan's
``safety_ratio``.

Each profile also names how the model counts images (``contextwright.tokens``' rules, from the
providers' published tables): GPT-4o and GPT-4.1 by 85 + 170 tokens per 512-pixel tile, GPT-4o
mini by 2,833 + 5,667, GPT-5 by 70 + 140, o1 / o3 by 75 + 150, the small GPT-4.1 / GPT-5 models
and o4-mini by 32-pixel patches times a multiplier, Claude by ``width * height / 750``.
"""

from __future__ import annotations

import difflib
import math
import re
import threading
from dataclasses import dataclass

from contextwright.core.caches import register_cache
from contextwright.errors import PlanError
from contextwright.tokens import (
    ANTHROPIC_IMAGES,
    DEFAULT_IMAGES,
    GPT_4O_IMAGES,
    GPT_4O_MINI_IMAGES,
    GPT_5_IMAGES,
    O_SERIES_IMAGES,
    CountingTokenizer,
    ImageTokenRule,
    get_tokenizer,
    patch_rule,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelProfile:
    """What a build needs to know about one model."""

    name: str
    """The model name (or family prefix) as the provider's API takes it."""
    provider: str
    """``openai`` or ``anthropic`` (the request format it is usually called with)."""
    tokenizer: str
    """Tokenizer name for ``get_tokenizer``."""
    exact: bool
    """Whether that tokenizer gives the model's real counts."""
    window: int
    """Context window in tokens (input and output together)."""
    max_output: int
    """The most output tokens the model may produce in one call."""
    default_output: int
    """Output tokens a build reserves unless told otherwise.

    A typical answer, well below ``max_output``, so the context keeps its room.
    """
    images: ImageTokenRule = DEFAULT_IMAGES
    """How the model counts an image (default: the larger of GPT-4o's and Claude's counts,
    marked estimated)."""
    estimate_scale: float = 1.0
    """With an estimated tokenizer: the model's count of a text as a multiple of the stand-in's
    (counts are rounded up, truncation keeps that much less)."""


_PROFILES: dict[str, ModelProfile] = {}
_LOCK = threading.Lock()


def register_model(profile: ModelProfile) -> None:
    """Add a model (or replace one) for every builder of this process."""
    if profile.window <= profile.default_output or profile.default_output <= 0:
        raise PlanError(f"model {profile.name}: the window must exceed a positive output reserve")
    with _LOCK:
        _PROFILES[profile.name] = profile
        _TOKENIZERS.pop(profile.name, None)


_VERSION_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def model_profile(name: str) -> ModelProfile:
    """The profile of ``name``: an exact entry, else its family without a date or ``-latest``.

    Only those suffixes are taken off: ``gpt-5-chat-latest`` or ``gpt-4o-audio-preview`` are
    other models with other limits, and are refused until registered.
    """
    with _LOCK:
        found = _PROFILES.get(name) or _PROFILES.get(_VERSION_SUFFIX.sub("", name))
        known = sorted(_PROFILES)
    if found is None:
        raise PlanError(f"unknown model {name!r}{_closest_model(name, known)}: register it "
                        f"with register_model (known: {', '.join(known)})")
    return found


def _closest_model(name: str, known: list[str]) -> str:
    """`` (did you mean 'gpt-4o'?)`` for a misspelt model name, compared without its date.

    The known names are many and alike, so the closest one is named first: a typo such as
    ``gpt4o`` or ``claude-sonet-4-5`` is otherwise left to be found in a list of dozens. Only a
    name with the same version numbers is offered: ``o3-mini`` is not a typo of ``o4-mini`` but
    another model, with other limits.
    """
    family = _VERSION_SUFFIX.sub("", name)
    same_version = [known_name for known_name in known
                    if _DIGITS.findall(known_name) == _DIGITS.findall(family)]
    close = difflib.get_close_matches(family.lower(), same_version, n=1, cutoff=0.8)
    return f" (did you mean {close[0]!r}?)" if close else ""


_DIGITS = re.compile(r"\d+")


class EstimatedTokenizer:
    """Another model's tokenizer standing in for one that is not published.

    Its counts are estimates, and say so (``exact`` is False). ``scale``: how many of the
    model's tokens one of the stand-in's makes, on average (a model whose tokenizer splits text
    finer counts more).
    """

    exact = False

    def __init__(self, inner: CountingTokenizer, model: str, scale: float = 1.0) -> None:
        if not (math.isfinite(scale) and scale > 0):
            raise PlanError(f"model {model}: estimate_scale must be a positive number")
        self._inner = inner
        self._scale = scale
        self.name = f"{inner.name}~{model}" if scale == 1.0 else f"{inner.name}*{scale}~{model}"

    def count(self, text: str) -> int:
        """The stand-in's count, scaled and rounded up."""
        counted = self._inner.count(text)
        return counted if self._scale == 1.0 else math.ceil(counted * self._scale)

    def truncate(self, text: str, max_tokens: int) -> str:
        """The stand-in's cut, at what ``max_tokens`` of the model's make of its tokens."""
        if self._scale == 1.0:
            return self._inner.truncate(text, max_tokens)
        return self._inner.truncate(text, int(max_tokens / self._scale))


_TOKENIZERS: dict[str, CountingTokenizer] = {}


def profile_tokenizer(profile: ModelProfile) -> CountingTokenizer:
    """The tokenizer a profile counts with (one per model, so its count cache is shared)."""
    with _LOCK:
        found = _TOKENIZERS.get(profile.name)
    if found is None:
        inner = get_tokenizer(profile.tokenizer)
        found = inner if profile.exact else CountingTokenizer(
            EstimatedTokenizer(inner, profile.name, profile.estimate_scale))
        with _LOCK:
            found = _TOKENIZERS.setdefault(profile.name, found)
    return found


def _known(name: str, provider: str, window: int, max_output: int,
           images: ImageTokenRule, tokenizer: str = "o200k_base", exact: bool | None = None,
           estimate_scale: float = 1.0) -> None:
    """A shipped profile: OpenAI's tokenizers are exact, Claude's counts are estimates."""
    register_model(ModelProfile(name=name, provider=provider, tokenizer=tokenizer,
                                exact=provider == "openai" if exact is None else exact,
                                window=window, max_output=max_output,
                                default_output=min(4096, max_output), images=images,
                                estimate_scale=estimate_scale))


CLAUDE_5_TOKENS = 1.3
"""Claude's models from Sonnet 5 on use a new tokenizer that, Anthropic says, makes about 30%
more tokens of the same text than the one before: their ``o200k_base`` estimates are scaled by
it (rounded up), so a budget in their tokens is not overrun by that much."""


_known("gpt-4o", "openai", 128_000, 16_384, GPT_4O_IMAGES)
_known("gpt-4o-mini", "openai", 128_000, 16_384, GPT_4O_MINI_IMAGES)
_known("gpt-4.1", "openai", 1_047_576, 32_768, GPT_4O_IMAGES)
_known("gpt-4.1-mini", "openai", 1_047_576, 32_768, patch_rule(1.62))
_known("gpt-4.1-nano", "openai", 1_047_576, 32_768, patch_rule(2.46))
_known("gpt-5", "openai", 400_000, 128_000, GPT_5_IMAGES)
_known("gpt-5-mini", "openai", 400_000, 128_000, patch_rule(1.62))
_known("gpt-5-nano", "openai", 400_000, 128_000, patch_rule(2.46))
_known("o3", "openai", 200_000, 100_000, O_SERIES_IMAGES)
_known("o4-mini", "openai", 200_000, 100_000, patch_rule(1.72))
_known("gpt-4-turbo", "openai", 128_000, 4_096, GPT_4O_IMAGES, tokenizer="cl100k_base")
_known("gpt-3.5-turbo", "openai", 16_385, 4_096, GPT_4O_IMAGES, tokenizer="cl100k_base")
for _claude in ("claude-sonnet-4-5", "claude-sonnet-4", "claude-haiku-4-5", "claude-3-7-sonnet"):
    _known(_claude, "anthropic", 200_000, 64_000, ANTHROPIC_IMAGES)
_known("claude-opus-4-1", "anthropic", 200_000, 32_000, ANTHROPIC_IMAGES)
_known("claude-opus-4", "anthropic", 200_000, 32_000, ANTHROPIC_IMAGES)
_known("claude-3-5-haiku", "anthropic", 200_000, 8_192, ANTHROPIC_IMAGES)
_known("claude-opus-4-5", "anthropic", 200_000, 64_000, ANTHROPIC_IMAGES)
for _claude in ("claude-sonnet-4-6", "claude-opus-4-6", "claude-opus-4-7", "claude-opus-4-8"):
    _known(_claude, "anthropic", 1_000_000, 128_000, ANTHROPIC_IMAGES)
for _claude in ("claude-sonnet-5", "claude-sonnet-5-5", "claude-opus-5", "claude-opus-5-5",
                "claude-haiku-5-5", "claude-fable-5", "claude-fable-5-1", "claude-fable-5-2"):
    _known(_claude, "anthropic", 1_000_000, 128_000, ANTHROPIC_IMAGES,
           estimate_scale=CLAUDE_5_TOKENS)
for _gpt in ("gpt-5.1", "gpt-5.2"):
    _known(_gpt, "openai", 400_000, 128_000, GPT_5_IMAGES)
# GPT-5.5's tokenizer is not published as o200k_base's successor or not: estimated.
_known("gpt-5.5", "openai", 1_000_000, 128_000, GPT_5_IMAGES, exact=False)


register_cache("models.tokenizers", _TOKENIZERS)
