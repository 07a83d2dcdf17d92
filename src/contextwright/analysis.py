"""Text analysis shared by every lexical matcher: one CJK table, stop words, named tokenizers.

Recall, search, tool scoring and keyword cutting each turn text into terms, with rules tuned to
their use (recall stems, tools split identifiers, search keeps every word). They are named
configurations (``ANALYZERS``) of one implementation, ``Analyzer``: words (letters, marks and
digits, in any script) lower-cased, stop words out, CJK runs as overlapping character bigrams
(a lone character stays a unigram), so ``上海天气`` matches ``上海的天气`` on ``上海`` and
``天气``; runs of Thai and the other scripts written without spaces as bigrams too.

``CJK_RANGES`` is the one table of CJK code points; every regex that means "a CJK character"
is built from it (``cjk_class``). Imports nothing heavy: the core uses it. Pure, no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain, filterfalse
from typing import Final

from contextwright.core.caches import MemoDict, register_cache, text_bytes

CJK_RANGES: Final[dict[str, tuple[int, int]]] = {
    "kana": (0x3040, 0x30FF),
    "han_extension_a": (0x3400, 0x4DBF),
    "han": (0x4E00, 0x9FFF),
    "hangul": (0xAC00, 0xD7AF),
    "han_compatibility": (0xF900, 0xFAFF),
}
"""Hiragana and katakana, CJK ideographs (unified, extension A, compatibility), Hangul."""

HAN: Final = ("han",)
"""The unified ideographs: what "Chinese text" means to matchers tuned on Chinese."""
IDEOGRAPHS: Final = ("han_extension_a", "han", "han_compatibility")
"""Every ideograph block of the table."""
CJK: Final = tuple(CJK_RANGES)
"""The whole table: scripts written without spaces between words."""


KANA_LETTERS: Final = ("\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fd-\u30ff"
                       "\u31f0-\u31ff\uff66-\uff9d")
"""Regex class body of hiragana and katakana letters, full and half width: what makes text
Japanese. Not the katakana middle dot and long vowel mark, which Chinese text borrows now and
then (列夫・托尔斯泰)."""


def cjk_class(blocks: Iterable[str] = CJK) -> str:
    r"""The body of a regex character class for ``blocks`` of ``CJK_RANGES`` (``\u4e00-\u9fff``)."""
    return "".join(f"\\u{CJK_RANGES[block][0]:04x}-\\u{CJK_RANGES[block][1]:04x}"
                   for block in blocks)


def is_cjk_char(char: str, blocks: Iterable[str] = CJK) -> bool:
    """Whether ``char`` (one character) is in ``blocks`` of ``CJK_RANGES``."""
    point = ord(char)
    return any(CJK_RANGES[block][0] <= point <= CJK_RANGES[block][1] for block in blocks)


UNSPACED_RANGES: Final[dict[str, tuple[int, int]]] = {
    "thai": (0x0E00, 0x0E7F),
    "lao": (0x0E80, 0x0EFF),
    "myanmar": (0x1000, 0x109F),
    "khmer": (0x1780, 0x17FF),
    "new_tai_lue": (0x1980, 0x19DF),
    "khmer_symbols": (0x19E0, 0x19FF),
    "tai_tham": (0x1A20, 0x1AAF),
    "myanmar_extended_b": (0xA9E0, 0xA9FF),
    "myanmar_extended_a": (0xAA60, 0xAA7F),
    "tai_viet": (0xAA80, 0xAADF),
}
"""Southeast Asian scripts written without spaces between words (Thai, Lao, Khmer, Burmese and
their neighbours). Without a dictionary there is no telling where their words end, so a run of
them becomes overlapping bigrams of its letters, each with the vowel and tone marks on it
(``_cluster_bigrams``): ``มะม่วง`` gives ``มะ``, ``ะม่``, ``ม่ว``, ``วง``, and a question
shares them with the turn that answers it."""
UNSPACED: Final = tuple(UNSPACED_RANGES)


def _escaped(point: int) -> str:
    return f"\\u{point:04x}" if point < 0x10000 else f"\\U{point:08x}"


def _class_of(ranges: Iterable[tuple[int, int]]) -> str:
    r"""The body of a regex character class holding ``ranges`` (``\u0300-\u036f``)."""
    return "".join(_escaped(first) if first == last else f"{_escaped(first)}-{_escaped(last)}"
                   for first, last in ranges)


def _mark_ranges(first: int, last: int) -> list[tuple[int, int]]:
    """Runs of combining marks (Unicode category M) among the code points ``first``–``last``.

    Marks are printable and not alphanumeric, so those two C-level filters leave a tenth of
    the code points for ``unicodedata.category``.
    """
    ranges: list[tuple[int, int]] = []
    candidates = filterfalse(str.isalnum, filter(str.isprintable, map(chr, range(first, last))))
    for char in candidates:
        if unicodedata.category(char)[0] != "M":
            continue
        point = ord(char)
        if ranges and ranges[-1][1] == point - 1:
            ranges[-1] = (ranges[-1][0], point)
        else:
            ranges.append((point, point))
    return ranges


_BMP_MARKS: Final = _class_of(_mark_ranges(0x0300, 0x10000))  # none comes before U+0300


def _bmp_word_ranges() -> list[tuple[int, int]]:
    r"""Runs of the Basic Multilingual Plane's letters, digits, marks and ``_``.

    Python's ``\w`` leaves marks out (the vowel signs of ``किताब``, Thai tone marks, Arabic
    harakat, a decomposed ``é``), so they would end a word.
    """
    plane = "".join(map(chr, range(0x10000)))
    return [(found.start(), found.end() - 1)
            for found in re.finditer(f"[\\w{_BMP_MARKS}]+", plane)]


_BMP_WORD_RANGES: Final = _bmp_word_ranges()
_SUPPLEMENTARY_WORD_RANGES: Final = ((0x10000, 0x1EFFF), (0x20000, 0x3FFFF), (0xE0100, 0xE01EF))
"""Word characters beyond the BMP, as whole areas: the first plane up to its symbols and emoji
(U+1F000 on), the ideographs of planes 2 and 3 and the variation selectors. The first plane's
few symbols and signs (musical notation, historic scripts' punctuation) so count as letters:
listed apart, their hundreds of ranges would be tried on every space of every text."""


def _without(ranges: Iterable[tuple[int, int]],
             apart: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` with the code points of ``apart`` taken out."""
    kept = list(ranges)
    for low, high in apart:
        kept = [piece for first, last in kept for piece in (
            ((first, last),) if last < low or first > high else
            ((first, min(last, low - 1)), (max(first, high + 1), last))) if piece[0] <= piece[1]]
    return kept


def unicode_words(joiners: str = "", *, apart: Iterable[tuple[int, int]] = (),
                  shortest: int = 1) -> str:
    """Regex of one word in any script: letters, marks, digits, ``_`` and ``joiners``.

    ``apart``: code points that are no part of a word (the CJK and unspaced runs an analyzer
    matches on their own); ``shortest``: fewer characters are no word. One character class,
    most of it a table lookup: matching stays as fast as the ASCII-only words it replaces.
    """
    ranges = [*_without(_BMP_WORD_RANGES, apart), *_SUPPLEMENTARY_WORD_RANGES]
    return f"[{_class_of(ranges)}{re.escape(joiners)}]{{{shortest},}}"


_OPTIONAL_MARKS: Final = re.compile("[\\u0300\\u0301\\u0640" + _class_of(
    _mark_ranges(0x0590, 0x0700) + _mark_ranges(0x0750, 0x0780) + _mark_ranges(0x08A0, 0x0900))
    + "]")
"""Marks most text leaves out, so a word is matched without them: Hebrew vowel points and
cantillation, Arabic harakat and Quranic marks, the tatweel that stretches Arabic words, and
stress marks (``Па́вел``: an acute or grave still apart once the text is composed sits on a
letter that has none built in, Cyrillic above all)."""
_CLUSTER: Final = re.compile(f"(?s).[{_BMP_MARKS}]*")
"""A character and the marks on it: the unit ``_cluster_bigrams`` pairs."""


def _ranges_class(table: dict[str, tuple[int, int]], blocks: Iterable[str]) -> str:
    return _class_of(table[block] for block in blocks)


ENGLISH_STOPWORDS: Final = frozenset(
    "a about all an and any are as at be been but by can could did do does for from get he her "
    "his how i if in into is it its me my no not of ok on or our please set she should such "
    "than thank thanks that the their them then there these they this to was we were what "
    "when where which who whom why will with would yes you your".split()
)
"""Words too common to tell texts apart. One list for every matcher: what one of them drops
as noise (``get`` of tool names, ``thanks``) is noise to the others too."""

CHINESE_STOPWORDS: Final = frozenset(
    "的了吗呢吧啊是在和与及或我你他她它们这那怎么样什么哪谁请帮给把被有个也都就还要想能会可以")
"""Function characters that never make a Chinese term on their own. Chinese terms are bigrams,
so these split query entities (``retrieval.text.query_entities``) rather than drop terms."""


_VOWELS = frozenset("aeiou")


def _is_consonant(word: str, i: int) -> bool:
    """Porter's consonant: not a vowel, and ``y`` only after a vowel (or at the start)."""
    char = word[i]
    if char in _VOWELS:
        return False
    return char != "y" or i == 0 or not _is_consonant(word, i - 1)


def _measure(stem: str) -> int:
    """Porter's *m*: the vowel-consonant sequences in ``stem`` (``tree`` 0, ``trouble`` 1)."""
    pattern = "".join("c" if _is_consonant(stem, i) else "v" for i in range(len(stem)))
    return len(re.findall(r"v+c+", pattern))


def _has_vowel(stem: str) -> bool:
    return any(not _is_consonant(stem, i) for i in range(len(stem)))


def _ends_cvc(stem: str) -> bool:
    """Consonant-vowel-consonant at the end, the last not ``w``, ``x`` or ``y`` (``hop``)."""
    end = len(stem)
    return end >= 3 and _is_consonant(stem, end - 3) and not _is_consonant(stem, end - 2) and (
        _is_consonant(stem, end - 1) and stem[-1] not in "wxy")


def _strip_plural(word: str) -> str:
    """Porter step 1a: ``caresses`` → ``caress``, ``ponies`` → ``poni``, ``cats`` → ``cat``."""
    if word.endswith("sses") or word.endswith("ies"):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _strip_tense(word: str) -> str:
    """Porter step 1b: ``agreed`` → ``agree``, ``hopping`` → ``hop``, ``hoping`` → ``hope``."""
    if word.endswith("eed"):
        return word[:-1] if _measure(word[:-3]) > 0 else word
    for suffix in ("ed", "ing"):
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and _has_vowel(stem):
            return _restore_ending(stem)
    return word


def _restore_ending(stem: str) -> str:
    if stem.endswith(("at", "bl", "iz")):
        return stem + "e"
    if len(stem) >= 2 and stem[-1] == stem[-2] and _is_consonant(stem, len(stem) - 1) and (
            stem[-1] not in "lsz"):
        return stem[:-1]
    if _measure(stem) == 1 and _ends_cvc(stem):
        return stem + "e"
    return stem


def light_stem(word: str) -> str:
    """An inflectional English stem (Porter's step 1): plurals and tenses folded.

    ``paintings``, ``painted``, ``paints`` → ``paint``; ``games`` and ``game`` → ``game``;
    ``cities`` and ``city`` → ``citi``; ``shopping`` → ``shop``. Derivational suffixes stay
    (``painter``, ``quickly``): folding them conflates words (``never``, ``water``) more often
    than it matches a question to its answer. Words with digits are ids, and words of three
    letters or fewer are too short to carry a suffix: both stay whole.
    """
    if len(word) <= 3 or not word.isalpha() or not word.isascii():
        return word
    stem = _strip_tense(_strip_plural(word))
    if stem.endswith("y") and _has_vowel(stem[:-1]):
        stem = stem[:-1] + "i"
    return stem


def plural_stem(word: str) -> str:
    """A final ``s`` off words of more than three letters (``orders`` → ``order``)."""
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def _whole(word: str) -> str:
    return word


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def split_identifiers(text: str) -> str:
    """``get_weather`` and ``getWeather`` as ``get weather``: identifiers read as words."""
    return _CAMEL.sub(" ", text.replace("_", " "))


_FULL_WIDTH: Final = {point: point - 0xFEE0 for first, last in (
    (0xFF10, 0xFF19), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A)) for point in range(first, last + 1)}
