"""The dense recallers: earlier turns ranked by lexical and dense similarity together.

``FusedTurnRecaller`` fuses the lexical recaller's ranking with e5's by rank (the recommended
dense path); ``HybridTurnRecaller`` fuses BM25 and cosine scores by weight.

``HybridTurnRecaller`` keeps one incremental index per session across calls. Turns are
identified by key *and* text (and timestamp: its BM25 part matches dates, ``recall.dates``): ids
such as ``D1:1`` repeat across histories, and one history must never be scored with another's
text. An index is reused only for a history that starts with
every turn it has indexed, in order, so its BM25 statistics are always those of the history
being ranked: two histories that merely open alike get an index each. A history that grows by
one turn per call indexes (and embeds) only that turn, and ``rank`` costs a prefix check plus
numpy scoring over the turns. Scores use the retriever's fusion (``fusion``): turns are ranked
by the weighted min–max fusion of BM25 and cosine, and kept only when their calibrated
similarity reaches the threshold. Needs numpy (the ``retrieval`` extra): import it from here
or ``contextwright.retrieval``, not through ``contextwright.recall``'s eager names.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from contextwright.analysis import analyzer
from contextwright.errors import InvalidInputError
from contextwright.recall.dates import query_date_terms, turn_date_terms
from contextwright.recall.lexical import (
    LexicalTurnRecaller,
    RecallExpansion,
    best_first,
    with_neighbours,
)
from contextwright.recall.turns import RecallTurn, TurnRecaller, rank_turns, turn_focus
from contextwright.retrieval._numpy import np
from contextwright.retrieval.dense import Embedder, VectorMatrix
from contextwright.retrieval.fusion import (
    E5_CALIBRATION,
    Calibration,
    minmax,
    weighted_fusion,
)
from contextwright.retrieval.lexical import Bm25Index
from contextwright.retrieval.retriever import _cached

_terms = analyzer("recall").terms
"""The lexical recaller's terms: stemmed words count as one. Measured on LoCoMo dev (strict
recall at 2k / 4k / 8k), against the retriever's unstemmed ``search`` terms: 0.809 / 0.859 /
0.945 → 0.833 / 0.885 / 0.945."""

_Identity = tuple[str, str, str | None]
"""A turn's (key, text, timestamp): a key alone is only unique within one history."""


@dataclass(slots=True, eq=False)
class _SessionIndex:
    """The index of one history: a row per distinct turn of ``identities``, and no other."""

    lexical: Bm25Index
    vectors: VectorMatrix | None
    rows: dict[_Identity, int] = field(default_factory=dict)
    """Row of each distinct turn."""
    identities: list[_Identity] = field(default_factory=list)
    """The turns of the last call that used this index, in order."""
    turns: list[Any] = field(default_factory=list)
    """Those turns' objects: the same objects again are the same turns (they are immutable,
    ``RecallTurn`` is frozen), a check made in C."""
    positions: Any = None
    """Rows of those turns, as an array."""

    def is_prefix_of(self, turns: Sequence[RecallTurn]) -> bool:
        """Whether ``turns`` start with every turn this index holds, in the same order."""
        seen = len(self.identities)
        if not seen or seen > len(turns):
            return False
        last = turns[seen - 1]
        if _identity(last) != self.identities[-1]:  # rejects most other histories at once
            return False
        head = turns[:seen]
        return all(map(operator.is_, head, self.turns)) or all(
            known == _identity(turn)
            for known, turn in zip(self.identities, head, strict=True))


