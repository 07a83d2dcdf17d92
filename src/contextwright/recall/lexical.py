"""The dependency-free recaller: BM25 (``recall.bm25``) over the turns' terms, with expansion.

Terms come from the ``recall`` analyzer (``contextwright.analysis``): words lower-cased and
lightly stemmed, stop words out, ids kept whole, CJK runs as character bigrams; and, unless a
recaller is made with ``dates=False``, the date terms of ``recall.dates`` (a turn's date and the
dates it speaks of; the dates a query names, and whether it asks "when").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from typing import Any, Final

from contextwright.analysis import analyzer
from contextwright.core.caches import GrowingCache
from contextwright.errors import InvalidInputError
from contextwright.recall.bm25 import (
    POSTINGS,
    IndexedTurns,
    TurnPostings,
    _numpy,
    postings_entry,
    postings_used,
)
from contextwright.recall.dates import query_date_terms, turn_date_terms
from contextwright.recall.turns import RecallTurn

_ANALYZER = analyzer("recall")
_terms = _ANALYZER.terms
_term_counts = _ANALYZER.term_counts

DATED_TERMS: Final = "recall+dates"
"""How ``dated_term_counts`` makes a turn's terms (postings made so carry this name)."""
WORD_TERMS: Final = "recall"
"""How ``word_term_counts`` makes them."""

QUESTION_STOPWORDS: Final = frozenset(
    term for word in ("am", "being", "doing", "has", "have", "had", "having")
    for term in _terms(word))
"""Forms of the auxiliary verbs that the shared stop list keeps, as the analyzer makes them.

A question is built on them ("What has John done?") but they name no topic: as query terms
they rank every turn that says "has" above the replies that hold the answer. LoCoMo strict
recall with the ``chat`` plan, 2k / 4k / 8k: 0.796 / 0.846 / 0.903 → 0.807 / 0.859 / 0.914;
cross-validated (``bench/recall_cv.py``) 0.786 / 0.849 / 0.903 → 0.802 / 0.851 / 0.906. They
are left out of the query only: turns keep their terms, so stored postings stay valid. The set
is the auxiliaries of the usual English stop lists (NLTK's) missing from ``ENGLISH_STOPWORDS``,
not words picked by a benchmark.
"""


def dated_term_counts(turn: RecallTurn) -> Counter[str]:
    """A turn's words (the ``recall`` analyzer) and its date terms (``recall.dates``)."""
    counts = _term_counts(turn.text)
    dated = turn_date_terms(turn.text, turn.timestamp)
    if dated:
        counts.update(dated)
    return counts