"""Full-width digits and Latin letters (``ＲＴ２０２４``, as Chinese input methods type them) to
ASCII: ``ＲＴ２０２４`` and ``RT2024`` are one term. Full-width punctuation (，。：) is left:
it separates words either way, and it is in almost every Chinese text."""
_HAS_FULL_WIDTH: Final = re.compile("[\uff10-\uff19\uff21-\uff3a\uff41-\uff5a]")


def fold_width(text: str) -> str:
    """``text`` with full-width digits and letters folded to ASCII (others left as they are).

    Looked for first: ``translate`` maps character by character, most of the cost of
    analysing a Chinese text that holds none.
    """
    if text.isascii() or not _HAS_FULL_WIDTH.search(text):
        return text
    return text.translate(_FULL_WIDTH)


def composed(text: str) -> str:
    """``text`` in Unicode's composed form (NFC).

    ``é`` typed as ``e`` and a combining accent, as some keyboards do (Vietnamese ones above
    all), is then the one character ``é``, as most text writes it.
    """
    if text.isascii() or unicodedata.is_normalized("NFC", text):
        return text
    return unicodedata.normalize("NFC", text)


def _lower(text: str) -> str:
    return fold_width(composed(text)).lower()


def _split_lower(text: str) -> str:
    return split_identifiers(fold_width(composed(text))).lower()


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalyzerConfig:
    """How one matcher turns text into terms."""

    name: str
    words: str
    """Regex of one word (``unicode_words``, or a narrower one). CJK and unspaced runs are
    matched before it (``cjk``, ``unspaced``), so it must not match their characters."""
    cjk: tuple[str, ...] = HAN
    """Blocks of ``CJK_RANGES`` whose runs become bigrams."""
    unspaced: tuple[str, ...] = ()
    """Blocks of ``UNSPACED_RANGES`` whose runs become bigrams of letters with their marks."""
    stem: Callable[[str], str] = _whole
    """Applied to every word kept."""
    min_length: int = 1
    """Shorter words are dropped (after stop words, before stemming)."""
    identifiers: bool = False
    """Split ``snake_case`` and ``camelCase`` into words first (``split_identifiers``)."""
    digit_parts: bool = False
    """A word gluing letters to digits (``weather2``, ``oauth2``, ``s3upload``) also yields its
    letter and digit runs (``weather``), besides itself: a versioned tool name is found by its
    plain word, and still by its whole one."""
    dropped: frozenset[str] = frozenset({"_"})
    """Words dropped besides ``ENGLISH_STOPWORDS`` (a bare underscore is no word)."""
    kept: frozenset[str] = frozenset()
    """Words of ``ENGLISH_STOPWORDS`` this analyzer keeps (see ``SEARCH_KEEPS``)."""

    @property
    def stopwords(self) -> frozenset[str]:
        """The words this analyzer drops."""
        return (ENGLISH_STOPWORDS - self.kept) | self.dropped


