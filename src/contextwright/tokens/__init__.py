"""Token counting: exact offline OpenAI encodings, HF tokenizer.json, a CJK-aware estimate, images.

This package imports nothing else of contextwright but ``errors``. Every tokenizer is wrapped in a
``CountingTokenizer`` that caches counts by content, so a long session is never re-tokenised.
"""

from contextwright.tokens._base import (
    OPENAI_CHAT_FRAME,
    ChatFrame,
    CountingTokenizer,
    Tokenizer,
    get_tokenizer,
)
from contextwright.tokens._estimate import EstimateTokenizer, estimate_tokens
from contextwright.tokens._hf import HuggingFaceTokenizer
from contextwright.tokens._images import (
    ANTHROPIC_IMAGES,
    DEFAULT_IMAGES,
    GPT_4O_IMAGES,
    GPT_4O_MINI_IMAGES,
    GPT_5_IMAGES,
    O_SERIES_IMAGES,
    AnthropicImageRule,
    ImageTokenRule,
    LargestImageRule,
    OpenAIPatchRule,
    OpenAITileRule,
    TokenCount,
    patch_rule,
)
from contextwright.tokens._openai import OpenAITokenizer

__all__ = [
    "ANTHROPIC_IMAGES",
    "DEFAULT_IMAGES",
    "GPT_4O_IMAGES",
    "GPT_4O_MINI_IMAGES",
    "GPT_5_IMAGES",
    "OPENAI_CHAT_FRAME",
    "O_SERIES_IMAGES",
    "AnthropicImageRule",
    "ChatFrame",
    "CountingTokenizer",
    "EstimateTokenizer",
    "HuggingFaceTokenizer",
    "ImageTokenRule",
    "LargestImageRule",
    "OpenAIPatchRule",
    "OpenAITileRule",
    "OpenAITokenizer",
    "TokenCount",
    "Tokenizer",
    "estimate_tokens",
    "get_tokenizer",
    "patch_rule",
]
