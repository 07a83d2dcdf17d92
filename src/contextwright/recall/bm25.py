"""The recall BM25 engine: an index over a growing turn list, scored in a few array passes.

``TurnPostings`` is an inverted index that only grows: a new turn costs its own terms (one int
appended per distinct term). ``TurnPostings.top`` returns exactly what scoring every turn in
plain Python and sorting would (same positions, same float scores, same order and ties): the
query's postings are read into one numpy array, each posting's contribution is computed with
the same float64 operations in the same order, and ``numpy.bincount`` adds them up turn by
turn in the query's term order, as a plain loop would. Only the best are sorted. No view of a
term is derived or kept between queries, so a query's cost is its postings, however many
terms the session has and however new the input's words are; not thread-safe on its own (the
recaller holds a lock).

Why the library has a second BM25 (``retrieval.lexical.Bm25Index``): that one scores in float32
and scores every row (fusion with dense similarity min-max normalises over all rows and needs
its idf coverage), and can remove documents. This one only grows, and its float64 scores are
exactly those of plain BM25 (the recaller's ``min_score`` is in those units).
``bench/recall_engines.py`` times the two on the synthetic session.
"""

from __future__ import annotations

import math
import threading
import weakref
from array import array
from bisect import bisect_left
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from contextwright.core.caches import GrowingCache, register_clear, text_bytes
from contextwright.errors import InvalidInputError
from contextwright.recall.turns import (
    INDEX_LIMIT,
    TURN_BYTES,
    Lineage,
    RecallTurn,
    Turns,
    keep_bounded,
    lineage_of,
)

_COUNT_BITS = 3
_LOW_COUNTS = (1 << _COUNT_BITS) - 1
"""A posting is one int, ``position << 3 | count``; a count of 7 or more is stored as 7 and
kept whole in ``TurnPostings.big_counts`` (about one posting in a thousand)."""
_MAX_POSITION = (2**31 - 1) >> _COUNT_BITS
_TERM_BYTES = 250
"""What a term new to an index costs besides its characters: the key string, its postings
array and the dict slot (measured with ``tracemalloc``, rounded up)."""
_new_postings = partial(array, "i")