_MEMO_LIMIT = 200_000
"""Distinct matches remembered per analyzer, at most (bytes are bounded too: ``MEMO_SHARES``)."""
_LONGEST_KEPT_RUN = 8
"""Longer CJK runs rarely repeat, so their bigrams are not remembered."""
MEMO_SHARES: Final[dict[str, float]] = {"recall": 0.03, "search": 0.005, "tools": 0.0025,
                                         "cutting": 0.0025}
"""Each named analyzer's memo's share of the caches' byte budget (``core.caches``); another
analyzer's gets ``_OTHER_SHARE``."""
_OTHER_SHARE = 0.0025
_TERM_BYTES = 58
"""What one remembered term costs besides its characters: its string object and tuple slot."""


def _match_bytes(match: str, terms: tuple[str, ...]) -> int:
    """Approximate bytes of one remembered match: its text and its terms' (``text_bytes``).

    A word kept as it is (not stemmed) is its own term: one string, counted once.
    """
    if len(terms) == 1:  # most words: worked out without a generator
        term = terms[0]
        return text_bytes(match) + _TERM_BYTES + (0 if term is match else text_bytes(term))
    return text_bytes(match) + sum(
        _TERM_BYTES + (0 if term is match else text_bytes(term)) for term in terms)


_LETTERS_OR_DIGITS: Final = re.compile(r"[^\W\d_]+|\d+")


