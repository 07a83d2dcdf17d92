"""Relevance-selected history (SPEC R-HIST-3): older turns worth recalling for the current input.

``HistorySource`` fills part of its budget (``recall_share``) with older turns a ``TurnRecaller``
ranks relevant to the input. This module holds the seam (``RecallTurn``, ``TurnRecaller``), a
dependency-free lexical recaller (BM25 over words and CJK bigrams), and the per-history turn index
that keeps recall cheap: a history's turns are split and their texts built once, then extended
as messages are appended, so a build pays for the new messages only.

The index assumes what agents do: history is append-only. A message *replaced* by a different
one is noticed (the turns are rebuilt); a message dict edited in place after it was indexed is not.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Protocol, TypeVar, runtime_checkable

from contextwright.compress.json_compact import compact_tool_result
from contextwright.core.caches import register_cache, register_clear
from contextwright.core.items import Message, parse_message
from contextwright.errors import InvalidInputError
from contextwright.sources.recall_bm25 import TurnPostings
from contextwright.tokens import estimate_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallTurn:
    """One complete older turn (a user message and everything up to the next one)."""

    index: int
    """Position of the turn's first message in ``request.history``."""
    text: str
    """The turn's text: user and assistant content, tool calls, tool results compacted."""
    key: str
    """Stable identity (message id if present, else content hash), for caches across builds."""


@runtime_checkable
class TurnRecaller(Protocol):
    """Ranks older turns by relevance to a query. Must be safe to call from many threads."""

    def rank(self, query: str, turns: Sequence[RecallTurn], *, limit: int
             ) -> list[tuple[int, float]]:
        """(position in ``turns``, score), best first, only turns above the relevance threshold."""
        ...


# --------------------------------------------------------------------------- turn index


@dataclass(slots=True)
class TurnIndex:
    """The complete turns of one history, built incrementally (see the module docstring)."""

    raws: list[object] = field(default_factory=list)
    """The message objects indexed so far (identity-checked on every use)."""
    turns: list[RecallTurn] = field(default_factory=list)
    """Complete turns, oldest first; a list that only grows while the history only grows."""
    ends: list[int] = field(default_factory=list)
    """One past the last message of each turn."""
    tokens: list[int] = field(default_factory=list)
    """Estimated tokens of each turn's text (for sharing the budget, not for counting it)."""
    calls_after: list[int] = field(default_factory=list)
    """Tool-call blocks before each turn's end (turned into "after" with ``calls``)."""
    calls: int = 0
    """Tool-call blocks in the indexed messages, the open turn's included."""
    open_start: int | None = None
    """Where the newest, still open turn begins (None before the first user message)."""
    open_calls: int = 0
    """Tool-call blocks in the open turn."""
    open_messages: list[Message] = field(default_factory=list)
    """The open turn's messages, parsed (each message is parsed once, when it is indexed)."""

    def calls_newer_than(self, position: int) -> int:
        """Tool-call blocks after the end of ``turns[position]``."""
        return self.calls - self.calls_after[position]


_Sized = TypeVar("_Sized")
_INDEXES: OrderedDict[int, TurnIndex] = OrderedDict()
_INDEX_LOCK = threading.Lock()
_INDEX_LIMIT = 1_000
"""At most this many histories are indexed at once (least recently used dropped first) ..."""
_INDEX_MESSAGES = 500_000
"""... and their messages together at most this many (an index holds its turns' text), so a
server seeing many long sessions keeps a bounded index, not one per session ever seen."""


def keep_bounded(cache: OrderedDict[int, _Sized], size: Callable[[_Sized], int]) -> None:
    """Drop the least recently used entries (the front) until ``cache`` is within the limits.

    The newest entry (the back) is always kept, however large.
    """
    total = sum(size(entry) for entry in cache.values())
    while len(cache) > 1 and (len(cache) > _INDEX_LIMIT or total > _INDEX_MESSAGES):
        _, dropped = cache.popitem(last=False)
        total -= size(dropped)