def _numpy() -> Any:
    """numpy, imported on the first ranking: importing the library does not pay for it."""
    import numpy

    return numpy


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
    held: int = 0
    """Memory held by the postings, lengths and big counts, about."""
    terms: str = ""
    """How the turns' terms were made (``recall.lexical``'s ``DATED_TERMS`` or ``WORD_TERMS``):
    postings carried by a turn list are used only by a recaller that makes its terms the same
    way."""

    def __len__(self) -> int:
        return len(self.lengths)

    def bytes(self) -> int:
        """Approximate memory of the index."""
        return self.held

    def prefix(self, size: int | None) -> int:
        """The turns a query over the first ``size`` reads (None: all of them).

        Postings are shared by the readers of one growing turn list (``recall.turns.Turns``):
        a build holding the list as it was a few turns ago ranks only the turns it holds,
        with the statistics of those turns, so what another build indexed meanwhile changes
        nothing of its ranking.
        """
        indexed = len(self.lengths)
        if size is None or size >= indexed:
            return indexed
        return max(size, 0)

    def prefix_length(self, size: int) -> int:
        """The summed length of the first ``size`` turns (``total_length`` for all of them)."""
        return self.total_length if size == len(self.lengths) else sum(self.lengths[:size])

    def postings_of(self, term: str, size: int) -> array[int] | None:
        """``term``'s postings in the first ``size`` turns (None: in none of the index's)."""
        postings = self.postings.get(term)
        if postings is None or size >= len(self.lengths):
            return postings
        cut = bisect_left(postings, size << _COUNT_BITS)  # positions ascend
        return postings[:cut] if cut else None

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

    def top(self, terms: Sequence[str], *, limit: int, min_score: float, k1: float, b: float,
            size: int | None = None) -> list[tuple[int, float]]:
        """(position, BM25), best first, ties by position: at most ``limit``, ≥ ``min_score``.

        A term too common to tell turns apart is left out (``common_above``). Scores add
        up in ``terms`` order. With ``min_score`` ≤ 0 a turn that
        shares no term scores 0 and reaches it too (they follow the others by position).
        ``size``: rank the first ``size`` turns only, as an index of just them would (see
        ``prefix``; default: every turn).
        """
        size = self.prefix(size)
        if not size or limit <= 0:
            return []
        average = (self.prefix_length(size) / size) or 1.0
        params = Bm25Params(k1=k1, size=size, base=k1 * (1 - b), per_length=k1 * b / average)
        scores = self._scores(terms, params)
        found = _best(scores, limit, min_score)
        if min_score <= 0 and len(found) < limit:
            found += _unmatched(scores, limit - len(found))
        return found

    def _scores(self, terms: Sequence[str], params: Bm25Params) -> Any:
        """Every turn's score (a float64 array; 0 where no term matches).

        A posting adds ``weight·count / (count + base + per_length·length)``, the float
        operations plain BM25 does, in that order; ``bincount`` adds a turn's contributions in
        the order of its postings, so term by term in ``terms`` order, starting from 0.
        """
        np = _numpy()
        chosen, weights = [], []
        for term in terms:
            postings = self.postings_of(term, params.size)
            if postings is None or len(postings) > common_above(params.size):
                continue
            df = len(postings)
            chosen.append((term, postings))
            weights.append(
                math.log(1 + (params.size - df + 0.5) / (df + 0.5)) * (params.k1 + 1))
        if not chosen:
            return np.zeros(params.size)
        # array("i") holds C ints: numpy reads them in place (each is copied by concatenate)
        codes = np.concatenate([np.frombuffer(postings, dtype=np.intc)
                                for _, postings in chosen])
        positions = codes >> _COUNT_BITS
        counts = (codes & _LOW_COUNTS).astype(np.float64)
        self._exact_big_counts(chosen, positions, counts)
        weight = np.repeat(np.array(weights), [len(postings) for _, postings in chosen])
        lengths = np.frombuffer(self.lengths, dtype=np.intc)[positions].astype(np.float64)
        added = weight * counts / (counts + params.base + params.per_length * lengths)
        return np.bincount(positions, weights=added, minlength=params.size)

    def _exact_big_counts(self, chosen: list[tuple[str, array[int]]], positions: Any,
                          counts: Any) -> None:
        """Put the whole count where a posting says "7 or more" (about one in a thousand)."""
        np = _numpy()
        saturated = np.flatnonzero(counts == _LOW_COUNTS)
        if not len(saturated):
            return
        ends = np.cumsum([len(postings) for _, postings in chosen])
        owners = np.searchsorted(ends, saturated, side="right")
        for at, owner in zip(saturated.tolist(), owners.tolist(), strict=True):
            counts[at] = self.big_counts[chosen[owner][0], int(positions[at])]

    def best_possible(self, terms: Sequence[str], *, k1: float, size: int | None = None
                      ) -> float:
        """The highest BM25 score a turn could reach for ``terms``: Σ idf·(k1+1).

        Over the terms a query scores (in the index, not too common): what a turn holding each
        of them, saturated, would score. ``top``'s best score divided by it says how much of
        the query the best turn matches (``LexicalTurnRecaller.focus``). ``size`` as ``top``'s.
        """
        size = self.prefix(size)
        total = 0.0
        for term in terms:
            postings = self.postings_of(term, size)
            if postings is None or len(postings) > common_above(size):
                continue
            df = len(postings)
            total += math.log(1 + (size - df + 0.5) / (df + 0.5)) * (k1 + 1)
        return total


def _best(scores: Any, limit: int, min_score: float) -> list[tuple[int, float]]:
    """The ``limit`` best matching turns at or above ``min_score``, best first, ties by position.

    The cut-off is found by a partition, so only the turns that reach it are sorted.
    """
    np = _numpy()
    matched = np.flatnonzero(scores >= min_score) if min_score > 0 else np.flatnonzero(scores)
    if len(matched) > limit:
        values = scores[matched]
        kth = np.partition(values, len(values) - limit)[len(values) - limit]
        matched = matched[values >= kth]
    order = np.lexsort((matched, -scores[matched]))[:limit]
    best = matched[order]
    return list(zip(best.tolist(), scores[best].tolist(), strict=True))