def _bigrams(units: list[str] | str) -> tuple[str, ...]:
    """Overlapping pairs of ``units`` joined; a lone unit stays a unigram."""
    return tuple(units[i] + units[i + 1] if i + 1 < len(units) else units[i]
                 for i in range(max(len(units) - 1, 1)))


def _cluster_bigrams(run: str) -> tuple[str, ...]:
    """Bigrams of a run of an unspaced script, a letter and its marks counting as one unit.

    Pairs of code points would make ``ค`` + a vowel sign a term: too common to tell texts
    apart, which is what made single Thai consonants match any passage.
    """
    return _bigrams(_CLUSTER.findall(run))


class _MatchTerms(MemoDict[str, tuple[str, ...]]):
    """The terms of each distinct regex match (a word, a CJK or an unspaced run), worked out once.

    Analysing a long session meets the same words over and over; stemming each occurrence was
    most of the cost of indexing it. Lookups of known matches run in C (``map`` over
    ``__getitem__``); a new one lands in ``__missing__``. Bounded by entries and approximate
    bytes (a server meets ever new ids and numbers): see ``MemoDict``.
    """

    def __init__(self, config: AnalyzerConfig) -> None:
        super().__init__(f"analysis.{config.name}", max_entries=_MEMO_LIMIT,
                         share=MEMO_SHARES.get(config.name, _OTHER_SHARE), size=_match_bytes)
        self._config = config
        self._stop = config.stopwords
        self._cjk_start = re.compile(f"[{cjk_class(config.cjk)}]").match
        unspaced = _ranges_class(UNSPACED_RANGES, config.unspaced)
        self._unspaced_start = re.compile(f"[{unspaced}]").match if unspaced else None

    def __missing__(self, match: str) -> tuple[str, ...]:
        kept = self.revive(match)
        if kept is not None:
            return kept
        if match.isascii():  # no CJK or unspaced letter: a word (most new matches are ids)
            terms = self._word_terms(match)
            return self.remember(match, terms)
        if self._cjk_start(match):
            terms = _bigrams(match)
        elif self._unspaced_start is not None and self._unspaced_start(match):
            terms = _cluster_bigrams(match)
        else:
            return self.remember(match, self._word_terms(match))
        if len(match) > _LONGEST_KEPT_RUN:
            return terms
        return self.remember(match, terms)

    def _word_terms(self, word: str) -> tuple[str, ...]:
        if not word.isascii():
            word = _OPTIONAL_MARKS.sub("", word)
        if word in self._stop or len(word) < self._config.min_length:
            terms: tuple[str, ...] = ()
        else:
            terms = (self._config.stem(word),)
        if self._config.digit_parts and not word.isalpha() and not word.isdigit():
            terms = (*terms, *self._digit_parts(word, terms))
        return terms

    def _digit_parts(self, match: str, whole: tuple[str, ...]) -> tuple[str, ...]:
        """The letter and digit runs of ``match`` that make terms of their own (not ``whole``)."""
        parts = (self._config.stem(part) for part in _LETTERS_OR_DIGITS.findall(match)
                 if part not in self._stop and len(part) >= self._config.min_length)
        return tuple(dict.fromkeys(part for part in parts if part not in whole))


