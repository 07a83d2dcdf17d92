"""Token counting: exact offline OpenAI encodings, HF tokenizer.json, a CJK-aware estimate.

This package imports nothing else of contextwright but ``errors``. Every tokenizer is wrapped in a
``CountingTokenizer`` that caches counts by content, so a long session is never re-tokenised.
"""

from contextwright.tokens._base import CountingTokenizer, Tokenizer, get_tokenizer
from contextwright.tokens._estimate import EstimateTokenizer, estimate_tokens
from contextwright.tokens._hf import HuggingFaceTokenizer
from contextwright.tokens._openai import OpenAITokenizer

__all__ = [
    "CountingTokenizer",
    "EstimateTokenizer",
    "HuggingFaceTokenizer",
    "OpenAITokenizer",
    "Tokenizer",
    "estimate_tokens",
    "get_tokenizer",
]
