"""The dense recallers and the recall seam, now in ``contextwright.recall`` (names kept here).

The same objects as ``contextwright.recall``'s: ``contextwright.retrieval.RecallTurn is
contextwright.RecallTurn``.
"""

from contextwright.recall.hybrid import FusedTurnRecaller, HybridTurnRecaller
from contextwright.recall.turns import RecallTurn, TurnRecaller

__all__ = ["FusedTurnRecaller", "HybridTurnRecaller", "RecallTurn", "TurnRecaller"]