class Analyzer:
    """Terms of a text under one ``AnalyzerConfig``. Thread-safe (the memo is a pure function)."""

    def __init__(self, config: AnalyzerConfig) -> None:
        self.config = config
        runs = f"[{cjk_class(config.cjk)}]+"
        if config.unspaced:
            runs += f"|[{_ranges_class(UNSPACED_RANGES, config.unspaced)}]+"
        self._findall = re.compile(f"{runs}|{config.words}").findall
        self._memo = _MatchTerms(config)
        self._lookup = self._memo.__getitem__
        # Bound once: recall analyses every turn of a long session through these.
        self._normalise: Callable[[str], str] = (
            _split_lower if config.identifiers else _lower)

    def terms(self, text: str) -> list[str]:
        """The terms of ``text`` in order, repeats kept."""
        return list(chain.from_iterable(map(self._lookup, self._findall(self._normalise(text)))))

    def term_set(self, text: str) -> set[str]:
        """The distinct terms of ``text``."""
        return set(chain.from_iterable(map(self._lookup, self._findall(self._normalise(text)))))

    def term_counts(self, text: str) -> Counter[str]:
        """``Counter(terms(text))``, counted without building the list."""
        return Counter(chain.from_iterable(map(self._lookup,
                                               self._findall(self._normalise(text)))))

    def clear(self) -> None:
        """Forget the remembered matches."""
        self._memo.clear()


SEARCH_KEEPS: Final = frozenset(
    "about all any been can could did do does from get he her his how i its me my ok our please "
    "set she should than thank thanks them we were what when where which who whom why would yes "
    "you your".split()
)
"""Stop words the search analyzer keeps: it drops bm25s's English list only. Over documents,
question words and pronouns still tell passages apart; dropping them too cost HotpotQA
sentence recall with the hybrid retriever 0.856 / 0.994 → 0.852 / 0.988 (256 / 1,024 tokens),
its nDCG@10 0.962 → 0.959, and LoCoMo strict recall with the hybrid recaller 0.945 → 0.930 at
8,000 tokens."""


