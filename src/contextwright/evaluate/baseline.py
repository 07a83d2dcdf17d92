"""Baselines recomputed with the same tokenizer as contextwright.

``recency`` keeps the most recent whole messages that fit (what a plain chat loop does);
``in_order`` keeps whole pieces in the given order until the next does not fit (what packing
retrieved text without reranking does). Both stop at the first piece that does not fit, so
they never skip ahead to a cheaper one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def recency(items: Sequence[T], budget: int, cost: Callable[[T], int]) -> list[T]:
    """The longest suffix of ``items`` whose total cost fits ``budget``, oldest first."""
    kept: list[T] = []
    used = 0
    for item in reversed(items):
        used += cost(item)
        if used > budget:
            break
        kept.append(item)
    kept.reverse()
    return kept


def in_order(items: Sequence[T], budget: int, cost: Callable[[T], int]) -> list[T]:
    """The longest prefix of ``items`` whose total cost fits ``budget``."""
    kept: list[T] = []
    used = 0
    for item in items:
        used += cost(item)
        if used > budget:
            break
        kept.append(item)
    return kept
