"""An incremental BM25 index (Lucene variant, the scoring bm25s uses by default).

bm25s builds a static index: adding one document means indexing everything again (0.7 s at
10,000 chunks), which a session that grows by one turn per call cannot afford. This index keeps
postings per term in growable arrays, so adding a document costs only its own terms, and scores
a query with numpy over the postings of the query's terms only. Scores equal bm25s's
``method="lucene"`` scores (a test checks them against bm25s). Needs numpy.

A row can be removed (a replaced document's chunk): its postings go at once, so document
frequencies, the row count and the mean length are those of the rows still indexed, and scores
equal a fresh index's over them. Its row number stays taken until ``compact`` renumbers.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from typing import Any

from contextwright.retrieval._numpy import np
from contextwright.retrieval.text import is_cjk as _is_cjk

K1 = 1.5
B = 0.75


class Bm25Index:
    """Documents as token lists; ``add`` appends, ``scores`` ranks them for a query.

    Not thread-safe on its own: the retriever and the recaller serialise access.
    """

    def __init__(self, *, k1: float = K1, b: float = B) -> None:
        self.k1, self.b = k1, b
        self._postings: dict[str, tuple[array[int], array[float]]] = {}
        """Per term, the rows that contain it (ascending) and its frequency in each."""
        self._lengths: array[float] = array("f")
        self._live = bytearray()
        """Per row, 1 while indexed, 0 once removed."""
        self._live_rows = 0
        self._total_length = 0.0
        """Summed length of the live rows (whole numbers: float sums stay exact)."""

    def __len__(self) -> int:
        """Row numbers handed out, removed rows included: the length of ``scores``."""
        return len(self._lengths)

    @property
    def live_rows(self) -> int:
        """Rows indexed and not removed: the N of the statistics."""
        return self._live_rows

    def add(self, tokens: Sequence[str]) -> int:
        """Index one document; returns its row number (0, 1, 2, ...)."""
        row = len(self._lengths)
        for term, frequency in Counter(tokens).items():
            postings = self._postings.get(term)
            if postings is None:
                postings = self._postings[term] = (array("i"), array("f"))
            postings[0].append(row)
            postings[1].append(float(frequency))
        self._lengths.append(float(len(tokens)))
        self._live.append(1)
        self._live_rows += 1
        self._total_length += len(tokens)
        return row

    def remove(self, row: int, tokens: Sequence[str]) -> None:
        """Take ``row`` out of the index; ``tokens`` are the ones it was added with.

        Raises ValueError, changing nothing, when the row is unknown, already removed, or was
        added with other tokens (its postings could not be found).
        """
        terms = list(dict.fromkeys(tokens))
        places = [place for term in terms if (place := self._place(term, row)) is not None]
        if (not 0 <= row < len(self._lengths) or not self._live[row]
                or self._lengths[row] != len(tokens) or len(places) != len(terms)):
            raise ValueError(f"row {row} is not indexed with these tokens")
        for term, place in zip(terms, places, strict=True):
            rows, frequencies = self._postings[term]
            del rows[place], frequencies[place]
            if not rows:
                del self._postings[term]  # an unseen term again, for ``coverage``
        self._live[row] = 0
        self._live_rows -= 1
        self._total_length -= len(tokens)

    def _place(self, term: str, row: int) -> int | None:
        """Where ``row`` sits in ``term``'s postings, or None."""
        postings = self._postings.get(term)
        if postings is None:
            return None
        place = bisect_left(postings[0], row)
        return place if place < len(postings[0]) and postings[0][place] == row else None

    def compact(self) -> Any:
        """Renumber the live rows 0, 1, 2, ... in their order, forgetting removed rows.

        Returns the old row number of each new row (an int64 array): new row ``i`` was row
        ``kept[i]``. Scores do not change, only which row holds them.
        """
        live = np.frombuffer(bytes(self._live), dtype=np.uint8).astype(bool)
        kept = np.flatnonzero(live)
        renumbered = np.cumsum(live, dtype=np.int64) - 1  # old row -> new row, for live rows
        for rows, _ in self._postings.values():
            moved = renumbered[np.frombuffer(rows, dtype=np.int32)].astype(np.int32)
            del rows[:]
            rows.frombytes(moved.tobytes())  # ascending still: the renumbering keeps order
        lengths = np.frombuffer(self._lengths, dtype=np.float32)[kept]
        self._lengths = array("f", lengths.tobytes())
        self._live = bytearray(b"\x01" * len(kept))
        return kept

    def idf(self, term: str) -> float:
        """Lucene idf: ``ln(1 + (N − df + 0.5) / (df + 0.5))``; 0 for an unknown term."""
        postings = self._postings.get(term)
        if postings is None:
            return 0.0
        df = len(postings[0])
        return math.log(1.0 + (self._live_rows - df + 0.5) / (df + 0.5))

    def scores(self, query_tokens: Sequence[str]) -> Any:
        """BM25 score of every row for the query (float32 array of ``len(self)``)."""
        total = np.zeros(len(self._lengths), dtype=np.float32)
        if not self._live_rows:
            return total
        lengths = np.frombuffer(self._lengths, dtype=np.float32)
        average = self._total_length / self._live_rows
        norm = self.k1 * (1.0 - self.b + self.b * lengths / max(average, 1e-9))
        # dict.fromkeys, not set: terms are summed in query order, so float32 scores are the
        # same in every process (a set's order follows the string hash seed).
        for term in dict.fromkeys(query_tokens):
            postings = self._postings.get(term)
            if postings is None:
                continue
            rows = np.frombuffer(postings[0], dtype=np.int32)
            tf = np.frombuffer(postings[1], dtype=np.float32)
            total[rows] += self.idf(term) * tf / (tf + norm[rows])
        return total

    def coverage(self, query_tokens: Sequence[str]) -> Any:
        """Share of the query's idf weight each row contains, in [0, 1] (a calibrated score).

        0.35 means the row holds query terms that carry 35 % of the query's information
        weight, whatever the corpus size — unlike a raw BM25 score, it can be thresholded.
        """
        # Summed in float64 like ``whole`` below, so a row holding every term is exactly 1 (a
        # float32 sum came out a hair under 1, and a threshold of 1.0 dropped a full match).
        covered = np.zeros(len(self._lengths), dtype=np.float64)
        weights = {term: self.idf(term) for term in dict.fromkeys(query_tokens)}
        seen = [w for term, w in weights.items() if term in self._postings]
        if not seen:
            return covered.astype(np.float32)
        # A term the corpus has never seen still belongs to the query, but it is often a
        # question word ("what", "怎么"): weigh it like an average term of the query, not as
        # the rarest term of the corpus, which would sink every query that asks politely.
        # An unseen CJK bigram is usually one that straddles two words (我上周买 → 周买): the
        # tokenizer's artefact, not part of the question, so it is not counted at all.
        unseen = [term for term in weights if term not in self._postings and not _is_cjk(term)]
        whole = sum(seen) * (1.0 + len(unseen) / len(seen))
        for term, weight in weights.items():
            postings = self._postings.get(term)
            if postings is not None:
                covered[np.frombuffer(postings[0], dtype=np.int32)] += weight
        return np.clip(covered / whole, 0.0, 1.0).astype(np.float32)