def word_term_counts(turn: RecallTurn) -> Counter[str]:
    """A turn's words only."""
    return _term_counts(turn.text)


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
    reads few postings however long the session is (see ``recall.bm25``) and returns what
    scoring every turn would. With an ``expansion`` (``HistorySource``'s and
    ``ContextManager``'s default recaller has ``RecallExpansion()``), feedback words and the
    neighbours of hits are added (see ``RecallExpansion``).
    """

    def __init__(self, *, min_score: float = 1.0, k1: float = 1.2, b: float = 0.75,
                 expansion: RecallExpansion | None = None, dates: bool = True) -> None:
        """A recaller; see the class for what it matches.

        ``min_score``: relevance threshold; ``k1`` ≥ 0, 0 ≤ ``b`` ≤ 1: the BM25 constants;
        ``dates``: match turns by date too (``recall.dates``).
        """
        if not math.isfinite(min_score):
            raise InvalidInputError("min_score must be a finite number")
        if not (math.isfinite(k1) and k1 >= 0 and 0 <= b <= 1):
            raise InvalidInputError("BM25 needs k1 >= 0 and 0 <= b <= 1")
        self.min_score = min_score
        self.k1 = k1
        self.b = b
        self.expansion = expansion
        self.dates = dates

    @property
    def _indexes(self) -> GrowingCache[tuple[int, str], IndexedTurns]:
        """The postings this recaller ranks from: every recaller's (``recall.bm25.POSTINGS``)."""
        return POSTINGS

    def rank(self, query: str, turns: Sequence[RecallTurn], *, limit: int,
             now: str | None = None) -> list[tuple[int, float]]:
        """(position in ``turns``, score), best first, at most ``limit``, above ``min_score``.

        ``now``: when the query is asked (ISO 8601), to date its time words ("yesterday").
        """
        return self._ranking(query, turns, limit, now)[0]

    def focus(self, query: str, turns: Sequence[RecallTurn], *, limit: int,
              now: str | None = None) -> float | None:
        """How much of ``query`` its best matching turn matches, from 0 to 1 (None: no terms).

        The best turn's BM25 score (before expansion) over the best a turn could score for
        the query's terms (``TurnPostings.best_possible``). High for a question about
        something said before ("When did Mel adopt the puppy?": one turn holds most of it);
        low for a long, chatty input whose words are spread over many turns, where what is
        recalled is a weak signal. A stable-prefix build cuts its kept run for the recall of a
        focused input only (``CachePolicy.min_recall_focus``).
        """
        return self._ranking(query, turns, limit, now)[1]

    def _ranking(self, query: str, turns: Sequence[RecallTurn], limit: int,
                 now: str | None) -> tuple[list[tuple[int, float]], float | None]:
        wanted = set(_terms(query)) - QUESTION_STOPWORDS
        if self.dates:
            wanted.update(query_date_terms(query, now))
        terms = sorted(wanted)  # sorted: scores add up in the same order every run
        if not terms or not turns or limit <= 0:
            return [], None
        entry = postings_entry(turns, self._made[1])
        try:
            with entry.lock:
                size = entry.extend(turns, *self._made)
                # The postings are every recaller's: what was asked includes how this one ranks.
                asked = (terms, limit, type(self), self.min_score, self.k1, self.b,
                         self.expansion)
                known = entry.last_ranking
                if known is not None and known[0] == asked and known[1] == size:
                    return list(known[2]), known[3]
                ranked, focus = self._ranked(entry.index, turns, terms, limit)
                entry.last_ranking = (asked, size, ranked, focus)
                return list(ranked), focus
        finally:
            postings_used(entry)

    def _ranked(self, index: TurnPostings, turns: Sequence[RecallTurn], terms: list[str],
                limit: int) -> tuple[list[tuple[int, float]], float]:
        """The ranking of ``turns`` (the first ``len(turns)`` of ``index``), and its focus.

        ``index`` may have indexed more turns than ``turns`` holds (a longer list of the same
        lineage, indexed by another build): only the first ``len(turns)`` are ranked, with
        their own statistics.
        """
        size = len(turns)
        hits = self._top(index, terms, limit, size)
        possible = index.best_possible(terms, k1=self.k1, size=size)
        focus = min(hits[0][1] / possible, 1.0) if hits and possible > 0 else 0.0
        if self.expansion is None or not hits:
            return hits, focus
        return _expanded(hits, self._feedback(index, turns, hits, set(terms), limit),
                         self.expansion, size, limit), focus

    def _top(self, index: TurnPostings, terms: Sequence[str], limit: int, size: int
             ) -> list[tuple[int, float]]:
        return index.top(terms, limit=limit, min_score=self.min_score, k1=self.k1, b=self.b,
                         size=size)

    def _feedback(self, index: TurnPostings, turns: Sequence[RecallTurn],
                  hits: list[tuple[int, float]], query: set[str], limit: int
                  ) -> list[tuple[int, float]]:
        """The ranking for the rarest words of the best hits (empty without feedback)."""
        expansion = self.expansion
        assert expansion is not None
        if not (expansion.feedback_turns and expansion.feedback_terms):
            return []
        size, best = len(turns), hits[0][1]
        if best <= 0:  # a min_score of 0 or below lets zero-score turns in: nothing to weigh by
            return []
        most = expansion.feedback_max_share * size
        weights: dict[str, float] = {}
        # every turn indexed is ranked (a shorter list of the lineage is the rare case)
        postings = index.postings.get if size >= len(index) else partial(
            index.postings_of, size=size)
        for position, score in hits[:expansion.feedback_turns]:
            for term in _term_counts(turns[position].text):
                df = len(postings(term) or ())
                if term in query or not 0 < df <= most:
                    continue
                weights[term] = weights.get(term, 0.0) + score / best * math.log(size / df)
        chosen = sorted(weights, key=lambda term: (-weights[term], term))
        words = sorted(chosen[:expansion.feedback_terms])
        return self._top(index, words, limit, size) if words else []

    @property
    def _made(self) -> tuple[Callable[[RecallTurn], Mapping[str, int]], str]:
        """How a turn's terms are made, and its name (for ``IndexedTurns.extend``)."""
        if self.dates:
            return dated_term_counts, DATED_TERMS
        return word_term_counts, WORD_TERMS

    def _postings(self, turns: Sequence[RecallTurn]) -> IndexedTurns:
        """The index of ``turns``, extended to its new turns (rebuilt if it changed)."""
        entry = postings_entry(turns, self._made[1])
        try:
            with entry.lock:
                entry.extend(turns, *self._made)
            return entry
        finally:
            postings_used(entry)


def _expanded(hits: list[tuple[int, float]], feedback: list[tuple[int, float]],
              expansion: RecallExpansion, size: int, limit: int) -> list[tuple[int, float]]:
    """Hits, feedback hits and neighbours merged: best first, ties by position.

    ``with_neighbours(best_first(merged), ...)``, in array passes over the turns: a question
    that ranks thousands of turns on every call of a chat merges them in C, not a dict step per
    hit. The same float operations in the same order, so the same scores.
    """
    np = _numpy()
    scores, present = np.zeros(size), np.zeros(size, dtype=bool)
    _scatter(scores, present, hits, 1.0)
    if feedback and feedback[0][1] > 0:
        _scatter(scores, present, feedback,
                 expansion.feedback_weight * hits[0][1] / feedback[0][1])
    if expansion.neighbours and expansion.neighbour_weight:
        _lift_neighbours(scores, present, expansion, min(limit, expansion.neighbour_hits))
    return _ranked_present(scores, present, limit)


def _scatter(scores: Any, present: Any, ranking: list[tuple[int, float]], scale: float) -> None:
    """Add ``ranking``'s scores × ``scale`` into ``scores`` (positions in a ranking are unique).

    Without a scale (1.0) a score is set, not multiplied, as adding it to a dict would.
    """
    np = _numpy()
    positions = np.fromiter((p for p, _ in ranking), dtype=np.intp, count=len(ranking))
    values = np.fromiter((v for _, v in ranking), dtype=np.float64, count=len(ranking))
    scores[positions] += values if scale == 1.0 else values * scale
    present[positions] = True


def _lift_neighbours(scores: Any, present: Any, expansion: RecallExpansion, best: int) -> None:
    """Raise the neighbours of the ``best`` top turns to ``weight × score ÷ distance``.

    A turn takes the highest lift any hit gives it, if that beats its own score (or it had
    none): ``with_neighbours``'s rule, whatever order the hits are visited in.
    """
    np = _numpy()
    top = _ranked_order(scores, present)[:best]
    top_scores = scores[top]
    size = len(scores)
    lifts = np.zeros(size)
    for distance in range(1, expansion.neighbours + 1):
        lifted = expansion.neighbour_weight * top_scores / distance
        for near in (top - distance, top + distance):
            inside = (near >= 0) & (near < size)
            np.maximum.at(lifts, near[inside], lifted[inside])
    raised = lifts > scores
    scores[raised] = lifts[raised]
    present |= raised


def _ranked_order(scores: Any, present: Any) -> Any:
    """Positions of the present turns, best first, ties by position."""
    np = _numpy()
    positions = np.flatnonzero(present)
    return positions[np.lexsort((positions, -scores[positions]))]


def _ranked_present(scores: Any, present: Any, limit: int) -> list[tuple[int, float]]:
    order = _ranked_order(scores, present)[:limit]
    return list(zip(order.tolist(), scores[order].tolist(), strict=True))


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
    return best_first(scores)[:limit]


def best_first(scores: dict[int, float]) -> list[tuple[int, float]]:
    """``scores`` as (position, score), best first, ties by position.

    Sorted by position, then (stably) by score descending: the order a key of (-score,
    position) gives, with both passes comparing in C rather than through a Python key
    function that builds a tuple per entry.
    """
    ranked = sorted(scores.items())
    ranked.sort(key=itemgetter(1), reverse=True)
    return ranked
