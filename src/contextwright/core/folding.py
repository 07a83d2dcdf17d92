r"""How text reads once Unicode disguises are undone, for matching fence syntax and labels.

A reader (or a tokenizer's normaliser) sees ``＜｜im_start｜＞``, ``<\u200b|im_start|>`` and
``<|im_start|>`` alike, so anything that decides whether text looks like structure looks at its
*folded* form: invisible characters removed (format characters, default-ignorable code points,
non-whitespace control characters), compatibility forms undone (fullwidth and small forms,
ligatures, compatibility letters: NFKD, see ``fold``), then case folded. Folding never creates,
removes or merges line breaks, so a folded text has the same lines as the text it came from.

Where structure is judged (is this line a separator, a speaker?) the folded text is also read
*bare* (``bare``, ``shape``): combining marks dropped, blank symbols as spaces, and letters of
other scripts that pass for Latin ones (Cyrillic ``е``, Greek ``ο``, small capital ``ᴜ``) as
those Latin letters. ``fold`` itself keeps every letter: text that is shown keeps its own.

Pure functions of their input; nothing here renders or escapes.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
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


def _class_of(codes: Iterable[int], slack: int = 1) -> str:
    """A regex class of the code points ``codes``, as ranges.

    Code points at most ``slack`` apart share a range (the class then holds a few more):
    ``re`` tests a class of Basic Multilingual Plane characters fast however many, but one
    with characters of other planes range by range, for every character of a text.
    """
    ranges: list[list[int]] = []
    for code in sorted(codes):
        if ranges and code - ranges[-1][1] <= slack:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return "[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges) + "]"


# The combining marks of the Basic Multilingual Plane (Mn, Me), read from the running Python's
# Unicode data (a scan of 65,536 code points, about 10 ms once), so a Unicode upgrade brings
# its new marks. The other planes' marks are looked up one character at a time (``bare``).
_BMP_MARKS = re.compile(_class_of(
    c for c in range(0x10000) if unicodedata.category(chr(c)) in _MARKS))
_BLANKS = re.compile(f"[{BLANK_SYMBOLS}]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")

# Characters a reader takes for a Latin letter, `:` or `=` though folding leaves them apart, by
# what they read as. The table is curated by hand for what it takes to forge an English label
# or a separator line: Cyrillic and Greek letters drawn like Latin ones, Latin small capitals
# and IPA letters, Latin letters with a stroke through them (read past like an accent), the
# Armenian, Cherokee and Lisu letters drawn like Latin ones, and punctuation drawn as a colon
# or an equals sign. It does not cover the look-alikes of other scripts (Coptic, Old Italic,
# Canadian syllabics letters and the like), letters that resemble a Latin one only in some
# fonts (Cyrillic п, и, ш; Greek σ, θ), digits (`0` for `O`), or shapes other than letters,
# `:` and `=` (box drawing `═`, brackets `〔`). What folding already makes ASCII (fullwidth,
# mathematical and most modifier letters, small `﹕`) is left to folding; a character with a
# combining mark reads as its base (``bare`` drops the mark).
#
# ``_LOOKALIKES`` holds characters folding leaves as they are (small letters, caseless ones),
# so it applies to folded text; a capital whose small letter reads the same (Cyrillic А, Р,
# Ѕ; Greek Α, Ρ, Τ; Armenian Օ, Ս) needs no entry, folding takes it there. I and l look alike,
# but case folding turns a capital I into an i, so each small letter keeps its own reading
# (Cyrillic і: i, palochka ӏ: l). ``_CASED_LOOKALIKES`` holds what folding would turn into a
# character that reads otherwise or not at all: a capital whose small letter does (Greek Η
# reads H, η reads n; Ε reads E, ε nothing) and a few compatibility forms (the lunate sigmas
# fold to σ, the vertical two dot leader `︰` to `..`). Those are read before folding
# (``shape``), and so are the mathematical letters that decompose to one of them
# (``_with_mathematical_forms``). A test checks each entry against the running Python's
# Unicode data.
_LOOKALIKES: dict[str, str] = {
    ":": ("\u2236"              # ∶ ratio sign (mathematics)
          "\u02d0\u02f8\ua789"  # ː ˸ ꞉ modifier letter colons (IPA, phonetics)
          "\u0589"              # ։ Armenian full stop
          "\u05c3"              # ׃ Hebrew sof pasuq
          "\u0703\u0704"        # ܃ ܄ Syriac supralinear and sublinear colons
          "\u0903\u0a83"        # ः ઃ Devanagari and Gujarati visarga
          "\u16ec"              # ᛬ runic multiple punctuation
          "\u205a"              # ⁚ two dot punctuation
          "\u2982"              # ⦂ Z notation type colon
          "\ua4fd"),            # ꓽ Lisu tone letter mya jeu
    "=": ("\u1400"              # ᐀ Canadian syllabics hyphen
          "\u2e40"              # ⹀ double hyphen
          "\u30a0"              # ゠ katakana-hiragana double hyphen
          "\ua78a"              # ꞊ modifier letter short equals sign
          "\ua4ff"),            # ꓿ Lisu full stop
    "a": ("\u0430"              # а Cyrillic
          "\u03b1"              # α Greek
          "\u0251\u1d00"        # ɑ ᴀ Latin alpha, small capital
          "\u13aa\ua4ee"),      # Ꭺ ꓮ Cherokee, Lisu
    "b": ("\u0432"              # в Cyrillic (a small capital B)
          "\u0299\u0180"        # ʙ ƀ Latin small capital, with stroke
          "\u13f4\u13cf\ua4d0"),  # Ᏼ Ꮟ ꓐ Cherokee, Lisu
    "c": ("\u0441"              # с Cyrillic
          "\u1d04"              # ᴄ Latin small capital
          "\u13df\ua4da"),      # Ꮯ ꓚ Cherokee, Lisu
    "d": ("\u0501"              # ԁ Cyrillic
          "\u1d05\u0111"        # ᴅ đ Latin small capital, with stroke
          "\u13a0\ua4d3"),      # Ꭰ ꓓ Cherokee, Lisu
    "e": ("\u0435"              # е Cyrillic
          "\u1d07\u0247"        # ᴇ ɇ Latin small capital, with stroke
          "\u13ac\ua4f0"),      # Ꭼ ꓰ Cherokee, Lisu
    "f": ("\ua730"              # ꜰ Latin small capital
          "\ua4dd"),            # ꓝ Lisu
    "g": ("\u050d"              # ԍ Cyrillic
          "\u0261\u0262"        # ɡ ɢ Latin script g, small capital
          "\u0581"              # ց Armenian
          "\u13c0\ua4d6"),      # Ꮐ ꓖ Cherokee, Lisu
    "h": ("\u04bb\u043d"        # һ н Cyrillic (н a small capital H)
          "\u029c\u0127"        # ʜ ħ Latin small capital, with stroke
          "\u0570"              # հ Armenian
          "\u13bb\u13c2\ua4e7"),  # Ꮋ Ꮒ ꓧ Cherokee, Lisu
    "i": ("\u0456"              # і Cyrillic
          "\u03b9"              # ι Greek
          "\u026a\u0131\u0269\u0268"  # ɪ ı ɩ ɨ Latin small capital, dotless, iota, with stroke
          "\u13a5\ua4f2"),      # Ꭵ ꓲ Cherokee, Lisu
    "j": ("\u0458"              # ј Cyrillic
          "\u03f3"              # ϳ Greek yot
          "\u1d0a\u0237\u0249"  # ᴊ ȷ ɉ Latin small capital, dotless, with stroke
          "\u13ab\ua4d9"),      # Ꭻ ꓙ Cherokee, Lisu
    "k": ("\u043a"              # к Cyrillic
          "\u03ba"              # κ Greek
          "\u1d0b\u0138"        # ᴋ ĸ Latin small capital, kra
          "\u13e6\ua4d7"),      # Ꮶ ꓗ Cherokee, Lisu
    "l": ("\u04cf"              # ӏ Cyrillic palochka
          "\u01c0"              # ǀ Latin letter dental click (a vertical bar)
          "\u029f\u0142"        # ʟ ł Latin small capital, with stroke
          "\u13de\ua4e1"),      # Ꮮ ꓡ Cherokee, Lisu
    "m": ("\u043c"              # м Cyrillic (a small capital M)
          "\u1d0d"              # ᴍ Latin small capital
          "\u13b7\ua4df"),      # Ꮇ ꓟ Cherokee, Lisu
    "n": ("\u03b7"              # η Greek
          "\u0274"              # ɴ Latin small capital
          "\u0578"              # ո Armenian
          "\ua4e0"),            # ꓠ Lisu
    "o": ("\u043e"              # о Cyrillic
          "\u03bf"              # ο Greek
          "\u1d0f\u00f8"        # ᴏ ø Latin small capital, with stroke
          "\u0585"              # օ Armenian
          "\ua4f3"),            # ꓳ Lisu
    "p": ("\u0440"              # р Cyrillic
          "\u03c1"              # ρ Greek
          "\u1d18"              # ᴘ Latin small capital
          "\u13e2\ua4d1"),      # Ꮲ ꓑ Cherokee, Lisu
    "q": ("\u051b"              # ԛ Cyrillic
          "\ua7af"              # ꞯ Latin small capital
          "\u0566\u0563"),      # զ գ Armenian
    "r": ("\u0280\u024d"        # ʀ ɍ Latin small capital, with stroke
          "\u13a1\u13d2\ua4e3"),  # Ꭱ Ꮢ ꓣ Cherokee, Lisu
    "s": ("\u0455"              # ѕ Cyrillic
          "\ua731"              # ꜱ Latin small capital
          "\u13da\ua4e2"),      # Ꮪ ꓢ Cherokee, Lisu
    "t": ("\u0442"              # т Cyrillic (a small capital T)
          "\u03c4"              # τ Greek
          "\u1d1b\u0167"        # ᴛ ŧ Latin small capital, with stroke
          "\u13a2\ua4d4"),      # Ꭲ ꓔ Cherokee, Lisu
    "u": ("\u03c5"              # υ Greek
          "\u1d1c\u028b"        # ᴜ ʋ Latin small capital, v with hook
          "\u057d"              # ս Armenian
          "\ua4f4"),            # ꓴ Lisu
    "v": ("\u0475"              # ѵ Cyrillic izhitsa
          "\u03bd"              # ν Greek
          "\u1d20"              # ᴠ Latin small capital
          "\u13d9\ua4e6"),      # Ꮩ ꓦ Cherokee, Lisu
    "w": ("\u051d\u0461"        # ԝ ѡ Cyrillic we, omega
          "\u03c9"              # ω Greek
          "\u1d21"              # ᴡ Latin small capital
          "\u0561"              # ա Armenian
          "\u13b3\ua4ea"),      # Ꮃ ꓪ Cherokee, Lisu
    "x": ("\u0445"              # х Cyrillic
          "\u00d7"              # × multiplication sign
          "\ua4eb"),            # ꓫ Lisu
    "y": ("\u0443\u04af"        # у ү Cyrillic
          "\u03b3"              # γ Greek
          "\u028f\u024f"        # ʏ ɏ Latin small capital, with stroke
          "\u13a9\ua4ec"),      # Ꭹ ꓬ Cherokee, Lisu
    "z": ("\u1d22\u01b6"        # ᴢ ƶ Latin small capital, with stroke
          "\u13c3\ua4dc"),      # Ꮓ ꓜ Cherokee, Lisu
}

_CASED_LOOKALIKES: dict[str, str] = {
    ":": "\ufe30",              # ︰ vertical two dot leader (folds to two full stops)
    "b": "\u0392",              # Β Greek (β reads nothing)
    "c": "\u03f2\u03f9",        # ϲ Ϲ Greek lunate sigmas (fold to σ)
    "d": "\u00d0",              # Ð Latin eth (ð reads nothing)
    "e": "\u0395",              # Ε Greek (ε reads nothing)
    "f": "\u03dc",              # Ϝ Greek digamma (ϝ reads nothing)
    "h": "\u0397",              # Η Greek (η reads n)
    "i": "\u04c0",              # Ӏ Cyrillic palochka (ӏ reads l)
    "l": "\u053c",              # Լ Armenian (լ reads nothing)
    "m": "\u039c",              # Μ Greek (μ reads nothing)
    "n": "\u039d",              # Ν Greek (ν reads v)
    "s": "\u054f",              # Տ Armenian (տ reads nothing)
    "x": "\u03a7",              # Χ Greek (χ reads nothing)
    "y": "\u03a5\u03d2",        # Υ ϒ Greek upsilon, upsilon with hook (υ reads u)
    "z": "\u0396",              # Ζ Greek (ζ reads nothing)
}


def _by_code_point(groups: dict[str, str]) -> dict[int, str]:
    """``{reading: characters}`` as a ``str.translate`` table."""
    return {ord(char): reading for reading, chars in groups.items() for char in chars}


def _with_mathematical_forms(table: dict[int, str]) -> dict[int, str]:
    """``table`` and the mathematical letters that decompose to one of its characters.

    Mathematical bold capital eta ``𝚮`` decomposes to ``Η``, which reads H, and folds to
    ``η`` like it, which reads n: it is read before folding as ``Η`` is. Found in the running
    Python's Unicode data (the Mathematical Alphanumeric Symbols block, 1,024 code points).
    """
    forms: dict[int, str] = {}
    for code in range(0x1D400, 0x1D800):
        base = unicodedata.normalize("NFKD", chr(code))
        if len(base) == 1 and ord(base) in table:
            forms[code] = table[ord(base)]
    return table | forms


_LATIN_OF = _by_code_point(_LOOKALIKES)
_LATIN_OF_CASED = _with_mathematical_forms(_by_code_point(_CASED_LOOKALIKES))
# str.translate raises and catches a KeyError for every character its table lacks, which costs
# more than a look-up: the table ``bare`` translates with also maps the characters look-alikes
# mostly come with (Latin, Greek, Cyrillic, general punctuation) to themselves.
_TRANSLATION = {code: chr(code) for start, end in ((0, 0x530), (0x2000, 0x2070))
                for code in range(start, end)} | _LATIN_OF
# What finds look-alikes in a text: the Basic Multilingual Plane's exactly; those of other
# planes (only the mathematical forms of ``_CASED_LOOKALIKES`` so far) are looked up one
# character at a time (``_bare_astral``, ``_cased``), the cased ones only in the span that
# holds them.
_BMP_LOOKALIKES = re.compile(_class_of(c for c in _LATIN_OF if c < 0x10000))
_BMP_CASED = re.compile(_class_of(c for c in _LATIN_OF_CASED if c < 0x10000))
_ASTRAL_CASED = re.compile(_class_of((c for c in _LATIN_OF_CASED if c >= 0x10000), 0x100))


def _bare_astral(match: re.Match[str]) -> str:
    char = match.group(0)
    return "" if unicodedata.category(char) in _MARKS else _LATIN_OF.get(ord(char), char)


def bare(folded: str) -> str:
    """A folded text as its shapes read: marks dropped, blanks as spaces, look-alikes as Latin.

    For judging where structure starts (a separator, a speaker): ``=`` with an acute accent
    on it still reads ``=``, a line opening with a Braille blank looks indented, and ``usеr``
    with a Cyrillic ``е`` or ``ᴜsᴇʀ`` in small capitals reads ``user`` (``_LOOKALIKES``). Not
    part of ``fold``, which keeps marks and letters so text keeps them (``é`` folds to ``e``
    and a mark). Lines are kept: no line break is a mark, a blank symbol or a look-alike.
    Folded text has lost the capitals whose small letters read otherwise (Greek ``Η`` folds
    to ``η``, which reads ``n``): ``shape`` reads those too.
    """
    if folded.isascii():
        return folded
    text = _BMP_MARKS.sub("", folded) if _BMP_MARKS.search(folded) else folded
    text = _BLANKS.sub(" ", text) if _BLANKS.search(text) else text
    text = text.translate(_TRANSLATION) if _BMP_LOOKALIKES.search(text) else text
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


def shape(text: str) -> str:
    """How ``text`` reads, for judging structure: ``bare(fold(text))``, capitals read first.

    ``SΥSTEM`` with a Greek capital upsilon reads ``system``, though the upsilon folds to a
    small ``υ``, which reads ``u`` (``_CASED_LOOKALIKES``). Plain ASCII stays on the fast path.
    Lines are kept, as by ``fold`` and ``bare``.
    """
    if reads_as_itself(text):
        return text.lower()
    return bare(fold(_read_cased(text)))


def _read_cased(text: str) -> str:
    """``text`` with the characters of ``_CASED_LOOKALIKES`` as the letters they read as."""
    text = _BMP_CASED.sub(_cased, text) if _BMP_CASED.search(text) else text
    if not _ASTRAL.search(text):  # a single range: the quicker test when there is none
        return text
    return _ASTRAL_CASED.sub(_cased, text) if _ASTRAL_CASED.search(text) else text


def _cased(match: re.Match[str]) -> str:
    char = match.group(0)
    return _LATIN_OF_CASED.get(ord(char), char)


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
