"""Reranking: the ``Reranker`` protocol and the default fusion reranker.

The retriever hands the reranker its merged candidates (already above the similarity threshold)
and keeps what the reranker returns. The default adds the recency and entity bonuses of
``RankingWeights`` to the fused similarity; a cross-encoder would score (query, passage) pairs
instead and plug in the same way. Outdated versions, when kept at all, always rank after current
text (an old refund policy put first is the one the model believes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

from contextwright.core.versions import parse_time
from contextwright.retrieval.fusion import (
    RankingWeights,
    entity_bonus,
    recency_bonus,
)
from contextwright.retrieval.text import query_entities


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievedChunk:
    """A passage the retriever returns: one chunk, or adjacent chunks of a document merged."""

    doc_id: str
    """Id of the document."""
    title: str | None
    """Document title (label), if it has one."""
    text: str
    """The passage text, exactly ``document.text[start:end]``."""
    start: int
    """Character offset in the document."""
    end: int
    """Character offset just past the passage."""
    paragraph_start: int
    """First paragraph covered (0-based)."""
    paragraph_end: int
    """Last paragraph covered (0-based)."""
    chunks: tuple[int, ...]
    """Indexes of the document's chunks merged into this passage."""
    timestamp: str | None
    """The document's version time."""
    version: int | None
    """The document's version number."""
    similarity: float
    """Calibrated similarity in [0, 1] (the best of the merged chunks); what the threshold uses."""
    fused: float
    """Fused ranking similarity (min–max weighted; relative to the query's other results)."""
    lexical: float
    """Coverage of the query's idf weight, in [0, 1]."""
    dense: float | None
    """Cosine similarity of the query and passage vectors (None without an embedder)."""
    score: float = 0.0
    """Final rank score the reranker gave (higher first)."""
    outdated: bool = False
    """A newer version of this document is indexed (kept only when asked for)."""

    @property
    def label(self) -> str:
        """Source label: title or id, paragraph (1-based) and version, e.g. ``policy.md §2``."""
        first, last = self.paragraph_start + 1, self.paragraph_end + 1
        where = f"§{first}" if first == last else f"§{first}–{last}"
        name = " ".join((self.title or self.doc_id).split())
        parts = [name, where]
        if self.version is not None:
            parts.append(f"v{self.version}")
        if self.timestamp:
            parts.append(self.timestamp)
        if self.outdated:
            parts.append("OUTDATED")
        return " ".join(parts)


@runtime_checkable
class Reranker(Protocol):
    """Orders candidate passages for a query and keeps the best ``limit``."""

    def rerank(self, query: str, passages: Sequence[RetrievedChunk], *, limit: int
               ) -> list[RetrievedChunk]:
        """The best ``limit`` passages, best first, each with its ``score`` set."""
        ...


class FusionReranker:
    """Fused similarity + recency bonus + entity bonus. Stateless."""

    def __init__(self, weights: RankingWeights | None = None) -> None:
        self.weights = weights or RankingWeights()

    def rerank(self, query: str, passages: Sequence[RetrievedChunk], *, limit: int
               ) -> list[RetrievedChunk]:
        """Score and sort; outdated passages after every current one; ties by document order."""
        entities = query_entities(query)
        times = [parse_time(p.timestamp, "timestamp") for p in passages]
        recency = recency_bonus(times, self.weights)
        scored = [
            replace(p, score=p.fused + bonus + entity_bonus(p.text, entities, self.weights))
            for p, bonus in zip(passages, recency, strict=True)
        ]
        scored.sort(key=lambda p: (p.outdated, -p.score, p.doc_id, p.start))
        return scored[: max(limit, 0)]
