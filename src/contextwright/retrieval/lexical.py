"""An incremental BM25 index (Lucene variant, the scoring bm25s uses by default).

bm25s builds a static index: adding one document means indexing everything again (0.7 s at
10,000 chunks), which a session that grows by one turn per call cannot afford. This index keeps
postings per term in growable arrays, so adding a document costs only its own terms, and scores
a query with numpy over the postings of the query's terms only. Scores equal bm25s's
``method="lucene"`` scores (a test checks them against bm25s). Needs numpy.
"""

from __future__ import annotations

import math
from array import array
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
        self._lengths: array[float] = array("f")
        self._total_length = 0.0

    def __len__(self) -> int:
        return len(self._lengths)

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
        self._total_length += len(tokens)
        return row

    def idf(self, term: str) -> float:
        """Lucene idf: ``ln(1 + (N − df + 0.5) / (df + 0.5))``; 0 for an unknown term."""
        postings = self._postings.get(term)
        if postings is None:
            return 0.0
        df = len(postings[0])
        return math.log(1.0 + (len(self._lengths) - df + 0.5) / (df + 0.5))

    def scores(self, query_tokens: Sequence[str]) -> Any:
        """BM25 score of every row for the query (float32 array of ``len(self)``)."""
        total = np.zeros(len(self._lengths), dtype=np.float32)
        if not self._lengths:
            return total
        lengths = np.frombuffer(self._lengths, dtype=np.float32)
        average = self._total_length / len(self._lengths)
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
        covered = np.zeros(len(self._lengths), dtype=np.float32)
        weights = {term: self.idf(term) for term in dict.fromkeys(query_tokens)}
        seen = [w for term, w in weights.items() if term in self._postings]
        if not seen:
            return covered
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
        return covered / whole
