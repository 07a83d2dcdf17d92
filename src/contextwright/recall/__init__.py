"""Recall: older turns of a conversation brought back when they are relevant to the input.

One seam (``RecallTurn``, ``TurnRecaller``), one incremental turn index (``TurnIndex``) fed by
two adapters (a request's history: ``turn_index``; a session's stored messages:
``manager.recall``), one interleaving step (``interleave``) and the recallers: the
dependency-free ``LexicalTurnRecaller`` (BM25, ``recall.bm25``), and the dense ones, which need
numpy and are imported only when asked for: ``FusedTurnRecaller`` (the lexical ranking and
e5's fused by rank) and ``HybridTurnRecaller`` (BM25 and cosine fused by weight).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contextwright.recall.history import RECALLED_UNITS, clear_recall_caches, turn_index
from contextwright.recall.interleave import Interleaving, Segment, interleave
from contextwright.recall.lexical import LexicalTurnRecaller, RecallExpansion, with_neighbours
from contextwright.recall.turns import RecallTurn, TurnIndex, TurnRecaller, keep_bounded, turn_text

if TYPE_CHECKING:
    from contextwright.recall.hybrid import FusedTurnRecaller, HybridTurnRecaller

__all__ = [
    "RECALLED_UNITS",
    "FusedTurnRecaller",
    "HybridTurnRecaller",
    "Interleaving",
    "LexicalTurnRecaller",
    "RecallExpansion",
    "RecallTurn",
    "Segment",
    "TurnIndex",
    "TurnRecaller",
    "clear_recall_caches",
    "interleave",
    "keep_bounded",
    "turn_index",
    "turn_text",
    "with_neighbours",
]


def __getattr__(name: str) -> Any:
    if name in ("FusedTurnRecaller", "HybridTurnRecaller"):  # numpy: only when asked for
        from contextwright.recall import hybrid

        return getattr(hybrid, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
