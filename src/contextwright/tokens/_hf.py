"""Exact counts for any Hugging Face ``tokenizer.json`` file, loaded from disk (never the hub)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from contextwright.errors import TokenizerError
from contextwright.tokens._base import PIECE_CHARS, ChatFrame, split_into_pieces
from contextwright.tokens._chat_template import chat_frame_for

logger = logging.getLogger("contextwright")


class HuggingFaceTokenizer:
    """A ``tokenizers.Tokenizer`` read from a local ``tokenizer.json``.

    Text is counted exactly. A chat model's per-message framing comes from its chat template:
    when one ships beside the file (``chat_template.jinja`` or ``tokenizer_config.json``), it is
    rendered to measure the framing (``tokens._chat_template``) and counts are exact
    (``exact`` is True; contexts with tools stay estimates). Without a template, builds count
    OpenAI's framing and say their totals are estimated. A template that fails to render is
    reported (``warning``, logged and put in every build's report) and counts fall back to
    estimates.
    """

    exact: bool = False
    chat_frame: ChatFrame | None = None
    """The framing measured from the chat template (None: none could be)."""
    frame_note: str = ""
    """Where the framing came from, or why there is none."""
    warning: str | None = None
    """Set when a chat template was found but could not be used."""

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
        self._read_chat_template(Path(path))

    def _read_chat_template(self, path: Path) -> None:
        try:
            self.chat_frame, self.frame_note = chat_frame_for(path, self._count_rendered)
        except TokenizerError as error:
            self.frame_note = str(error)
            self.warning = (f"tokenizer {path.name}: {error}; token counts are estimated "
                            "(OpenAI's framing)")
            logger.warning("%s", self.warning)
        self.exact = self.chat_frame is not None

    def _count_rendered(self, text: str) -> int:
        """Tokens of a rendered chat, special tokens in its text included."""
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

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
