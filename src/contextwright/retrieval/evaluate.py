"""Ranking quality of retrieval and turn recall, for the quality and speed benches.

``beir_ndcg``: nDCG@k on a BEIR-style folder (``corpus.jsonl``, ``queries.jsonl``,
``qrels/test.tsv``). ``locomo_recall_quality``: nDCG@k and recall@k of ``HybridTurnRecaller`` on
a LoCoMo-style folder (``locomo-dev.json``, ``qa_index.jsonl``), questions of categories 1–4.

Each corpus document is indexed whole (title line, then text) in a ``Retriever`` and every query
searched with its fusion ranking; queries without a relevant document in the corpus are skipped,
as BEIR and pytrec_eval do. Reads files only; deterministic for a given embedder.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from contextwright.errors import InvalidInputError
from contextwright.evaluate.metrics import ndcg_at_k
from contextwright.recall.hybrid import HybridTurnRecaller
from contextwright.recall.turns import RecallTurn
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
        scores.append(ndcg_at_k([p.doc_id for p in found], relevant, k))
    return sum(scores) / len(scores) if scores else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallQuality:
    """How well turn recall finds the evidence turns of LoCoMo questions."""

    ndcg: float
    """Mean nDCG@k of the ranking (threshold 0)."""
    recall: float
    """Mean share of a question's evidence turns in the top k (threshold 0)."""
    evidence_kept: float
    """Share of evidence turns in the top k that also pass the recaller's threshold."""
    questions: int
    """Questions scored."""


def locomo_recall_quality(folder: str | Path, *, embedder: Embedder | None = None,
                          alpha: float = 0.3, threshold: float | None = None, k: int = 10
                          ) -> RecallQuality:
    """Rank each conversation's turns (``"speaker: text"``) for each question of category 1–4.

    ``threshold`` (default: the recaller's) only decides ``evidence_kept``; the ranking
    metrics are computed without one.
    """
    root = Path(folder)
    if threshold is None:
        threshold = HybridTurnRecaller(embedder).threshold
    conversations = {sample["sample_id"]: _locomo_turns(sample["conversation"]) for sample in
                     json.loads((root / "locomo-dev.json").read_text("utf-8"))}
    recaller = HybridTurnRecaller(embedder, alpha=alpha, threshold=0.0)
    ndcgs, recalls, found, kept = [], [], 0, 0
    with (root / "qa_index.jsonl").open(encoding="utf-8") as handle:
        for row in map(json.loads, handle):
            evidence = set(row["evidence"])
            if row["category"] not in (1, 2, 3, 4) or not evidence:
                continue
            turns = conversations[row["sample_id"]]
            ranked = recaller.rank(row["question"], turns, limit=k)
            top = [(turns[i].key, score) for i, score in ranked]
            ndcgs.append(ndcg_at_k([key for key, _ in top], dict.fromkeys(evidence, 1), k))
            hits = [(key, score) for key, score in top if key in evidence]
            recalls.append(len(hits) / len(evidence))
            found += len(hits)
            kept += sum(1 for key, _ in hits if _passes(recaller, row["question"], turns, key,
                                                        threshold))
    return RecallQuality(ndcg=_mean(ndcgs), recall=_mean(recalls),
                         evidence_kept=kept / found if found else 0.0, questions=len(ndcgs))


def _passes(recaller: HybridTurnRecaller, query: str, turns: list[RecallTurn], key: str,
            threshold: float) -> bool:
    """Whether the turn ``key`` reaches ``threshold`` (a recaller with that threshold)."""
    strict = HybridTurnRecaller(recaller.embedder, alpha=recaller.alpha, threshold=threshold)
    strict._sessions = recaller._sessions  # same indexes: nothing is embedded twice
    return any(turns[i].key == key for i, _ in strict.rank(query, turns, limit=len(turns)))


def _locomo_turns(conversation: dict[str, object]) -> list[RecallTurn]:
    turns: list[RecallTurn] = []
    for n in range(1, 100):
        session = conversation.get(f"session_{n}")
        if not isinstance(session, list):
            continue
        for turn in session:
            turns.append(RecallTurn(index=len(turns), key=turn["dia_id"],
                                    text=f"{turn['speaker']}: {turn['text']}"))
    return turns


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


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
