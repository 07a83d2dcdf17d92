"""Relevance-selected history, now ``contextwright.recall`` (names kept here).

The same objects as ``contextwright.recall``'s, so code written against this module keeps
working: ``RecallTurn``, ``TurnRecaller``, ``TurnIndex``, ``RecallExpansion``,
``LexicalTurnRecaller`` and the turn index of a request's history (``turn_index``).
"""

from contextwright.analysis import light_stem as stem
from contextwright.recall.history import RECALLED_UNITS, clear_recall_caches, turn_index
from contextwright.recall.lexical import (
    LexicalTurnRecaller,
    RecallExpansion,
    _term_counts,
    _terms,
    with_neighbours,
)
from contextwright.recall.turns import RecallTurn, TurnIndex, TurnRecaller, keep_bounded, turn_text

__all__ = [
    "RECALLED_UNITS",
    "LexicalTurnRecaller",
    "RecallExpansion",
    "RecallTurn",
    "TurnIndex",
    "TurnRecaller",
    "_term_counts",
    "_terms",
    "clear_recall_caches",
    "keep_bounded",
    "stem",
    "turn_index",
    "turn_text",
    "with_neighbours",
]
