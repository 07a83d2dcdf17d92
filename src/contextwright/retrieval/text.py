"""Text helpers of retrieval: the search tokenizer, query entities and content hashes.

The tokenizer is the ``search`` analyzer of ``contextwright.analysis``, what makes BM25 work for
Chinese: latin-script words are lower-cased runs of word characters (English stop words
removed), and every run of CJK ideographs, kana or Hangul becomes its overlapping character
bigrams (a lone character stays a unigram), so ``上海天气`` matches ``上海的天气`` on ``上海`` and
``天气``. Pure functions; nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import re

from contextwright.analysis import CHINESE_STOPWORDS, CJK, ENGLISH_STOPWORDS, analyzer, cjk_class

_CJK_CLASS = cjk_class(CJK)
_CJK_START = re.compile(rf"[{_CJK_CLASS}]")
_SEARCH = analyzer("search")
STOPWORDS = ENGLISH_STOPWORDS - _SEARCH.config.kept
"""What search drops: bm25s's English list (``analysis.SEARCH_KEEPS``)."""
# Chinese function words never make a term on their own; query entities are the CJK runs left
# between them.
_ZH_SPLIT = re.compile(f"[{''.join(sorted(CHINESE_STOPWORDS))}]+")
_NUMBER = re.compile(r"\d[\d.,:/\-]*\d|\d")
_ID_LIKE = re.compile(r"\b(?=[A-Za-z0-9_\-]*\d)(?=[A-Za-z0-9_\-]*[A-Za-z])[A-Za-z0-9_\-]{3,}\b")
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z0-9'\-]+(?:\s+[A-Z][A-Za-z0-9'\-]+)*")
# Single quotes count only outside words: the apostrophes of "What's Alice's" quote nothing.
_QUOTED = re.compile(r"[\"“「『]([^\"”」』]{2,60})[\"”」』]|(?<!\w)'([^']{2,60})'(?!\w)")
_CJK_RUN = re.compile(rf"[{_CJK_CLASS}]+")


def search_tokens(text: str) -> list[str]:
    """Lower-cased words without English stop words; CJK runs as overlapping bigrams."""
    return _SEARCH.terms(text)


def is_cjk(token: str) -> bool:
    """True for a token of CJK characters (a bigram or unigram of ``search_tokens``)."""
    return bool(_CJK_START.match(token))


def query_entities(query: str) -> frozenset[str]:
    """What the user named: numbers, ids, capitalised names, quoted strings and CJK terms.

    Returned lower-cased; a chunk "hits" an entity when its lower-cased text contains it. The
    first word of a sentence is capitalised for grammar, not as a name, so a lone capitalised
    word counts only if it is not a stop word or a question word.
    """
    found: set[str] = set(_NUMBER.findall(query)) | set(_ID_LIKE.findall(query))
    found.update((double or single).strip() for double, single in _QUOTED.findall(query))
    found.update(filter(None, map(_name, _CAPITALISED.findall(query))))
    for run in _CJK_RUN.findall(query):
        found.update(term for term in _ZH_SPLIT.split(run) if len(term) >= 2)
    return frozenset(entity.lower() for entity in found if entity.strip())


_QUESTION_WORDS = frozenset(
    "what which who whom whose how when where why do does did can could would should is are was "
    "were will please tell give show find list i we you my our".split()
)


def _name(run: str) -> str:
    """A capitalised run without leading question or function words, or a possessive.

    "What's Alice's" names Alice, "Is The Beatles'" The Beatles.
    """
    words = run.split()
    while words and _is_leading_word(words[0].lower()):
        words.pop(0)
    name = " ".join(words)
    if name.lower().endswith("'s"):
        return name[:-2]
    return name.rstrip("'")


def _is_leading_word(word: str) -> bool:
    # "The" stays: it belongs to names (The Who, The Times); a contraction of a function word
    # ("It's", "Don't", "Let's") does not.
    base, apostrophe, _ = word.partition("'")
    return base in _QUESTION_WORDS or (bool(apostrophe) and base in _CONTRACTED)


_CONTRACTED = STOPWORDS | frozenset(
    "don doesn didn isn aren wasn weren won can couldn shouldn wouldn let here that".split())


def content_hash(text: str) -> str:
    """sha256 of the UTF-8 text (surrogates passed through), as hex."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
