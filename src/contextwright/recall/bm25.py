"""The recall BM25 engine: an index over a growing turn list, top-k without scoring every turn.

``TurnPostings`` is an inverted index that only grows: a new turn costs its own terms (one int
appended per distinct term). ``TurnPostings.top`` returns exactly what scoring every turn and
sorting would (same positions, same float scores, same order and ties), but reads few postings
of a long session. It is term-at-a-time MaxScore (Turtle & Flood, 1995): terms are taken by
descending upper bound of what they can add to a turn's score; once the ``limit``-th best score
known so far (or ``min_score``) exceeds what the terms not yet read can add together, no unseen
turn can make the cut, so the remaining terms only update the turns already seen — probing each
one's count, or walking the term's postings when that is cheaper — and turns that can no longer
reach the cut are dropped as it rises. The survivors are scored again term by term in the
caller's order, so their floats are bit-for-bit those of a plain summation; partial sums only
decide what to skip, with a safety margin far above float rounding.

Query terms get two derived views, built on first use and extended as the session grows:
postings grouped by (count, turn length), so one BM25 contribution is computed per group, and
a byte per turn holding the term's count, so probing a turn is one index. A bounded number of
terms keep them (least recently queried dropped first). Pure Python, no I/O; not thread-safe
on its own (the recaller holds a lock).

Why the library has a second BM25 (``retrieval.lexical.Bm25Index``): that one needs numpy (the
``retrieval`` extra), scores in float32 and scores every row (fusion with dense similarity
min-max normalises over all rows and needs its idf coverage), and can remove documents. This
one needs only the standard library, so ``HistorySource``'s and ``ContextManager``'s default
recaller and document ranking work without the extra, and its float64 scores are exactly those
of plain BM25 (the recaller's ``min_score`` is in those units). It is not the faster one:
``bench/recall_engines.py`` on the synthetic session, one query's top 8: 1.11 ms against numpy's
0.20 ms at 3,763 turns, 18 ms against 1.1 ms at 37,546 turns (numpy's import: ~170 ms).
"""

from __future__ import annotations

import heapq
import math
import sys
from array import array
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from contextwright.core.caches import GrowingCache
from contextwright.errors import InvalidInputError
from contextwright.recall.turns import INDEX_LIMIT, RecallTurn, keep_bounded

_PROBE_COST = 2
"""Probing one turn's count costs about this many steps of a posting walk (CPython 3.11):
seen turns are probed when the term has more than this many postings per seen turn."""
_EXHAUSTIVE_POSTINGS = 2_000
"""Up to this many postings among the query's terms, every matching turn is scored: pruning
would save less than its own bookkeeping costs."""
_EXHAUSTIVE_PER_RESULT = 2
"""Nor with fewer than this many postings per query term and result wanted: pruning ends by
scoring at least ``limit`` turns whole, term by term."""
_SLACK = 1e-9
"""Relative margin on every pruning comparison. Partial sums add in another order than the final
scores, which moves them by a few ulps (~1e-15 relative); a turn is skipped only when it misses
the cut by far more than that."""
_VIEW_BUDGET = 8_000_000
"""Bytes of derived views (count bytes and grouped postings) one index may hold."""
_SATURATED = 255
"""A count byte of 255 means "255 or more": the exact count is then looked up."""
_COUNT_BITS = 3
_LOW_COUNTS = (1 << _COUNT_BITS) - 1
"""A posting is one int, ``position << 3 | count``; a count of 7 or more is stored as 7 and
kept whole in ``TurnPostings.big_counts`` (about one posting in a thousand)."""
_MAX_POSITION = (2**31 - 1) >> _COUNT_BITS
_TERM_BYTES = 250
"""What a term new to an index costs besides its characters: the key string, its postings
array and the dict slot (measured with ``tracemalloc``, rounded up)."""
_VIEW_BYTES = 800
"""What a term's view costs besides its count bytes and positions: the view object, its three
dicts, the bytearray and its slot among the index's views (measured with ``tracemalloc``)."""
_GROUP_BYTES = 150
"""What one (count, length) group of a view costs besides its positions: the array object, its
key and its dict slot (measured with ``tracemalloc``)."""
_new_postings = partial(array, "i")


