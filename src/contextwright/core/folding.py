r"""How text reads once Unicode disguises are undone, for matching fence syntax and labels.

A reader (or a tokenizer's normaliser) sees ``＜｜im_start｜＞``, ``<\u200b|im_start|>`` and
``<|im_start|>`` alike, so anything that decides whether text looks like structure looks at its
*folded* form: invisible characters removed (format characters, default-ignorable code points,
non-whitespace control characters), compatibility forms undone (fullwidth and small forms,
ligatures, compatibility letters: NFKD, see ``fold``), then case folded. Folding never creates,
removes or merges line breaks, so a folded text has the same lines as the text it came from.

Pure functions of their input; nothing here renders or escapes.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from contextwright.core.caches import register_cache

# Unicode 14 general category Cf, Default_Ignorable_Code_Point and the control characters that
# are not whitespace (tab and the line breaks stay: they are visible layout). A test checks that
# every Cf code point of the running Python is listed, so a Unicode upgrade cannot slip one in.
INVISIBLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x0008), (0x000E, 0x001B), (0x007F, 0x0084), (0x0086, 0x009F),
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD),
    (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)

_INVISIBLE = re.compile(
    "[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in INVISIBLE_RANGES) + "]")
# ASCII text needs folding only for its control characters (decomposition leaves ASCII alone).
_ASCII_INVISIBLE = re.compile(r"[\x00-\x08\x0e-\x1b\x7f]")


BLANK_SYMBOLS = "\u2800\U0001d159"
"""Symbols drawn as blank space though they are not whitespace: U+2800 BRAILLE PATTERN BLANK,
U+1D159 MUSICAL SYMBOL NULL NOTEHEAD. (The Hangul fillers, also drawn blank, are invisible.)"""
_MARKS = ("Mn", "Me")


def _bmp_mark_class() -> str:
    """A regex class of the combining marks of the Basic Multilingual Plane (Mn, Me).

    Read from the running Python's Unicode data (a scan of 65,536 code points, about 10 ms
    once), so a Unicode upgrade brings its new marks. The other planes' marks are looked up
    one character at a time (``bare``): a class holding their ranges would make ``re`` test
    every character of a text slowly.
    """
    marks = [c for c in range(0x10000) if unicodedata.category(chr(c)) in _MARKS]
    ranges: list[list[int]] = []
    for code in marks:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return "[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges) + "]"


_BMP_MARKS = re.compile(_bmp_mark_class())
_BLANKS = re.compile(f"[{BLANK_SYMBOLS}]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _bare_astral(match: re.Match[str]) -> str:
    char = match.group(0)
    return "" if unicodedata.category(char) in _MARKS else char


def bare(folded: str) -> str:
    """A folded text as its shapes read: combining marks dropped, blank symbols as spaces.

    For judging where structure starts (a separator, a speaker): ``=`` with an acute accent
    on it still reads ``=``, and a line opening with a Braille blank looks indented. Not part
    of ``fold``, which keeps marks so text keeps its letters (``é`` folds to ``e`` and a mark).
    Lines are kept: no line break is a mark or a blank symbol.
    """
    if folded.isascii():
        return folded
    text = _BMP_MARKS.sub("", folded) if _BMP_MARKS.search(folded) else folded
    text = _BLANKS.sub(" ", text) if _BLANKS.search(text) else text
    return _ASTRAL.sub(_bare_astral, text) if _ASTRAL.search(text) else text


def is_invisible(char: str) -> bool:
    """Whether ``char`` is dropped by folding (it shows as nothing)."""
    return _INVISIBLE.fullmatch(char) is not None


def reads_as_itself(text: str) -> bool:
    """Whether folding ``text`` only lower-cases it (plain ASCII without control characters).

    Then the text's own positions are its folded form's, and case-insensitive matching on the
    raw text is matching on the folded form.
    """
    return text.isascii() and _ASCII_INVISIBLE.search(text) is None


def fold(text: str) -> str:
    """``text`` as it reads: invisible characters removed, compatibility forms undone, case folded.

    The decomposition is NFKD, not NFKC: the ASCII that NFKC's form shows is all there in
    NFKD's too (composition only ever turns ASCII plus a combining mark into something else,
    ``<`` + U+0338 into ``≮``), so matching on it misses nothing NFKC would show and at worst
    escapes a little more; and CPython composes slowly (NFKC of Chinese text with fullwidth
    punctuation costs ten times NFKD). It runs again after case folding, which can produce
    characters it would still change.
    """
    if reads_as_itself(text):
        return text.lower()
    return _visible(_nfkd(_nfkd(_visible(text)).casefold()))


def _visible(text: str) -> str:
    return _INVISIBLE.sub("", text) if _INVISIBLE.search(text) else text


def _nfkd(text: str) -> str:
    # The quick check is far cheaper than normalising text that is already normalised.
    if unicodedata.is_normalized("NFKD", text):
        return text
    return unicodedata.normalize("NFKD", text)


@lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    return "" if is_invisible(char) else fold(char)


def fold_with_origins(text: str) -> tuple[str, list[int]]:
    """``text`` folded character by character, and for each folded character its raw index.

    Folding each character alone shows the same characters as the whole-text ``fold``: the
    only step that looks across characters, canonical reordering, moves combining marks among
    themselves and never past the ASCII a match is made of.
    """
    pieces: list[str] = []
    origins: list[int] = []
    for index, char in enumerate(text):
        folded = _fold_char(char)
        pieces.append(folded)
        origins.extend([index] * len(folded))
    return "".join(pieces), origins


register_cache("core.folding.fold_char", _fold_char)