class HybridTurnRecaller:
    """BM25 (+ dense when an embedder is given) over a session's turns. Thread-safe.

    ``threshold`` is on the calibrated similarity (see ``fusion``): with an embedder,
    ``alpha·coverage + (1−alpha)·dense``; without, the share of the query's idf weight the turn
    contains. Without an embedder the default is 0.2, which keeps 96 % of the evidence turns
    that rank in the top 10 for LoCoMo dev questions (0.3 keeps 77 %). With one it is 0: a
    dense similarity does not tell a relevant turn from small talk (on a LoCoMo conversation
    "thanks!" passes 85 of 210 turns at 0.2, "tell me more" 159), while every threshold
    above 0 loses evidence (LoCoMo strict recall at 8,000 tokens, ``chat`` plan: 0.932 at 0,
    0.914 at 0.1). What bounds recall is the plan's ``recall_share`` and ``recent_rounds``,
    not this. ``alpha`` 0.3 (lexical weight) ranked best there (0.5 lost 0.02–0.04); 0 ranks
    by dense similarity alone.
    ``max_sessions`` session indexes are kept, least recently used dropped first; 0 keeps
    none (each call indexes its history afresh).
    """

    def __init__(self, embedder: Embedder | None = None, *, alpha: float = 0.3,
                 threshold: float | None = None, calibration: Calibration = E5_CALIBRATION,
                 max_sessions: int = 16, expansion: RecallExpansion | None = None,
                 dates: bool = True) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise InvalidInputError("alpha must be between 0 and 1")
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) \
                or max_sessions < 0:
            raise InvalidInputError("max_sessions must be a non-negative integer")
        self.embedder = _cached(embedder)
        if threshold is None:
            threshold = 0.2 if embedder is None else 0.0
        self.alpha, self.threshold, self.calibration = alpha, threshold, calibration
        self._sessions: list[_SessionIndex] = []
        """Cached indexes, least recently used first."""
        self._max_sessions = max_sessions
        self.dates = dates
        """Whether turns and queries carry date terms (``recall.dates``) in the BM25 part."""
        self.expansion = expansion
        """Neighbours of the best hits (``RecallExpansion``; its feedback settings are lexical
        and not used here)."""
        self._lock = threading.Lock()

    def rank(self, query: str, turns: Sequence[RecallTurn], *, limit: int,
             now: str | None = None) -> list[tuple[int, float]]:
        """(position in ``turns``, fused score), best first, at most ``limit``.

        ``now``: when the query is asked (ISO 8601), to date its time words ("yesterday").
        """
        if not turns or limit <= 0:
            return []
        with self._lock:
            index = self._index_for(turns)
            positions = self._sync(index, turns)
            self._remember(index)
            fused, similarity = self._score(index, query, positions, now)
        passing = np.flatnonzero((similarity > 0) & (similarity >= self.threshold))
        best = passing[np.lexsort((passing, -fused[passing]))][:limit]
        ranked = [(int(i), float(fused[i])) for i in best]
        if self.expansion is None or not ranked:
            return ranked
        return with_neighbours(ranked, self.expansion, len(turns), limit)

    def _index_for(self, turns: Sequence[RecallTurn]) -> _SessionIndex:
        """The cached index ``turns`` extend (most recent first), else a new empty one."""
        for index in reversed(self._sessions):
            if index.is_prefix_of(turns):
                return index
        vectors = VectorMatrix(self.embedder.dim) if self.embedder is not None else None
        return _SessionIndex(Bm25Index(), vectors)

    def _remember(self, index: _SessionIndex) -> None:
        """Cache ``index`` as the most recently used, dropping the least recent over the limit."""
        if not self._max_sessions:
            return
        if index in self._sessions:  # identity: _SessionIndex compares by identity
            self._sessions.remove(index)
        self._sessions.append(index)
        del self._sessions[: -self._max_sessions]

    def _sync(self, index: _SessionIndex, turns: Sequence[RecallTurn]) -> Any:
        """Index the turns not seen yet; the index rows of ``turns``, in order.

        The new turns are embedded before any row is added, so an embedder error leaves the
        index as it was.
        """
        seen = len(index.identities)
        new = [_identity(turn) for turn in turns[seen:]]
        fresh = [identity for identity in dict.fromkeys(new) if identity not in index.rows]
        vectors = None
        if fresh and index.vectors is not None and self.embedder is not None:
            vectors = self.embedder.embed_passages([text for _, text, _ in fresh])
        for identity in fresh:
            index.rows[identity] = index.lexical.add(self._turn_tokens(identity))
        if vectors is not None and index.vectors is not None:
            index.vectors.append(vectors)
        prefix = index.positions if seen else np.zeros(0, dtype=np.int64)
        tail = np.asarray([index.rows[identity] for identity in new], dtype=np.int64)
        index.identities.extend(new)
        index.turns.extend(turns[seen:])
        index.positions = np.concatenate((prefix, tail))
        return index.positions

    def _dense_only(self) -> bool:
        """Whether BM25 plays no part (alpha 0, an embedder): turns are not analysed for it."""
        return self.alpha == 0 and self.embedder is not None

    def _turn_tokens(self, identity: _Identity) -> list[str]:
        if self._dense_only():
            return []  # a row of the index all the same: rows number the vectors too
        _, text, timestamp = identity
        tokens = _terms(text)
        return [*tokens, *turn_date_terms(text, timestamp)] if self.dates else tokens

    def _score(self, index: _SessionIndex, query: str, positions: Any, now: str | None
               ) -> tuple[Any, Any]:
        if self._dense_only() and index.vectors is not None and self.embedder is not None:
            # Dense alone: every turn by its similarity, none left out of a fusion pool.
            cosine = index.vectors.similarities(
                self.embedder.embed_queries([query])[0])[positions]
            return minmax(cosine), self.calibration.apply(cosine)
        tokens = _terms(query)
        if self.dates:
            tokens = [*tokens, *query_date_terms(query, now)]
        bm25 = index.lexical.scores(tokens)[positions]
        coverage = index.lexical.coverage(tokens)[positions]
        if index.vectors is None or self.embedder is None or self.alpha >= 1.0:
            return minmax(bm25), coverage
        cosine = index.vectors.similarities(self.embedder.embed_queries([query])[0])[positions]
        fused = weighted_fusion(bm25, cosine, self.alpha)
        similarity = (self.alpha * coverage
                      + (1.0 - self.alpha) * self.calibration.apply(cosine))
        return fused, similarity


