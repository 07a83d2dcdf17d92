"""A fast CJK-aware token estimate, for models whose tokenizer is unknown. Always marked inexact."""

from __future__ import annotations

import math
import re

from contextwright.analysis import CJK, cjk_class

# CJK ideographs, kana and Hangul cost about one token per character in modern BPE vocabularies;
# other text costs about one token per four characters.
_WIDE = re.compile(rf"[{cjk_class(CJK)}]")


def estimate_tokens(text: str) -> int:
    """Estimated token count: one per CJK character plus one per four other characters."""
    wide = len(_WIDE.findall(text))
    return wide + math.ceil((len(text) - wide) / 4)


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