def _any_script(*, name: str, joiners: str = "", min_length: int = 1,
                stem: Callable[[str], str] = _whole,
                kept: frozenset[str] = frozenset()) -> AnalyzerConfig:
    """An analyzer of words in any script, every CJK block and the unspaced scripts."""
    apart = [*CJK_RANGES.values(), *UNSPACED_RANGES.values()]
    return AnalyzerConfig(name=name, words=unicode_words(joiners, apart=apart,
                                                         shortest=min_length),
                          cjk=CJK, unspaced=UNSPACED, min_length=min_length, stem=stem,
                          kept=kept)


ANALYZERS: Final[dict[str, Analyzer]] = {
    config.name: Analyzer(config) for config in (
        _any_script(name="recall", joiners="-", min_length=2, stem=light_stem),
        _any_script(name="cutting", joiners="-", min_length=2),
        AnalyzerConfig(name="tools", words=r"[a-z0-9]+", identifiers=True, min_length=2,
                       stem=plural_stem, digit_parts=True),
        _any_script(name="search", kept=SEARCH_KEEPS),
    )
}
"""The named analyzers: ``recall`` (history recall and document ranking: ids kept whole,
words stemmed), ``cutting`` (keywords a cut centres on), ``tools`` (tool names split into
words, letters apart from digits too, plurals folded), ``search`` (the retriever's BM25). All
but ``tools`` read words of any script (tool names are English identifiers), every CJK block
and the unspaced scripts. Segmenting text written without spaces, without a dictionary:

- Chinese and Japanese (Han and kana together: a Japanese sentence mixes them inside words,
  ``食べた``, ``東京タワー``) as character bigrams, as before for Chinese alone.
- Korean as bigrams too: its words are spaced, but particles and endings are written onto
  them (``서울의``, ``날씨는``), so the whole word of a turn rarely equals the question's
  (``서울``, ``날씨``); their syllable bigrams are shared. A one-syllable word stays whole.
- Thai, Lao, Khmer and Burmese (``UNSPACED_RANGES``) as bigrams of letters carrying their
  marks: a run between spaces is a phrase, and code-point pairs would be too common.

Latin, Cyrillic, Greek, Arabic, Hebrew, Indic and the other spaced scripts are words (their
marks kept inside them); the English stop list and stemmer touch English words only."""


def analyzer(name: str) -> Analyzer:
    """The named analyzer (``ANALYZERS``); a KeyError names the known ones."""
    try:
        return ANALYZERS[name]
    except KeyError:
        raise KeyError(f"no analyzer {name!r}; known: {sorted(ANALYZERS)}") from None


for _named in ANALYZERS.values():
    register_cache(f"analysis.{_named.config.name}", _named._memo)


ENGLISH_QUESTION_OPENERS: Final = frozenset(
    "what when where who whom whose why how which is are was were am do does did can could "
    "would will should shall may might have has had tell remind recall remember explain "
    "describe list show".split())
"""Words a clause that asks something opens with: question words and auxiliaries ("Did she
call?"), and the requests to tell or bring back something ("Tell me…", "Remind me…")."""
CHINESE_QUESTION_MARKS: Final = (
    "吗", "什么", "怎么", "怎样", "哪", "谁", "几", "多少", "为什么", "是否", "有没有", "是不是",
    "告诉我", "提醒我", "记得")
"""Question particles and words, and the requests to tell or recall something."""
_CLAUSES = re.compile(r"[.!。！;；\n]+")
_FIRST_WORD = re.compile(r"[a-z]+")


def asks(text: str) -> bool:
    """Whether ``text`` asks something.

    A question mark, a clause opening with a question word or a request to tell or recall
    (``ENGLISH_QUESTION_OPENERS``), or a Chinese question word or particle
    (``CHINESE_QUESTION_MARKS``).

    A statement ("That's great, I loved the trip!") asks nothing; "what did I say?",
    "Tell me the order number" and "订单到了吗" do.
    """
    if "?" in text or "？" in text:
        return True
    for clause in _CLAUSES.split(text.lower()):
        first = _FIRST_WORD.match(clause.lstrip(" \t\"'([-*"))
        if first is not None and first.group() in ENGLISH_QUESTION_OPENERS:
            return True
    return any(mark in text for mark in CHINESE_QUESTION_MARKS)
