"""Text analysis shared by every lexical matcher: one CJK table, stop words, named tokenizers.

Recall, search, tool scoring and keyword cutting each turn text into terms, with rules tuned to
their use (recall stems, tools split identifiers, search keeps unicode words whole). They are
named configurations (``ANALYZERS``) of one implementation, ``Analyzer``: latin-script words
lower-cased, stop words out, CJK runs as overlapping character bigrams (a lone character stays a
unigram), so ``上海天气`` matches ``上海的天气`` on ``上海`` and ``天气``.

``CJK_RANGES`` is the one table of CJK code points; every regex that means "a CJK character"
is built from it (``cjk_class``). Imports nothing heavy: the core uses it. Pure, no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain
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


def cjk_class(blocks: Iterable[str] = CJK) -> str:
    r"""The body of a regex character class for ``blocks`` of ``CJK_RANGES`` (``\u4e00-\u9fff``)."""
    return "".join(f"\\u{CJK_RANGES[block][0]:04x}-\\u{CJK_RANGES[block][1]:04x}"
                   for block in blocks)


def is_cjk_char(char: str, blocks: Iterable[str] = CJK) -> bool:
    """Whether ``char`` (one character) is in ``blocks`` of ``CJK_RANGES``."""
    point = ord(char)
    return any(CJK_RANGES[block][0] <= point <= CJK_RANGES[block][1] for block in blocks)


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


def _lower(text: str) -> str:
    return fold_width(text).lower()


def _split_lower(text: str) -> str:
    return split_identifiers(fold_width(text)).lower()


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalyzerConfig:
    """How one matcher turns text into terms."""

    name: str
    words: str
    """Regex of one latin-script word (CJK runs are matched apart, from ``cjk``)."""
    cjk: tuple[str, ...] = HAN
    """Blocks of ``CJK_RANGES`` whose runs become bigrams."""
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
    return text_bytes(match) + sum(
        _TERM_BYTES + (0 if term is match else text_bytes(term)) for term in terms)


_LETTERS_OR_DIGITS: Final = re.compile(r"[^\W\d_]+|\d+")


class _MatchTerms(MemoDict[str, tuple[str, ...]]):
    """The terms of each distinct regex match (a word or a CJK run), worked out once.

    Analysing a long session meets the same words over and over; stemming each occurrence was
    most of the cost of indexing it. Lookups of known matches run in C (``map`` over
    ``__getitem__``); a new one lands in ``__missing__``. Bounded by entries and approximate
    bytes (a server meets ever new ids and numbers): see ``MemoDict``.
    """

    def __init__(self, config: AnalyzerConfig) -> None:
        super().__init__(f"analysis.{config.name}", max_entries=_MEMO_LIMIT,
                         share=MEMO_SHARES.get(config.name, _OTHER_SHARE), size=_match_bytes)
        self._config = config
        self._cjk = frozenset(config.cjk)
        self._stop = config.stopwords

    def __missing__(self, match: str) -> tuple[str, ...]:
        kept = self.revive(match)
        if kept is not None:
            return kept
        if is_cjk_char(match[0], self._cjk):
            terms = tuple(match[i : i + 2] for i in range(max(len(match) - 1, 1)))
            if len(match) > _LONGEST_KEPT_RUN:
                return terms
        elif match in self._stop or len(match) < self._config.min_length:
            terms = ()
        else:
            terms = (self._config.stem(match),)
        if self._config.digit_parts and not match.isalpha() and not match.isdigit():
            terms = (*terms, *self._digit_parts(match, terms))
        return self.remember(match, terms)

    def _digit_parts(self, match: str, whole: tuple[str, ...]) -> tuple[str, ...]:
        """The letter and digit runs of ``match`` that make terms of their own (not ``whole``)."""
        parts = (self._config.stem(part) for part in _LETTERS_OR_DIGITS.findall(match)
                 if part not in self._stop and len(part) >= self._config.min_length)
        return tuple(dict.fromkeys(part for part in parts if part not in whole))


class Analyzer:
    """Terms of a text under one ``AnalyzerConfig``. Thread-safe (the memo is a pure function)."""

    def __init__(self, config: AnalyzerConfig) -> None:
        self.config = config
        cjk = cjk_class(config.cjk)
        self._findall = re.compile(rf"[{cjk}]+|{config.words}").findall
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

ANALYZERS: Final[dict[str, Analyzer]] = {
    config.name: Analyzer(config) for config in (
        AnalyzerConfig(name="recall", words=r"[a-z0-9_\-]{2,}", stem=light_stem),
        AnalyzerConfig(name="cutting", words=r"[a-z0-9_\-]{2,}"),
        AnalyzerConfig(name="tools", words=r"[a-z0-9]+", identifiers=True, min_length=2,
                       stem=plural_stem, digit_parts=True),
        AnalyzerConfig(name="search", words=rf"[^\W{cjk_class(CJK)}]+", cjk=CJK,
                       kept=SEARCH_KEEPS),
    )
}
"""The named analyzers: ``recall`` (history recall and document ranking: ids kept whole,
words stemmed), ``cutting`` (keywords a cut centres on), ``tools`` (tool names split into
words, letters apart from digits too, plurals folded), ``search`` (the retriever's BM25: any
script's words, every CJK block)."""


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