def turn_index(history: Sequence[Mapping[str, Any]]) -> TurnIndex:
    """The turn index of ``history``, extended by the messages appended since the last build.

    What is returned is a view for this build (see ``_view``): read it, do not extend it.

    Keyed by the history's first message object, so a session rebuilt into a new list each turn
    still hits. Every indexed message is checked before use: the index is kept only if the
    messages it was built from equal the history's first ones. That is one list comparison, which
    settles each message by identity in C and compares contents only where a message was
    replaced by another object (equal contents make the same turns).
    """
    if not history:
        return TurnIndex()
    key = id(history[0])
    with _INDEX_LOCK:
        index = _INDEXES.pop(key, None)  # put back last: the most recently used
        known = len(index.raws) if index is not None else 0
        prefix = history[:known]
        if index is None or known > len(history) or index.raws != (
                prefix if isinstance(prefix, list) else list(prefix)):
            index = TurnIndex()
        _INDEXES[key] = index
        _extend(index, history)
        keep_bounded(_INDEXES, lambda entry: len(entry.raws))
        return _view(index)


def _view(index: TurnIndex) -> TurnIndex:
    """The index as of now, for one build: shared lists, its own call count.

    The lists only grow and positions already there never change, so they are shared. A
    concurrent build of a longer history with the same first message extends the shared index;
    this build must not count its calls.
    """
    return TurnIndex(raws=index.raws, turns=index.turns, ends=index.ends, tokens=index.tokens,
                     calls_after=index.calls_after, calls=index.calls)


def _extend(index: TurnIndex, history: Sequence[Mapping[str, Any]]) -> None:
    # Parsed through the shared parse cache on purpose: its deep copies cost a cold index about
    # a third more, but a turn recalled later is then rendered from the remembered parse (the
    # history source checks recalled units by parse identity) instead of being parsed on the
    # request path of a steady build.
    for position in range(len(index.raws), len(history)):
        raw = history[position]
        message = parse_message(raw, f"history[{position}]")
        if message.role == "user":
            if index.open_start is not None:
                _close_turn(index, position)
            index.open_start, index.open_calls, index.open_messages = position, 0, []
        if message.tool_calls:
            index.calls += 1
            index.open_calls += 1
        if index.open_start is not None:
            index.open_messages.append(message)
        index.raws.append(raw)


