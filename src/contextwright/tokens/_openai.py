"""Exact offline OpenAI encodings (o200k_base, cl100k_base) through the ``bpe-openai`` package.

``tiktoken`` downloads its BPE files at run time and fails offline; ``bpe-openai`` ships both.
Special-token text such as ``<|endoftext|>`` inside content is counted as ordinary text, which is
what the provider does with message content.
"""

from __future__ import annotations

import warnings
from typing import Any

from contextwright.errors import TokenizerError
from contextwright.tokens._base import PIECE_CHARS, iter_pieces, split_into_pieces

OPENAI_ENCODINGS = ("o200k_base", "cl100k_base")


class OpenAITokenizer:
    """Exact token counts for an OpenAI encoding, offline."""

    exact = True

    def __init__(self, encoding: str = "o200k_base") -> None:
        if encoding not in OPENAI_ENCODINGS:
            raise TokenizerError(f"unknown OpenAI encoding; expected one of {OPENAI_ENCODINGS}")
        with warnings.catch_warnings():
            # bpe-openai 0.1.x loads its files with importlib.resources.open_binary, which is
            # deprecated; the warning is the package's, not the caller's, so keep it quiet.
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                import bpe_openai
            except ImportError as exc:  # pragma: no cover - a core dependency
                raise TokenizerError("the bpe-openai package is not installed") from exc
            self.name = encoding
            self._encoding: Any = bpe_openai.get_encoding(encoding)

    def _encode(self, text: str) -> list[int]:
        tokens: list[int] = self._encoding.encode_ordinary(text)
        return tokens

    def count(self, text: str) -> int:
        """Exact count; long text is encoded in pieces (the encoder refuses >200,000 tokens)."""
        if len(text) <= PIECE_CHARS:
            return len(self._encode(text))
        return sum(len(self._encode(piece)) for piece in split_into_pieces(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        """Longest prefix within ``max_tokens``; never splits a character."""
        tokens: list[int] = []
        for piece in iter_pieces(text):
            tokens.extend(self._encode(piece))
            if len(tokens) > max_tokens:
                break
        else:
            return text
        raw: bytes = self._encoding.decode_bytes(tokens[:max_tokens])
        prefix = raw.decode("utf-8", errors="ignore")
        # Re-encoding a decoded prefix can merge differently at its end; shave until it fits.
        while prefix and self.count(prefix) > max_tokens:
            prefix = prefix[:-1]
        return prefix
