"""A fast script-aware token estimate, for models whose tokenizer is unknown. Always marked inexact.

The estimate is meant to err high: a build that fits by the estimate must fit the model. Each
character costs a fixed share of a token by its script, calibrated on text written in each
script against both ``o200k_base`` and ``cl100k_base`` and set at or above the larger of the
two. Plain ASCII, and the punctuation English and Chinese text is written with, cost what they
always did, so English and Chinese estimates are unchanged.
"""

from __future__ import annotations

import math
from typing import Final

from contextwright.analysis import CJK, CJK_RANGES

# CJK ideographs, kana, CJK punctuation (，。《》) and full-width forms (ＡＢ１２) cost about one
# token per character in modern BPE vocabularies (o200k: 0.9-1.2; cl100k: 0.9-1.6); characters
# beyond the basic plane (emoji, rare ideographs) three or so (their UTF-8 bytes are split). Both
# are counted in whole tokens. Hangul costs more (below).
_WIDE_RANGES: Final = (*(CJK_RANGES[block] for block in CJK if block != "hangul"),
                       (0x3000, 0x303F), (0xFF00, 0xFFEF))
_ASTRAL_TOKENS: Final = 3

# Every other character costs quarter tokens: ASCII one (four characters a token). Other
# scripts' letters and marks cost more: the weights below are the least quarter count that
# keeps everyday sentences (shopping, support requests, code comments, chat) at or above both
# OpenAI encodings, with some room; cl100k is the dearer one for every script here (Telugu,
# Georgian, Armenian about two tokens a letter, o200k about half a token). A byte-level BPE
# never spends more tokens on a character than its UTF-8 bytes, so a script not listed costs
# that many tokens: two for the rest of U+0080-U+07FF, three above.
_TWO_BYTE_QUARTERS: Final = 8
_THREE_BYTE_QUARTERS: Final = 12
_QUARTERS_BY_RANGE: Final[tuple[tuple[int, int, int], ...]] = (
    # (first code point, last code point, quarter tokens per character)
    (0x0080, 0x00BF, 1),   # Latin-1 punctuation and signs (no-break space, ©, °, «»), as before
    (0x00C0, 0x024F, 4),   # accented Latin letters (é, ł, ő), × and ÷
    (0x0250, 0x02FF, 4),   # IPA letters, modifier letters
    (0x0300, 0x036F, 10),  # combining diacritics (é written as e and an accent)
    (0x0370, 0x03FF, 6),   # Greek: about 1.1 tokens a letter in cl100k
    (0x1F00, 0x1FFF, 6),   # Greek with accents
    (0x0400, 0x045F, 8),   # Cyrillic letters outside Russian's alphabet (і ї є ј љ ў ё)
    (0x0410, 0x044F, 3),   # Russian's alphabet: 0.55-0.7 tokens a letter in cl100k
    (0x0460, 0x052F, 12),  # Cyrillic of Kazakh, Mongolian, Tatar... (ә ғ қ ө ү): rare words
    (0x0530, 0x058F, 10),  # Armenian: 2.2 in cl100k
    (0x0590, 0x05FF, 6),   # Hebrew: 1.2, 1.5 with vowel points
    (0xFB1D, 0xFB4F, 6),   # Hebrew presentation forms
    (0x0600, 0x06FF, 8),   # Arabic marks (harakat), and letters of Persian, Urdu, Pashto
    (0x0620, 0x064A, 4),   # Arabic's own letters: 0.85 in cl100k
    (0x0750, 0x077F, 8),   # Arabic supplement
    (0x08A0, 0x08FF, 8),   # Arabic extended
    (0xFB50, 0xFDFF, 8),   # Arabic presentation forms
    (0xFE70, 0xFEFE, 8),
    (0x0900, 0x097F, 6),   # Devanagari (Hindi, Marathi, Nepali): 1.3 in cl100k
    (0x0980, 0x09FF, 8),   # Bengali: 1.5
    (0x0B80, 0x0BFF, 8),   # Tamil: 1.55
    (0x0A00, 0x0AFF, 10),  # Gurmukhi, Gujarati: 2.0
    (0x0C00, 0x0DFF, 10),  # Telugu, Kannada, Malayalam, Sinhala: 1.9-2.15
    (0x0E00, 0x0E7F, 5),   # Thai: 1.0
    (0x0F00, 0x0FFF, 10),  # Tibetan: 2.0
    (0x1000, 0x109F, 10),  # Myanmar: 2.1
    (0x10A0, 0x10FF, 10),  # Georgian: 2.2
    (0x1C90, 0x1CBF, 10),  # Georgian capitals
    (0x2D00, 0x2D2F, 10),  # Georgian supplement
    (0x1780, 0x17FF, 10),  # Khmer: 1.8
    (0x1E00, 0x1EFF, 8),   # Latin with stacked accents (Vietnamese ệ ở)
    (0x2000, 0x206F, 1),   # general punctuation (— – … “ ” ’), as before
    (0x200B, 0x200F, 12),  # zero-width joiner and spaces, direction marks: split into bytes
    (0x2028, 0x202F, 12),
    (0x2060, 0x206F, 12),
    (0x20A0, 0x20CF, 4),   # currency signs (€ ₹ ₽)
    (0x2100, 0x21FF, 8),   # letterlike symbols (℃ ℝ), arrows
    (0x2200, 0x22FF, 12),  # mathematical operators (∀ ∈ ≠)
    (0x2300, 0x24FF, 8),   # technical, enclosed numbers (①)
    (0x2500, 0x259F, 4),   # box drawing and blocks, as text tables draw them
    (0x25A0, 0x2BFF, 8),   # shapes, symbols, dingbats (✓ ★ ☀)
    (0xAC00, 0xD7AF, 7),   # Hangul syllables: 1.2-1.7 tokens each in cl100k (o200k: 0.8)
    (0x3130, 0x318F, 8),   # Hangul letters written alone (ㅋㅋ ㅠㅠ)
)
"""Later ranges win where they overlap an earlier one; CJK and full-width characters are
counted in whole tokens whatever this table says."""

