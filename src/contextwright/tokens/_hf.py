"""Exact counts for any Hugging Face ``tokenizer.json`` file, loaded from disk (never the hub)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contextwright.errors import TokenizerError
from contextwright.tokens._base import PIECE_CHARS, split_into_pieces


class HuggingFaceTokenizer:
    """A ``tokenizers.Tokenizer`` read from a local ``tokenizer.json``.

    Text is counted exactly, but a chat model's per-message framing comes from its chat
    template, which this tokenizer does not read: builds count OpenAI's constants for it, so
    their totals are marked estimated (``exact`` is False).
    """

    exact = False

    def __init__(self, path: str | Path) -> None:
        try:
            from tokenizers import Tokenizer as HfTokenizer
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise TokenizerError("the tokenizers package is not installed") from exc
        try:
            self._tokenizer: Any = HfTokenizer.from_file(str(path))
        except Exception as exc:  # the Rust side raises plain Exception for bad files
            raise TokenizerError("cannot load tokenizer.json at the given path") from exc
        self.name = f"hf:{Path(path).resolve()}"

    def _ids(self, text: str) -> list[int]:
        ids: list[int] = self._tokenizer.encode(text, add_special_tokens=False).ids
        return ids

    def count(self, text: str) -> int:
        """Exact count without the model's added special tokens."""
        if len(text) <= PIECE_CHARS:
            return len(self._ids(text))
        return sum(len(self._ids(piece)) for piece in split_into_pieces(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        """Longest prefix within ``max_tokens``, cut at a token's character offset."""
        encoding = self._tokenizer.encode(text[: max(max_tokens, 1) * 32], add_special_tokens=False)
        if len(encoding.ids) <= max_tokens and len(text) <= max(max_tokens, 1) * 32:
            return text
        end = encoding.offsets[max_tokens - 1][1] if max_tokens > 0 else 0
        prefix = text[:end]
        while prefix and self.count(prefix) > max_tokens:
            prefix = prefix[:-1]
        return prefix