def common_above(size: int) -> int:
    """Terms in more than this many of ``size`` turns are left out of a query.

    In a short session, the classic rule: more than half (idf below log 2). From 250 turns on,
    more than a fifth (idf below log 5 ≈ 1.6): such a word (a name every other line says, the
    topic of the whole session) hardly moves a turn's rank, but it has the longest postings, so
    scoring it is what makes ranking grow with the session. Measured: LoCoMo strict recall with
    the ``chat`` plan 0.689 / 0.762 / 0.820 → 0.687 / 0.760 / 0.817 (2k / 4k / 8k); a
    ``ContextManager.prepare`` at 10,000 messages whose words each recur in a quarter of the
    turns 12.8 → 2.1 ms. A tenth cost LoCoMo 0.03–0.04, so it is not lower.
    """
    return max(size // 5, min(size // 2, 50))


@dataclass(slots=True)
class TermView:
    """What a query reads of one term, derived from its postings on first use and extended."""

    groups: dict[tuple[int, int], array[int]] = field(default_factory=dict)
    """Positions by (count, turn length): one BM25 contribution per group."""
    count_bytes: bytearray = field(default_factory=bytearray)
    """The term's count in every turn (0: absent; saturated at 255): probing is one index."""
    big_counts: dict[int, int] = field(default_factory=dict)
    """Counts of 7 or more, by position."""
    viewed: int = 0
    """Postings already in the view."""
    shortest: dict[int, int] = field(default_factory=dict)
    """Per count, the shortest turn with that count: the term's largest contribution is one
    of these (it grows with the count and shrinks with the length)."""

    def extend(self, term: str, postings: array[int], index: TurnPostings) -> int:
        """Bring the view up to date with ``postings``; returns the bytes it grew by, about."""
        groups, count_bytes, lengths = self.groups, self.count_bytes, index.lengths
        grown = len(lengths) - len(count_bytes)
        count_bytes.extend(bytes(grown))
        if not self.viewed:
            grown += _VIEW_BYTES
        for code in postings[self.viewed:]:
            position, count = code >> _COUNT_BITS, code & _LOW_COUNTS
            if count == _LOW_COUNTS:
                count = self.big_counts[position] = index.big_counts[term, position]
            length = lengths[position]
            members = groups.get((count, length))
            if members is None:
                members = groups[count, length] = array("i")
                grown += _GROUP_BYTES
            members.append(position)
            count_bytes[position] = min(count, _SATURATED)
            if length < self.shortest.get(count, sys.maxsize):
                self.shortest[count] = length
        grown += 4 * (len(postings) - self.viewed)
        self.viewed = len(postings)
        return grown

    def size(self) -> int:
        """Bytes held, about."""
        return (len(self.count_bytes) + 4 * self.viewed + _GROUP_BYTES * len(self.groups)
                + (_VIEW_BYTES if self.viewed else 0))

    def count_at(self, position: int) -> int:
        """The term's count in the turn at ``position`` (0 if absent)."""
        count = self.count_bytes[position]
        return count if count < _SATURATED else self.big_counts[position]


@dataclass(frozen=True, slots=True)
class Bm25Params:
    """BM25 constants of one query: term weights need the collection size and mean length.

    A term adds ``weight·count / (count + base + per_length·length)`` to a turn's score; every
    path below writes that expression the same way, so it gives the same float.
    """

    k1: float
    size: int
    """Turns in the collection."""
    base: float
    """``k1·(1−b)``: the length-independent part of the tf normaliser."""
    per_length: float
    """``k1·b / mean length``."""


@dataclass(slots=True)
class _QueryTerm:
    rank: int
    """Position in the caller's term order (scores add up in that order)."""
    df: int
    """Turns that contain the term."""
    weight: float
    """``idf·(k1+1)``."""
    view: TermView
    bound: float
    """Upper bound of what the term adds to any turn's score."""


_BLOCK = 1 << 32
"""A packed term's place: ``block * _BLOCK + i`` (its codes are ``codes[offsets[i]:offsets[i+1]]``
of that block)."""


class PackedPostings(defaultdict[str, "array[int]"]):
    """Postings loaded as blocks (one array of codes per block), a term's array cut out when read.

    A stored index of a long session holds about 100,000 terms, and a query reads a handful:
    making an array per term when the index loads cost more than the rest of the load, and
    those arrays, being tracked by the garbage collector, brought on full collections. A
    packed term reads like any other (``get``, ``[]``, ``in``, ``len``); iterating, ``items``
    and the like cut out every term first.
    """

    def __init__(self) -> None:
        super().__init__(_new_postings)
        self._packed: dict[str, int] = {}
        self._blocks: list[tuple[array[int], array[int]]] = []
        """(offsets, codes) of each block."""

    def add_block(self, terms: Sequence[str], offsets: array[int], codes: array[int]) -> None:
        """Add the postings ``codes[offsets[i]:offsets[i + 1]]`` of each ``terms[i]``.

        A term already held gets them appended (the block's turns follow the held ones); the
        others stay packed.
        """
        block = len(self._blocks) * _BLOCK
        self._blocks.append((offsets, codes))
        packed = self._packed
        if not packed and not dict.__len__(self):  # the first block: every term is new
            packed.update(zip(terms, range(block, block + len(terms)), strict=True))
            return
        for i, term in enumerate(terms):
            if term in self:
                self[term].extend(codes[offsets[i]:offsets[i + 1]])
            else:
                packed[term] = block + i

    def _unpack(self, term: str) -> array[int] | None:
        at = self._packed.pop(term, None)
        if at is None:
            return dict.get(self, term)  # another thread may have unpacked it meanwhile
        offsets, codes = self._blocks[at // _BLOCK]
        i = at % _BLOCK
        codes_of = codes[offsets[i]:offsets[i + 1]]
        return self.setdefault(term, codes_of)

    def __missing__(self, term: str) -> array[int]:
        found = self._unpack(term) if term in self._packed else None
        return found if found is not None else super().__missing__(term)

    def get(self, term: str, default: Any = None) -> Any:
        """The term's postings (cut out if packed), else ``default``; adds no term."""
        found = dict.get(self, term)
        if found is None and term in self._packed:
            found = self._unpack(term)
        return default if found is None else found

    def __contains__(self, term: object) -> bool:
        return dict.__contains__(self, term) or term in self._packed

    def __len__(self) -> int:
        return dict.__len__(self) + len(self._packed)

    def unpack_all(self) -> None:
        """Cut out every packed term (before anything walks all terms)."""
        for term in list(self._packed):
            self._unpack(term)

    def __iter__(self) -> Iterator[str]:
        self.unpack_all()
        return super().__iter__()

    def keys(self) -> Any:
        """Every term (cut out first)."""
        self.unpack_all()
        return super().keys()

    def values(self) -> Any:
        """Every term's postings (cut out first)."""
        self.unpack_all()
        return super().values()

    def items(self) -> Any:
        """Every (term, postings) (cut out first)."""
        self.unpack_all()
        return super().items()

    def __eq__(self, other: object) -> bool:
        self.unpack_all()
        if isinstance(other, PackedPostings):
            other.unpack_all()
        return super().__eq__(other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]


@dataclass(slots=True)
class TurnPostings:
    """An inverted index over a list of turns' terms, extended as the list grows."""

    postings: defaultdict[str, array[int]] = field(
        default_factory=lambda: defaultdict(_new_postings))
    """Per term, ``position << 3 | min(count, 7)`` of each turn that has it, in order (a
    ``defaultdict``: read it with ``get``, which adds no term)."""
    big_counts: dict[tuple[str, int], int] = field(default_factory=dict)
    """(term, position) → count, for counts of 7 or more."""
    lengths: array[int] = field(default_factory=lambda: array("i"))
    """Each turn's length in terms."""
    total_length: int = 0
    """Sum of ``lengths`` (kept as it grows: the mean is needed on every query)."""
    views: OrderedDict[str, TermView] = field(default_factory=OrderedDict)
    """Views of the terms queried, least recently queried first."""
    view_bytes: int = 0
    """Memory held by the views, about."""
    held: int = 0
    """Memory held by the postings, lengths and big counts, about."""
    terms: str = ""
    """How the turns' terms were made (``recall.lexical``'s ``DATED_TERMS`` or ``WORD_TERMS``):
    postings carried by a turn list are used only by a recaller that makes its terms the same
    way."""

    def __len__(self) -> int:
        return len(self.lengths)

    def bytes(self) -> int:
        """Approximate memory of the index and its views."""
        return self.held + self.view_bytes

    def add(self, counts: Mapping[str, int]) -> None:
        """Index the next turn, given as its terms' counts."""
        self.add_all((counts,))

    def add_all(self, counted: Iterable[Mapping[str, int]]) -> None:
        """Index the next turns, each given as its terms' counts (as ``add`` one by one)."""
        postings, lengths, big = self.postings, self.lengths, self.big_counts
        terms_before, first, added, total = len(postings), len(lengths), 0, 0
        position = first
        for counts in counted:
            if position > _MAX_POSITION:
                raise InvalidInputError("history too long to index for recall")
            code = position << _COUNT_BITS
            for term, count in counts.items():
                if count < _LOW_COUNTS:
                    postings[term].append(code | count)
                else:
                    postings[term].append(code | _LOW_COUNTS)
                    big[term, position] = count
                    self.held += 150
            length = sum(counts.values())
            lengths.append(length)
            total += length
            added += len(counts)
            position += 1
        self.total_length += total
        # 4 bytes a posting and a length; each new term its key, array and slot
        self.held += 4 * (added + position - first) + _TERM_BYTES * (
            len(postings) - terms_before)

    def top(self, terms: Sequence[str], *, limit: int, min_score: float, k1: float, b: float
            ) -> list[tuple[int, float]]:
        """(position, BM25), best first, ties by position: at most ``limit``, ≥ ``min_score``.

        A term too common to tell turns apart is left out (``common_above``). Scores add
        up in ``terms`` order. With ``min_score`` ≤ 0 a turn that
        shares no term scores 0 and reaches it too (they follow the others by position).
        """
        size = len(self.lengths)
        if not size or limit <= 0:
            return []
        average = (self.total_length / size) or 1.0
        params = Bm25Params(k1=k1, size=size, base=k1 * (1 - b), per_length=k1 * b / average)
        query = self._query_terms(terms, params)
        scored = _Search(query, params, self.lengths, limit, min_score).run()
        found = _best(scored, limit, min_score)
        if min_score <= 0 and len(found) < limit:
            found += _unmatched(size, {position for position, _ in found}, limit - len(found))
        return found

    def best_possible(self, terms: Sequence[str], *, k1: float) -> float:
        """The highest BM25 score a turn could reach for ``terms``: Σ idf·(k1+1).

        Over the terms a query scores (in the index, not too common): what a turn holding each
        of them, saturated, would score. ``top``'s best score divided by it says how much of
        the query the best turn matches (``LexicalTurnRecaller.focus``).
        """
        size = len(self.lengths)
        total = 0.0
        for term in terms:
            postings = self.postings.get(term)
            if postings is None or len(postings) > common_above(size):
                continue
            df = len(postings)
            total += math.log(1 + (size - df + 0.5) / (df + 0.5)) * (k1 + 1)
        return total

    def _query_terms(self, terms: Sequence[str], params: Bm25Params) -> list[_QueryTerm]:
        query = []
        for rank, term in enumerate(terms):
            postings = self.postings.get(term)
            if postings is None or len(postings) > common_above(params.size):
                continue
            view = self.views.pop(term, None) or TermView()
            self.views[term] = view  # now the most recently queried
            self.view_bytes += view.extend(term, postings, self)
            df = len(postings)
            weight = math.log(1 + (params.size - df + 0.5) / (df + 0.5)) * (params.k1 + 1)
            base, per_length = params.base, params.per_length
            bound = max(weight * count / (count + base + per_length * length)
                        for count, length in view.shortest.items())
            query.append(_QueryTerm(rank=rank, df=df, weight=weight, view=view, bound=bound))
        self._drop_old_views(keep=len(query))
        return query

    def _drop_old_views(self, *, keep: int) -> None:
        """While over budget, drop the views of the least recently queried terms.

        The newest ``keep`` are the terms of the query being answered: they stay.
        """
        while self.view_bytes > _VIEW_BUDGET and len(self.views) > keep:
            _, oldest = self.views.popitem(last=False)
            self.view_bytes -= oldest.size()


class _Search:
    """One top-``limit`` query over the postings (see the module docstring)."""

    def __init__(self, query: list[_QueryTerm], params: Bm25Params, lengths: Sequence[int],
                 limit: int, min_score: float) -> None:
        self.query, self.params, self.lengths = query, params, lengths
        self.limit, self.min_score = limit, min_score
        self.whole: dict[int, float] = {}
        """Whole scores computed so far (the exact floats)."""

    def run(self) -> list[tuple[int, float]]:
        """(position, whole score) of every turn that may make the cut.

        All matching turns, or a superset of the best found by pruning.
        """
        postings = sum(term.df for term in self.query)
        # Pruning ends by scoring at least ``limit`` turns whole; with few postings, scoring
        # every matching turn in one pass is cheaper.
        if postings <= max(_EXHAUSTIVE_POSTINGS,
                           _EXHAUSTIVE_PER_RESULT * self.limit * len(self.query)):
            scores: dict[int, float] = {}
            for term in self.query:
                _accumulate(scores, term, self.params)
            return list(scores.items())
        return list(self._whole_scores(self._candidates()).items())

    def _candidates(self) -> list[int]:
        """Every turn that may be among the ``limit`` best at or above ``min_score``."""
        by_bound = sorted(self.query, key=lambda term: (-term.bound, term.rank))
        # rest[i]: the most the terms from by_bound[i] on can add to any turn
        rest = [0.0] * (len(by_bound) + 1)
        for i in range(len(by_bound) - 1, -1, -1):
            rest[i] = rest[i + 1] + by_bound[i].bound
        slack = _SLACK * (1.0 + rest[0] + max(self.min_score, 0.0))
        partial: dict[int, float] = {}
        cut, limit, start = self.min_score, self.limit, len(by_bound)
        for i, term in enumerate(by_bound):
            if len(partial) >= limit and rest[0] - rest[i] > rest[i] >= cut - slack:
                cut = max(cut, self._raised_cut(partial, rest[i], cut - slack, term))
            if rest[i] < cut - slack:
                start = i  # no turn unseen so far can reach the cut any more
                break
            _accumulate(partial, term, self.params)
        for i in range(start, len(by_bound)):
            # after this term, a turn needs this much to be able to reach the cut
            partial = self._update_seen(partial, by_bound[i], need=cut - slack - rest[i + 1])
            cut = max(cut, _kth_best(partial, limit, above=cut))
        return [p for p, s in partial.items() if s >= cut - slack]

    def _raised_cut(self, partial: dict[int, float], rest: float, floor: float,
                    upcoming: _QueryTerm) -> float:
        """A higher cut, if one is known to pass ``rest`` (else −inf).

        The ``limit``-th best partial sum is free to find; if it is not enough and the next
        term is long enough to be worth it, the partial leaders are scored whole: partial sums
        understate the scores the cut is about.
        """
        cut = _kth_best(partial, self.limit, above=max(floor, rest))
        if cut <= rest and upcoming.df > self.limit * len(self.query):
            cut = max(cut, self._kth_whole(partial))
        return cut

    def _kth_whole(self, partial: dict[int, float]) -> float:
        """The ``limit``-th best whole score of ``limit`` turns with the best partial sums."""
        k = self.limit
        kth_partial = heapq.nlargest(k, partial.values())[-1]
        leaders = [position for position, score in partial.items() if score > kth_partial]
        for position, score in partial.items():  # ties at the k-th: any of them will do
            if len(leaders) == k:
                break
            if score == kth_partial:
                leaders.append(position)
        return heapq.nlargest(k, self._whole_scores(leaders).values())[-1]

    def _update_seen(self, partial: dict[int, float], term: _QueryTerm, *, need: float
                     ) -> dict[int, float]:
        """The turns of ``partial`` with the term's contribution, those below ``need`` out."""
        _add_term(partial, term, self.params, self.lengths)
        if partial and min(partial.values()) < need:
            return {position: score for position, score in partial.items() if score >= need}
        return partial

    def _whole_scores(self, positions: list[int]) -> dict[int, float]:
        """Scores of ``positions`` summed term by term in query order, as plain BM25 does."""
        new = dict.fromkeys((p for p in positions if p not in self.whole), 0.0)
        for term in self.query:  # the query keeps the caller's term order
            _add_term(new, term, self.params, self.lengths)
        self.whole.update(new)
        return {position: self.whole[position] for position in positions}


def _accumulate(partial: dict[int, float], term: _QueryTerm, params: Bm25Params) -> None:
    """Add the term's contribution to every turn that has it (seen or not)."""
    get = partial.get
    weight, base, per_length = term.weight, params.base, params.per_length
    for (count, length), positions in term.view.groups.items():
        value = weight * count / (count + base + per_length * length)
        for position in positions:
            partial[position] = get(position, 0.0) + value


def _add_term(scores: dict[int, float], term: _QueryTerm, params: Bm25Params,
              lengths: Sequence[int]) -> None:
    """Add the term's contribution to the turns in ``scores`` only.

    Each turn's count is probed, or the term's postings walked when there are fewer of them
    than probing would cost.
    """
    view = term.view
    weight, base, per_length = term.weight, params.base, params.per_length
    if len(scores) * _PROBE_COST < term.df:
        count_bytes = view.count_bytes
        for position in scores:
            count = count_bytes[position]
            if count:
                if count == _SATURATED:
                    count = view.big_counts[position]
                scores[position] += weight * count / (
                    count + base + per_length * lengths[position])
        return
    for (count, length), positions in view.groups.items():
        value = weight * count / (count + base + per_length * length)
        for position in positions:
            if position in scores:
                scores[position] += value


def _kth_best(partial: dict[int, float], k: int, *, above: float) -> float:
    """The ``k``-th best partial score if it is above ``above``, else −inf (no better cut)."""
    if len(partial) < k:
        return -math.inf
    high = [score for score in partial.values() if score > above]
    return heapq.nlargest(k, high)[-1] if len(high) >= k else -math.inf


def _best(scored: list[tuple[int, float]], limit: int, min_score: float
          ) -> list[tuple[int, float]]:
    """The ``limit`` best at or above ``min_score``, best first, ties by position.

    The cut-off is found among the bare floats, so only the turns that reach it are sorted.
    """
    floor = min_score
    if len(scored) > limit:
        floor = max(floor, heapq.nlargest(limit, [score for _, score in scored])[-1])
    ranked = sorted((-score, position) for position, score in scored if score >= floor)
    return [(position, -negative) for negative, position in ranked[:limit]]


def _unmatched(size: int, matched: set[int], limit: int) -> list[tuple[int, float]]:
    """The first ``limit`` positions of turns outside ``matched``, each with score 0."""
    found: list[tuple[int, float]] = []
    for position in range(size):
        if len(found) == limit:
            break
        if position not in matched:
            found.append((position, 0.0))
    return found


class TurnList(list[RecallTurn]):
    """A list of turns that may carry their postings, built elsewhere (read from a store).

    A recaller indexing the list starts from ``postings`` instead of analysing every turn
    again; the postings must be those of the list's first ``len(postings)`` turns, analysed as
    the lexical recaller analyses them (whoever sets it checks that).
    """

    postings: TurnPostings | None = None


@dataclass(slots=True)
class IndexedTurns:
    """The inverted index of one turn list, and how far it has read the list."""

    turns: Sequence[RecallTurn]
    count: int = 0
    """Turns indexed (the list's first ``count``)."""
    last_key: str = ""
    """Key of the last turn indexed: checked before the index is reused (a list edited in
    place is indexed anew)."""
    index: TurnPostings = field(default_factory=TurnPostings)
    last_ranking: tuple[object, int, list[tuple[int, float]], float | None] | None = None
    """(what was asked, turns indexed then, the ranking, its focus): an agent loop builds again
    and again with the same input while its turn is open, and the closed turns, so the ranking,
    are the same."""


def postings_cache() -> GrowingCache[int, IndexedTurns]:
    """The indexes one recaller keeps, bounded like every turn index (``keep_bounded``).

    Bytes are a share of the process-wide cache budget (``set_cache_limits``).
    """
    return GrowingCache("recall.lexical.postings", max_entries=INDEX_LIMIT, share=0.25,
                        size=lambda entry: entry.index.bytes())


def indexed_postings(cache: GrowingCache[int, IndexedTurns], turns: Sequence[RecallTurn],
                     term_counts: Callable[[RecallTurn], Mapping[str, int]], terms: str
                     ) -> IndexedTurns:
    """The index of ``turns`` from ``cache``, extended to its new turns (rebuilt if it changed).

    ``term_counts`` gives a turn's terms, made the way ``terms`` names. A list seen for the
    first time starts from the postings it carries (``TurnList``), if they were made the same
    way; its turns are then not read at all (a list loaded from a store makes them when read).
    The caller holds the lock that guards ``cache``.
    """
    entry = cache.pop(id(turns), None)  # put back last: the most recently used
    carried = getattr(turns, "postings", None)
    if not isinstance(carried, TurnPostings) or len(carried) > len(turns) or (
            carried.terms != terms):
        carried = None
    if entry is None or entry.turns is not turns or entry.count > len(turns) or (
            entry.count and turns[entry.count - 1].key != entry.last_key):
        entry = IndexedTurns(turns=turns, index=TurnPostings(terms=terms))
        if carried is not None:
            entry.index = carried
    if carried is not None and entry.index is carried and len(carried) > entry.count:
        entry.count = len(carried)  # the list's owner extended its postings with the list
    if entry.count < len(turns):
        entry.index.add_all(map(term_counts, turns[entry.count:]))
        entry.count = len(turns)
    if entry.count:
        entry.last_key = turns[entry.count - 1].key
    cache[id(turns)] = entry
    keep_bounded(cache, lambda held: held.count)
    return entry
