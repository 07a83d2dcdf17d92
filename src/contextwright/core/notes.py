"""What a build's sources say about an item for the report only, kept apart from the item.

A recalled turn is recalled for each input with another score. Put into the item, the score
would make a new item (and a new rendering, a new cache entry) for every input that recalls the
same turn, though the text the model sees is the same. Sources note such per-build facts here
instead, keyed by item key; the builder opens one notebook per build (``build_notes``) and the
report reads it. Outside a build, noting does nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

_RECALL_SCORES: ContextVar[dict[str, float] | None] = ContextVar(
    "contextwright_recall_scores", default=None)


@contextmanager
def build_notes() -> Iterator[Mapping[str, float]]:
    """A fresh notebook for one build (this thread or task): recall scores by item key."""
    scores: dict[str, float] = {}
    token = _RECALL_SCORES.set(scores)
    try:
        yield scores
    finally:
        _RECALL_SCORES.reset(token)


def note_recall_score(key: str, score: float) -> None:
    """Note that the item ``key`` opens a turn recalled at ``score`` in the current build."""
    scores = _RECALL_SCORES.get()
    if scores is not None:
        scores[key] = score


def with_recall_score(reason: str, scores: Mapping[str, float], key: str) -> str:
    """``reason`` with the recall score noted for ``key`` in this build, when there is one."""
    score = scores.get(key)
    return reason if score is None else f"{reason}; score {score:.2f}"
