"""The retrieval step alone: nDCG@10 and Recall@10 on a BEIR-style pool.

The pool is laid out like ``hotpotqa-dev/beir_pool``: ``corpus.jsonl``, ``queries.jsonl``,
``qrels/test.tsv``.

A ``Ranker`` is the hook: anything that indexes a corpus and ranks its ids for a query. Queries
with no relevant document in the corpus are skipped, as BEIR and pytrec_eval do. Which ranker
contextwright ships is decided in ``contextwright.retrieval``; ``library_ranker`` wraps its
``Retriever`` (lexical BM25 only: dense encoding of a corpus takes minutes on 2 cores, and the
``embeddings`` extra is optional; pass another ``RankerFactory`` to measure dense or hybrid).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from contextwright.errors import DatasetError
from contextwright.evaluate._files import get, line_of, read_jsonl_lines, require_files
from contextwright.evaluate.metrics import ndcg_at_k, recall_at_k
from contextwright.retrieval import Embedder, Retriever, SourceDocument

LAYOUT = "../shared/data/hotpotqa-dev/beir_pool"
FILES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")
K = 10
PASSAGES_PER_DOC = 4


class Ranker(Protocol):
    """Ranks the ids of an indexed corpus for a query, best first."""

    def rank(self, query: str, k: int) -> Sequence[str]:
        """The ``k`` best document ids for ``query``."""
        ...


RankerFactory = Callable[[Mapping[str, str]], Ranker]
"""Builds a ``Ranker`` over a corpus given as ``{doc id: text}``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BeirPool:
    """A loaded BEIR-style pool."""

    corpus: Mapping[str, str]
    """Document text (title, a blank line, text) by id."""
    queries: Mapping[str, str]
    """Query text by id."""
    qrels: Mapping[str, Mapping[str, float]]
    """Relevance of documents by query id, then document id."""


def with_queries(pool: BeirPool, query_ids: Iterable[str]) -> BeirPool:
    """``pool`` with only the queries of ``query_ids``.

    The corpus stays whole, so each query is ranked as it is in the full pool.
    """
    wanted = set(query_ids)
    return BeirPool(corpus=pool.corpus,
                    queries={qid: text for qid, text in pool.queries.items() if qid in wanted},
                    qrels=pool.qrels)


def load_beir(folder: Path) -> BeirPool:
    """Load a folder laid out like ``beir_pool``."""
    require_files(folder, FILES, LAYOUT)
    corpus = {}
    for line, row in read_jsonl_lines(folder / FILES[0]):
        where = line_of(folder / FILES[0], line)
        title = row.get("title") or ""
        text = get(row, "text", str, where)
        corpus[get(row, "_id", str, where)] = f"{title}\n\n{text}" if title else text
    queries = {}
    for line, row in read_jsonl_lines(folder / FILES[1]):
        where = line_of(folder / FILES[1], line)
        queries[get(row, "_id", str, where)] = get(row, "text", str, where)
    return BeirPool(corpus=corpus, queries=queries, qrels=_qrels(folder / FILES[2]))


def _qrels(path: Path) -> dict[str, dict[str, float]]:
    try:
        # utf-8-sig: a byte order mark (a file saved by Notepad) is no part of the header.
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle, delimiter="\t")
            return _parse_qrels(path, ((reader.line_num, row) for row in reader))
    except UnicodeDecodeError:
        raise DatasetError(f"{path} is not valid UTF-8") from None


def _parse_qrels(path: Path, rows: Iterable[tuple[int, list[str]]]
                 ) -> dict[str, dict[str, float]]:
    """The relevance of each (query, document); ``rows`` come with their file line numbers.

    Blank lines are skipped, as in the JSON Lines files beside it.
    """
    qrels: dict[str, dict[str, float]] = {}
    first = True
    for number, row in rows:
        if not row:
            continue
        if first and row[:1] == ["query-id"]:
            first = False
            continue
        first = False
        if len(row) != 3:
            raise DatasetError(f"{path}:{number}: expected query-id, corpus-id, score")
        try:
            score = float(row[2])
        except ValueError:
            raise DatasetError(f"{path}:{number}: score is not a number") from None
        if not math.isfinite(score):
            raise DatasetError(f"{path}:{number}: score is not a finite number")
        qrels.setdefault(row[0], {})[row[1]] = score
    return qrels


def evaluate_ranker(pool: BeirPool, make_ranker: RankerFactory, k: int = K
                    ) -> dict[str, float | int]:
    """Mean nDCG@k and Recall@k over the queries that have a relevant document in the pool."""
    ranker = make_ranker(pool.corpus)
    ndcg, recall = [], []
    for query_id, relevance in sorted(pool.qrels.items()):
        judged = {doc: gain for doc, gain in relevance.items() if doc in pool.corpus and gain > 0}
        if not judged or query_id not in pool.queries:
            continue
        ranking = list(ranker.rank(pool.queries[query_id], k))
        ndcg.append(ndcg_at_k(ranking, judged, k))
        recall.append(recall_at_k(ranking, judged, k))
    count = len(ndcg)
    return {f"ndcg@{k}": sum(ndcg) / count if count else 0.0,
            f"recall@{k}": sum(recall) / count if count else 0.0, "queries": count}


class RetrieverRanker:
    """A ``Ranker`` over ``contextwright.retrieval.Retriever``: documents by their best passage."""

    def __init__(self, corpus: Mapping[str, str], retriever: Retriever) -> None:
        retriever.add(SourceDocument(id=doc_id, text=text) for doc_id, text in corpus.items())
        self.retriever = retriever

    def rank(self, query: str, k: int) -> Sequence[str]:
        """The ``k`` best document ids; no similarity threshold, so a weak match still ranks."""
        # Passages are chunks merged per document; a document can give several, so ask for
        # more than k and keep each document's first (best) appearance.
        passages = self.retriever.search(query, top_k=PASSAGES_PER_DOC * k,
                                         similarity_threshold=0.0,
                                         rerank_top_k=PASSAGES_PER_DOC * k)
        return list(dict.fromkeys(p.doc_id for p in passages))[:k]


def library_ranker(embedder: Embedder | None = None, alpha: float = 0.5) -> RankerFactory:
    """The library's retriever as a ``RankerFactory``: lexical, or fused with ``embedder``.

    ``alpha`` is the lexical weight when there is an embedder (1: BM25 only, 0: dense only).
    """
    return lambda corpus: RetrieverRanker(corpus, Retriever(embedder=embedder, alpha=alpha))


def ranker_label(embedder: Embedder | None, alpha: float = 0.5) -> str:
    """What ``library_ranker(embedder, alpha)`` is, for a result."""
    if embedder is None or alpha >= 1.0:
        return "contextwright.retrieval.Retriever, BM25 only"
    if alpha <= 0.0:
        return f"contextwright.retrieval.Retriever, dense only ({embedder.name})"
    return f"contextwright.retrieval.Retriever, hybrid α={alpha:g} (BM25 + {embedder.name})"