def _unmatched(scores: Any, limit: int) -> list[tuple[int, float]]:
    """The first ``limit`` positions of turns no term matched, each with score 0."""
    np = _numpy()
    return [(position, 0.0) for position in np.flatnonzero(scores == 0)[:limit].tolist()]


class TurnList(Turns):
    """A list of turns that may carry their postings, built elsewhere (read from a store).

    A recaller indexing the list starts from ``postings`` instead of analysing every turn
    again; the postings must be those of the list's first ``len(postings)`` turns, analysed as
    the lexical recaller analyses them (whoever sets it checks that).
    """

    postings: TurnPostings | None = None


_Asked = tuple[object, ...]
"""What a ranking was asked: the query's terms, the limit and the recaller's settings."""


@dataclass(slots=True, eq=False)
class IndexedTurns:
    """The inverted index of one turn list (or lineage of lists), and how far it has read.

    An index's turn list (``recall.turns.Turns``) is referenced weakly, by its lineage: the
    postings go when the index and the builds' copies of its list have gone, and the turns'
    text is counted where the index is kept. Any other sequence is held here, and its text is
    counted here (``text_held``).
    """

    key: tuple[int, str]
    lineage: weakref.ref[Lineage] | None
    """The lineage of the lists indexed (None: ``held`` is the one list indexed)."""
    held: Sequence[RecallTurn] | None
    last: weakref.ref[Turns] | None = None
    """The list of the lineage last indexed (for inspection)."""
    count: int = 0
    """Turns indexed (the lists' first ``count``)."""
    last_key: str = ""
    """Key of the last turn indexed: checked before the index is reused (a list edited in
    place is indexed anew)."""
    index: TurnPostings = field(default_factory=TurnPostings)
    text_held: int = 0
    """Bytes of the turns a held list keeps alive through this entry."""
    last_ranking: tuple[_Asked, int, list[tuple[int, float]], float | None] | None = None
    """(what was asked, turns ranked, the ranking, its focus): an agent loop builds again and
    again with the same input while its turn is open, and the closed turns, so the ranking,
    are the same."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while the index is extended and ranked (one ranking at a time per list)."""

    @property
    def turns(self) -> Sequence[RecallTurn] | None:
        """The list last indexed (None: gone)."""
        if self.held is not None:
            return self.held
        return self.last() if self.last is not None else None

    def holds(self, turns: Sequence[RecallTurn], lineage: Lineage | None) -> bool:
        """Whether this entry indexes ``turns`` (its lineage's, or this very sequence)."""
        if lineage is not None:
            return self.lineage is not None and self.lineage() is lineage
        return self.held is turns

    def bytes(self) -> int:
        """What the entry keeps alive: its postings, and a held list's turns."""
        return self.index.bytes() + self.text_held

    def extend(self, turns: Sequence[RecallTurn],
               term_counts: Callable[[RecallTurn], Mapping[str, int]], terms: str) -> int:
        """Index ``turns`` up to their end (anew if they changed); the turns to rank.

        Called under ``lock``. A list of a lineage shorter than what is indexed is a build
        holding the list as it was: it ranks that many turns (``TurnPostings.prefix``). A list
        seen for the first time starts from the postings it carries (``TurnList``), if they
        were made the same way; its turns are then not read at all (a list loaded from a store
        makes them when read).
        """
        size = len(turns)
        lineage = lineage_of(turns)
        if isinstance(turns, Turns):
            self.last = weakref.ref(turns)
        carried = getattr(turns, "postings", None)
        if not isinstance(carried, TurnPostings) or len(carried) > size or (
                carried.terms != terms):
            carried = None
        shrunk = lineage is None and self.count > size
        if shrunk or (self.count and self.count <= size
                      and turns[self.count - 1].key != self.last_key):
            self._restart(carried, terms)
        elif not self.count and carried is not None:
            self.index = carried
        if carried is not None and self.index is carried and len(carried) > self.count:
            self.count = len(carried)  # the list's owner extended its postings with the list
            self.last_key = turns[self.count - 1].key
        if self.count < size:
            new = turns[self.count:]
            self.index.add_all(map(term_counts, new))
            if self.held is not None:
                self.text_held += sum(text_bytes(turn.text) + TURN_BYTES for turn in new)
            self.count = size
            self.last_key = turns[size - 1].key
        return size

    def _restart(self, carried: TurnPostings | None, terms: str) -> None:
        self.index = carried if carried is not None else TurnPostings(terms=terms)
        self.count, self.last_key, self.text_held, self.last_ranking = 0, "", 0, None


