"""The recall BM25 engine, now ``contextwright.recall.bm25`` (this name kept for imports)."""

from contextwright.recall.bm25 import Bm25Params, TurnPostings, common_above

__all__ = ["Bm25Params", "TurnPostings", "common_above"]