def _identity(turn: RecallTurn) -> _Identity:
    return turn.key, turn.text, turn.timestamp


FUSION_K = 10.0
"""The rank constant of ``FusedTurnRecaller``: a turn at rank r (from 1) in one ranking adds
1 / (k + r). Measured on LoCoMo dev (strict recall at 2k / 4k / 8k, ``chat``): 10 gives 0.833 /
0.888 / 0.945; 3 gives 0.836 / 0.893 / 0.945 and 20 0.830 / 0.888 / 0.945 (a question is
0.003), 60 (the usual default for document search, where rankings are read far deeper) 0.809 /
0.888 / 0.943.
Choosing k on two conversations and measuring on the third (``bench/recall_cv.py --recaller
fused``) chose 3 every time and estimates 0.836 / 0.893 / 0.945; 10, the middle of the flat
range, is kept."""


class FusedTurnRecaller:
    """The lexical recaller's ranking and e5's, fused by rank. Thread-safe.

    A turn scores 1 / (``k`` + its rank) in each ranking it is in, summed; best first, ties by
    position. Ranks, not scores: BM25 and cosine live on scales whose relation changes from one
    conversation to the next, so a weight tuned to mix the scores on some conversations does not
    carry to others, while a rank means the same in both (on unseen LoCoMo conversations the
    weighted fusion of ``HybridTurnRecaller`` fell behind the lexical recaller at small budgets).
    The lexical side is ``LexicalTurnRecaller`` with its expansion (dates, feedback words,
    neighbours of hits) unless ``lexical`` says otherwise; the dense side ranks every turn
    whose calibrated similarity to the query is above 0 (``HybridTurnRecaller`` with
    ``alpha=0``, which keeps the session indexes and embeds only new turns).
    """

    def __init__(self, embedder: Embedder, *, lexical: TurnRecaller | None = None,
                 k: float = FUSION_K, max_sessions: int = 16) -> None:
        """A recaller over ``embedder``'s similarity and ``lexical``'s ranking (see the class)."""
        if isinstance(k, bool) or not isinstance(k, int | float) or not (
                math.isfinite(k) and k > 0):
            raise InvalidInputError("k must be a positive number")
        self.lexical: TurnRecaller = lexical if lexical is not None else LexicalTurnRecaller(
            expansion=RecallExpansion())
        self.k = float(k)
        self._dense = HybridTurnRecaller(embedder, alpha=0.0, max_sessions=max_sessions,
                                         dates=False)

    def rank(self, query: str, turns: Sequence[RecallTurn], *, limit: int,
             now: str | None = None) -> list[tuple[int, float]]:
        """(position in ``turns``, fused score), best first, at most ``limit``.

        ``now``: when the query is asked (ISO 8601), for the lexical side's time words.
        """
        if not turns or limit <= 0:
            return []
        lexical = rank_turns(self.lexical, query, turns, limit=limit, now=now)
        dense = self._dense.rank(query, turns, limit=limit)
        return reciprocal_rank_fusion((lexical, dense), k=self.k, limit=limit)

    def focus(self, query: str, turns: Sequence[RecallTurn], *, limit: int,
              now: str | None = None) -> float | None:
        """The lexical side's focus (``LexicalTurnRecaller.focus``), when it has one."""
        return turn_focus(self.lexical, query, turns, limit=limit, now=now)


def reciprocal_rank_fusion(rankings: Sequence[Sequence[tuple[int, float]]], *, k: float,
                           limit: int) -> list[tuple[int, float]]:
    """(position, Σ 1 / (k + rank)) over ``rankings`` (each best first), best first.

    Ties by position; at most ``limit``. Scores add up in the rankings' order, so the same
    rankings give the same floats.
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, (position, _) in enumerate(ranking, start=1):
            scores[position] = scores.get(position, 0.0) + 1.0 / (k + rank)
    return best_first(scores)[:limit]
