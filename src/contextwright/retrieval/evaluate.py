"""nDCG@k of the retrieval step on a BEIR-style folder, for the quality and speed benches.

The folder holds ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv``.

Each corpus document is indexed whole (title line, then text) in a ``Retriever`` and every query
searched with its fusion ranking; queries without a relevant document in the corpus are skipped,
as BEIR and pytrec_eval do. Reads files only; deterministic for a given embedder.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Literal

from contextwright.errors import InvalidInputError
from contextwright.retrieval.chunking import SourceDocument
from contextwright.retrieval.dense import Embedder
from contextwright.retrieval.fusion import RankingWeights
from contextwright.retrieval.rerank import FusionReranker
from contextwright.retrieval.retriever import Retriever

Mode = Literal["lexical", "dense", "hybrid"]


def beir_ndcg(folder: str | Path, *, mode: Mode = "lexical", embedder: Embedder | None = None,
              alpha: float = 0.5, k: int = 10, bonuses: bool = False) -> float:
    """Mean nDCG@k over the queries with a relevant document in the corpus.

    ``mode``: ``lexical`` (BM25), ``dense`` (cosine only) or ``hybrid`` (α-weighted fusion);
    the last two need ``embedder``. ``bonuses`` adds the default reranker's entity bonus
    (there are no timestamps here), otherwise the fused similarity alone ranks.
    """
    root = Path(folder)
    if mode != "lexical" and embedder is None:
        raise InvalidInputError("dense and hybrid modes need an embedder")
    weights = RankingWeights() if bonuses else RankingWeights(recency=0.0, entities=0.0)
    retriever = Retriever(embedder=embedder if mode != "lexical" else None, supersede="id",
                          chunk_size=100_000, reranker=FusionReranker(weights),
                          alpha={"lexical": 1.0, "dense": 0.0, "hybrid": alpha}[mode])
    retriever.add(_corpus(root / "corpus.jsonl"))
    qrels = _qrels(root / "qrels" / "test.tsv")
    scores = []
    for query_id, text in _queries(root / "queries.jsonl"):
        relevant = qrels.get(query_id, {})
        if not relevant:
            continue
        found = retriever.search(text, top_k=k, similarity_threshold=0.0, rerank_top_k=k)
        scores.append(ndcg([p.doc_id for p in found], relevant, k))
    return sum(scores) / len(scores) if scores else 0.0


def ndcg(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    """nDCG@k with graded relevance (log2 discount)."""
    gain = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    best = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return gain / best if best > 0 else 0.0


def _corpus(path: Path) -> list[SourceDocument]:
    documents = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            title = row.get("title") or ""
            text = f"{title}\n{row['text']}" if title else row["text"]
            documents.append(SourceDocument(id=row["_id"], text=text, title=title or None))
    return documents


def _queries(path: Path) -> list[tuple[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return [(row["_id"], row["text"]) for row in map(json.loads, handle)]


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return qrels
