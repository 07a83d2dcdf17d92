"""A fast CJK-aware token estimate, for models whose tokenizer is unknown. Always marked inexact."""

from __future__ import annotations

import math
import re

from contextwright.analysis import CJK, cjk_class

# CJK ideographs, kana and Hangul, CJK punctuation (，。《》) and full-width forms (ＡＢ１２) cost
# about one token per character in modern BPE vocabularies (o200k: 0.9-1.2; cl100k: 1.1-1.6);
# characters beyond the basic plane (emoji, rare ideographs) three or so (their UTF-8 bytes are
# split); other text about one token per four characters.
_WIDE = re.compile(rf"[{cjk_class(CJK)}\u3000-\u303f\uff00-\uffef]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_ASTRAL_TOKENS = 3


def estimate_tokens(text: str) -> int:
    """Estimated tokens: one a wide character, three one beyond the basic plane, a quarter else."""
    return estimate_from_parts(*estimate_parts(text))


def estimate_parts(text: str) -> tuple[int, int, int]:
    """What the estimate of ``text`` is made of: wide characters, astral ones, all characters.

    Parts add up over a concatenation, so the estimate of a long text grown piece by piece is
    worked out from the pieces' parts (``estimate_from_parts``) without reading it again.
    """
    if text.isascii():
        return 0, 0, len(text)
    wide = len(_WIDE.findall(text))
    astral = len(_ASTRAL.findall(text)) if max(text) > "\uffff" else 0
    return wide, astral, len(text)


def estimate_from_parts(wide: int, astral: int, length: int) -> int:
    """The estimate of a text with these ``estimate_parts``."""
    return wide + _ASTRAL_TOKENS * astral + math.ceil((length - wide - astral) / 4)


class EstimateTokenizer:
    """Heuristic tokenizer; ``exact`` is False so reports say the counts are estimates."""

    name = "estimate"
    exact = False

    def count(self, text: str) -> int:
        """Estimated count of ``text``."""
        return estimate_tokens(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        """Longest prefix whose estimate is within ``max_tokens`` (binary search on length)."""
        low, high = 0, len(text)
        while low < high:
            middle = (low + high + 1) // 2
            if estimate_tokens(text[:middle]) <= max_tokens:
                low = middle
            else:
                high = middle - 1
        return text[:low]