_WIDE: Final = "\x00"
"""What ``_CLASSES`` maps a wide character to (every other value is its quarter count)."""


def _classes() -> str:
    """For each basic-plane code point, the character its cost is counted as (``str.translate``)."""
    table = bytearray([_THREE_BYTE_QUARTERS]) * 0x10000
    table[:0x80] = bytes([1]) * 0x80
    table[0x80:0x800] = bytes([_TWO_BYTE_QUARTERS]) * (0x800 - 0x80)
    for first, last, quarters in _QUARTERS_BY_RANGE:
        table[first:last + 1] = bytes([quarters]) * (last + 1 - first)
    for first, last in _WIDE_RANGES:
        table[first:last + 1] = bytes([ord(_WIDE)]) * (last + 1 - first)
    return table.decode("latin-1")


_CLASSES: Final = _classes()
_QUARTER_COUNTS: Final = tuple(sorted({ord(cls) for cls in _CLASSES} - {ord(_WIDE)}))


def estimate_tokens(text: str) -> int:
    """Estimated tokens: a wide character one, past the basic plane three, else by script."""
    return estimate_from_parts(*estimate_parts(text))


def estimate_parts(text: str) -> tuple[int, int, int]:
    """What the estimate of ``text`` is made of: whole tokens, quarter tokens, all characters.

    Whole tokens are those of wide characters and of characters beyond the basic plane;
    quarter tokens those of every other character. Parts add up over a concatenation, so the
    estimate of a long text grown piece by piece is worked out from the pieces' parts
    (``estimate_from_parts``) without reading it again.
    """
    if text.isascii():
        return 0, len(text), len(text)
    # Characters beyond the basic plane are past the table's end: translate leaves them be.
    classes = text.translate(_CLASSES)
    wide = classes.count(_WIDE)
    quarters = 0
    counted = wide
    for weight in _QUARTER_COUNTS:
        found = classes.count(chr(weight))
        quarters += weight * found
        counted += found
    astral = len(text) - counted
    return wide + _ASTRAL_TOKENS * astral, quarters, len(text)


def estimate_from_parts(whole: int, quarters: int, length: int) -> int:
    """The estimate of a text with these ``estimate_parts`` (its ``length`` does not count)."""
    return whole + math.ceil(quarters / 4)


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