def _close_turn(index: TurnIndex, end: int) -> None:
    start, messages = index.open_start, index.open_messages
    assert start is not None  # only called with an open turn
    text = turn_text(messages)
    first_id = messages[0].id
    key = first_id if first_id is not None else hashlib.blake2b(
        text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    index.turns.append(RecallTurn(index=start, text=text, key=key))
    index.ends.append(end)
    index.tokens.append(estimate_tokens(text))
    index.calls_after.append(index.calls)


def turn_text(messages: Sequence[Message]) -> str:
    """What a recaller reads of a turn: contents, calls with arguments, compacted results."""
    parts = []
    for message in messages:
        if message.role == "tool":
            parts.append(compact_tool_result(message.name, message.content) or message.content)
            continue
        if message.content:
            parts.append(message.content)
        parts.extend(f"{call.name} {call.arguments}" for call in message.tool_calls)
    return "\n".join(parts)


RECALLED_UNITS: dict[tuple[object, ...], tuple[tuple[Message, ...], list[Any]]] = {}
"""Recalled turns as the history source rendered them into items, per turn and options (kept
here so ``clear_recall_caches`` forgets them with the indexes)."""


def clear_recall_caches() -> None:
    """Forget every turn index and recalled unit (tests, memory pressure)."""
    with _INDEX_LOCK:
        _INDEXES.clear()
    RECALLED_UNITS.clear()
    _MATCH_TERMS.clear()


# --------------------------------------------------------------------------- lexical recaller


@dataclass(slots=True)
class _Postings:
    """The inverted index of one turn list, and the keys it was built from."""

    turns: Sequence[RecallTurn]
    keys: list[str] = field(default_factory=list)
    """Key of every indexed turn (the last one is checked before the index is reused)."""
    index: TurnPostings = field(default_factory=TurnPostings)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallExpansion:
    """What a ranking adds to the turns that share words with the input.

    Conversations run in threads: the answer to "when did Caroline go to the support group?"
    is often the reply after the turn that names the group, in words the question does not use.
    Two standard steps reach such turns. Pseudo-relevance feedback: the rarest words of the
    best hits (in at most ``feedback_max_share`` of the turns, so no name or filler word) are
    searched for too, their scores weighted by ``feedback_weight``. Neighbours: the turns up to
    ``neighbours`` positions from a hit score ``neighbour_weight`` × its score ÷ distance, so a
    thread comes back around its best match. Both may bring in turns below ``min_score``.
    """

    neighbours: int = 2
    """How far from a hit its neighbours are brought in (0: none)."""
    neighbour_weight: float = 0.7
    """A neighbour's score as a share of its hit's (at distance 1)."""
    neighbour_hits: int = 64
    """Only the best this many hits bring in neighbours (a neighbour of a weaker hit would
    rank below what any budget shows)."""
    feedback_turns: int = 5
    """Best hits whose words are searched for (0: no feedback)."""
    feedback_terms: int = 8
    """Words taken from them, the rarest and best-placed first."""
    feedback_weight: float = 0.5
    """Their search's scores, scaled to the first search's best, times this."""
    feedback_max_share: float = 0.05
    """A word in more than this share of the turns is not taken."""

    def __post_init__(self) -> None:
        counts = (self.neighbours, self.neighbour_hits, self.feedback_turns, self.feedback_terms)
        shares = (self.neighbour_weight, self.feedback_weight, self.feedback_max_share)
        if any(n < 0 for n in counts) or not all(math.isfinite(w) and 0 <= w <= 1
                                                 for w in shares):
            raise InvalidInputError("recall expansion: counts must be >= 0 and weights and "
                                    "shares between 0 and 1")


class LexicalTurnRecaller:
    """BM25 over the turns' words and CJK character bigrams; no dependencies.

    Words are lower-cased, stop words out, ids kept whole (``nora_vance_5172``), so a
    turn that names the order id or the city the user asks about ranks first. A turn is returned
    only if its score reaches ``min_score`` (BM25 units: about one rare shared word). Ranking
    reads few postings however long the session is (see ``recall_bm25``) and returns what
    scoring every turn would. With an ``expansion`` (``HistorySource``'s and
    ``ContextManager``'s default recaller has ``RecallExpansion()``), feedback words and the
    neighbours of hits are added (see ``RecallExpansion``).
    """

    def __init__(self, *, min_score: float = 1.0, k1: float = 1.2, b: float = 0.75,
                 expansion: RecallExpansion | None = None) -> None:
        """``min_score``: relevance threshold; ``k1`` ≥ 0, 0 ≤ ``b`` ≤ 1: the BM25 constants."""
        if not math.isfinite(min_score):
            raise InvalidInputError("min_score must be a finite number")
        if not (math.isfinite(k1) and k1 >= 0 and 0 <= b <= 1):
            raise InvalidInputError("BM25 needs k1 >= 0 and 0 <= b <= 1")
        self.min_score = min_score
        self.k1 = k1
        self.b = b
        self.expansion = expansion
        self._indexes: OrderedDict[int, _Postings] = OrderedDict()
        self._lock = threading.Lock()

    def rank(self, query: str, turns: Sequence[RecallTurn], *, limit: int
             ) -> list[tuple[int, float]]:
        """(position in ``turns``, score), best first, at most ``limit``, above ``min_score``."""
        terms = sorted(set(_terms(query)))  # sorted: scores add up in the same order every run
        if not terms or not turns or limit <= 0:
            return []
        with self._lock:
            index = self._postings(turns).index
            hits = self._top(index, terms, limit)
            if self.expansion is None or not hits:
                return hits
            return _expanded(hits, self._feedback(index, turns, hits, set(terms), limit),
                             self.expansion, len(turns), limit)

    def _top(self, index: TurnPostings, terms: Sequence[str], limit: int
             ) -> list[tuple[int, float]]:
        return index.top(terms, limit=limit, min_score=self.min_score, k1=self.k1, b=self.b)

    def _feedback(self, index: TurnPostings, turns: Sequence[RecallTurn],
                  hits: list[tuple[int, float]], query: set[str], limit: int
                  ) -> list[tuple[int, float]]:
        """The ranking for the rarest words of the best hits (empty without feedback)."""
        expansion = self.expansion
        assert expansion is not None
        if not (expansion.feedback_turns and expansion.feedback_terms):
            return []
        size, best = len(turns), hits[0][1]
        most = expansion.feedback_max_share * size
        weights: dict[str, float] = {}
        for position, score in hits[:expansion.feedback_turns]:
            for term in _term_counts(turns[position].text):
                df = len(index.postings.get(term, ()))
                if term in query or not 0 < df <= most:
                    continue
                weights[term] = weights.get(term, 0.0) + score / best * math.log(size / df)
        chosen = sorted(weights, key=lambda term: (-weights[term], term))
        words = sorted(chosen[:expansion.feedback_terms])
        return self._top(index, words, limit) if words else []

    def _postings(self, turns: Sequence[RecallTurn]) -> _Postings:
        """The index of ``turns``, extended to its new turns (rebuilt if it changed)."""
        index = self._indexes.pop(id(turns), None)  # put back last: the most recently used
        if index is None or index.turns is not turns or len(index.keys) > len(turns) or (
                index.keys and turns[len(index.keys) - 1].key != index.keys[-1]):
            index = _Postings(turns=turns)
        self._indexes[id(turns)] = index
        for position in range(len(index.keys), len(turns)):
            index.index.add(_term_counts(turns[position].text))
            index.keys.append(turns[position].key)
        keep_bounded(self._indexes, lambda entry: len(entry.keys))
        return index


def _expanded(hits: list[tuple[int, float]], feedback: list[tuple[int, float]],
              expansion: RecallExpansion, size: int, limit: int) -> list[tuple[int, float]]:
    """Hits, feedback hits and neighbours merged: best first, ties by position."""
    scores = dict(hits)
    if feedback:
        scale = expansion.feedback_weight * hits[0][1] / feedback[0][1]
        for position, score in feedback:
            scores[position] = scores.get(position, 0.0) + score * scale
    return with_neighbours(sorted(scores.items(), key=lambda entry: (-entry[1], entry[0])),
                           expansion, size, limit)


def with_neighbours(ranked: list[tuple[int, float]], expansion: RecallExpansion, size: int,
                    limit: int) -> list[tuple[int, float]]:
    """``ranked`` (best first) with the neighbours of its best hits added: best first."""
    scores = dict(ranked)
    if expansion.neighbours and expansion.neighbour_weight:
        best = min(limit, expansion.neighbour_hits)
        for position, score in ranked[:best]:
            for distance in range(1, expansion.neighbours + 1):
                lifted = expansion.neighbour_weight * score / distance
                for near in (position - distance, position + distance):
                    if 0 <= near < size and scores.get(near, 0.0) < lifted:
                        scores[near] = lifted
    return sorted(scores.items(), key=lambda entry: (-entry[1], entry[0]))[:limit]


_WORD = re.compile(r"[A-Za-z0-9_\-]{2,}|[\u4e00-\u9fff]+")
_STOPWORDS = frozenset(
    "the a an and or of to in on for is are was were be been it this that with as at by from "
    "what which who whom how when where why do does did can could would should my your our "
    "me you i we they he she them his her its please about into than then there yes no ok "
    "thanks thank".split()
)


def _terms(text: str) -> list[str]:
    """Lower-cased stemmed words (ids whole) without stop words; CJK runs as bigrams."""
    return list(chain.from_iterable(map(_MATCH_TERMS.__getitem__, _WORD.findall(text.lower()))))


def _term_counts(text: str) -> Counter[str]:
    """``Counter(_terms(text))``, counted without building the list."""
    return Counter(chain.from_iterable(map(_MATCH_TERMS.__getitem__,
                                           _WORD.findall(text.lower()))))


class _MatchTerms(dict[str, tuple[str, ...]]):
    """The terms of each distinct regex match (a word or a CJK run), worked out once.

    Indexing a long session meets the same words over and over; stemming each occurrence was
    most of the cost of indexing it. Lookups of known matches run in C (``map`` over
    ``__getitem__``); a new one lands in ``__missing__``. Long CJK runs rarely repeat, so they
    are not kept; the table is emptied when full.
    """

    def __missing__(self, match: str) -> tuple[str, ...]:
        if "\u4e00" <= match[0] <= "\u9fff":
            terms = tuple(match[i : i + 2] for i in range(max(len(match) - 1, 1)))
            if len(match) > _LONGEST_KEPT_RUN:
                return terms
        else:
            terms = () if match in _STOPWORDS else (stem(match),)
        if len(self) >= _MATCH_TERMS_LIMIT:
            self.clear()
        self[match] = terms
        return terms


_LONGEST_KEPT_RUN = 8
_MATCH_TERMS_LIMIT = 200_000
_MATCH_TERMS = _MatchTerms()


_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "ers", "er", "ed", "es", "ly", "s")


def stem(word: str) -> str:
    """A light English stem: ``painting``, ``painted``, ``paints`` → ``paint``.

    Strips one common suffix when at least three letters remain, and a doubled final consonant
    left by it (``shopping`` → ``shop``). Words with digits are ids and stay whole.
    """
    if len(word) < 5 or not word.isalpha() or not word.isascii():
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
                word = word[:-1]
            return word
    return word


register_cache("sources.recall.recalled_units", RECALLED_UNITS)
register_cache("sources.recall.match_terms", _MATCH_TERMS)


register_clear("sources.recall.indexes", _INDEXES, clear_recall_caches)