POSTINGS: GrowingCache[tuple[int, str], IndexedTurns] = GrowingCache(
    "recall.lexical.postings", max_entries=INDEX_LIMIT, share=0.25,
    size=IndexedTurns.bytes)
"""The lexical recallers' postings, one entry per turn list (or lineage) and way of making
terms, shared by every recaller in the process: bounded like every turn index
(``keep_bounded``), its bytes a share of the process-wide index budget (``set_cache_limits``).
Recallers ranking the same history share its postings."""
_POSTINGS_LOCK = threading.Lock()
_GONE: deque[tuple[int, str]] = deque()
"""Keys of entries whose lineage has gone, dropped on the next use (a weak reference's
callback may run anywhere, even inside a change of the cache)."""


def postings_entry(turns: Sequence[RecallTurn], terms: str) -> IndexedTurns:
    """The entry of ``turns`` for terms made the way ``terms`` names (new if none).

    It is made the most recently used. Extend it (``IndexedTurns.extend``) under its lock,
    then hand it back to ``postings_used``.
    """
    lineage = lineage_of(turns)
    key = (id(lineage if lineage is not None else turns), terms)
    with _POSTINGS_LOCK:
        _drop_gone()
        entry = POSTINGS.pop(key, None)  # put back last: the most recently used
        if entry is None or not entry.holds(turns, lineage):
            gone = partial(_note_gone, key)
            entry = IndexedTurns(
                key=key, lineage=None if lineage is None else weakref.ref(lineage, gone),
                held=turns if lineage is None else None, index=TurnPostings(terms=terms))
        POSTINGS[key] = entry
        POSTINGS.trim()
    return entry


def postings_used(entry: IndexedTurns) -> None:
    """Size ``entry`` anew after it grew, and hold the cache to its bounds."""
    with _POSTINGS_LOCK:
        if POSTINGS.get(entry.key) is entry:
            POSTINGS[entry.key] = entry
        keep_bounded(POSTINGS, lambda held: held.count)


def forget_postings(turns: Sequence[RecallTurn]) -> None:
    """Drop the postings of ``turns`` (a session erased: its words go with it)."""
    lineage = lineage_of(turns)
    ident = id(lineage if lineage is not None else turns)
    with _POSTINGS_LOCK:
        for key in [key for key, entry in POSTINGS.items()
                    if key[0] == ident and entry.holds(turns, lineage)]:
            del POSTINGS[key]


def clear_postings() -> None:
    """Forget every recaller's postings (``clear_caches``)."""
    with _POSTINGS_LOCK:
        POSTINGS.clear()
        _GONE.clear()


def _note_gone(key: tuple[int, str], _: object) -> None:
    _GONE.append(key)  # one atomic step: safe from any thread, under any lock


def _drop_gone() -> None:
    """Drop the entries whose lineage has gone (under ``_POSTINGS_LOCK``).

    Counted as evictions: their index was dropped (for room, or its session's), and with it
    any use of them.
    """
    while _GONE:
        key = _GONE.popleft()
        entry = POSTINGS.get(key)
        if entry is not None and entry.lineage is not None and entry.lineage() is None:
            del POSTINGS[key]
            POSTINGS.evictions += 1


register_clear("recall.lexical.postings", POSTINGS, clear_postings)
