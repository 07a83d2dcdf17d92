"""Fusion ranking: similarity dominates, recency adds, the user's entities add.

Two numbers per chunk, for two jobs:

* ``fused`` ranks: ``α·minmax(bm25) + (1−α)·minmax(cosine)`` over the union of each
  retriever's top ``FUSION_DEPTH`` (100) rows, the weighted min–max fusion that measured best
  (docs/research/retrieval-candidates.md; HotpotQA nDCG@10 0.953 here, against 0.942 when the
  min and max are taken over the whole corpus, whose far tail squeezes the dense scale). Rows
  outside the union get 0. Min–max scores are relative to the query: the best chunk always
  gets 1, however poor it is, so they cannot be thresholded.
* ``similarity`` is calibrated, so a fixed threshold means the same for every query and corpus:
  ``α·coverage + (1−α)·dense``, where coverage is the share of the query's idf weight the chunk
  contains and dense is the cosine mapped linearly from ``[floor, ceiling]`` to ``[0, 1]``
  (e5's cosines sit between 0.65 for unrelated and 0.9 for matching text). Lexical only, it is
  the coverage alone.

``RankingWeights`` sets the bonuses the default reranker adds to ``fused``; both are small next to
the similarity's range of 1, so a bonus reorders near-ties and never lifts an unrelated chunk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contextwright.retrieval._numpy import np


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """How a model's cosine becomes a similarity in [0, 1]."""

    floor: float = 0.78
    """Cosine at or below which text is unrelated (0). e5-small on the HotpotQA BEIR pool:
    non-gold pairs p50 0.755, p95 0.791; gold pairs p5 0.838, p50 0.882."""
    ceiling: float = 0.92
    """Cosine at or above which text matches fully (1); gold pairs' p95 is 0.927."""

    def apply(self, cosines: Any) -> Any:
        """Map cosines linearly from ``[floor, ceiling]`` onto ``[0, 1]``, clipped."""
        span = max(self.ceiling - self.floor, 1e-6)
        return np.clip((np.asarray(cosines, dtype=np.float32) - self.floor) / span, 0.0, 1.0)


E5_CALIBRATION = Calibration()


@dataclass(frozen=True, slots=True, kw_only=True)
class RankingWeights:
    """Bonuses the default reranker adds to the fused similarity (whose range is 0–1)."""

    recency: float = 0.1
    """Added in full for the newest candidate, halving every ``half_life_days`` older."""
    half_life_days: float = 180.0
    """Age, relative to the newest candidate, at which the recency bonus halves."""
    entities: float = 0.15
    """Added times the share of the query's entities (numbers, ids, names) the chunk contains."""


def minmax(values: Any) -> Any:
    """Scale to [0, 1] by the array's own min and max (1 for positive values when all are equal)."""
    values = np.asarray(values, dtype=np.float32)
    if values.size == 0:
        return values
    low, high = float(values.min()), float(values.max())
    if high - low <= 1e-12:  # nothing to tell apart: a match is a full match
        return (values > 0).astype(np.float32)
    return (values - low) / (high - low)


FUSION_DEPTH = 100


def weighted_fusion(lexical: Any, dense: Any, alpha: float, depth: int = FUSION_DEPTH) -> Any:
    """``α·minmax(lexical) + (1−α)·minmax(dense)`` over the union of both top-``depth`` lists."""
    lexical = np.asarray(lexical, dtype=np.float32)
    dense = np.asarray(dense, dtype=np.float32)
    if len(lexical) > depth:
        pool = np.union1d(np.argpartition(-lexical, depth - 1)[:depth],
                          np.argpartition(-dense, depth - 1)[:depth])
    else:
        pool = np.arange(len(lexical))
    fused = np.zeros(len(lexical), dtype=np.float32)
    fused[pool] = alpha * minmax(lexical[pool]) + (1.0 - alpha) * minmax(dense[pool])
    return fused


def recency_bonus(times: list[datetime | None], weights: RankingWeights) -> list[float]:
    """Per candidate: the full bonus for the newest, halving per half-life of age; 0 if undated."""
    dated = [t for t in times if t is not None]
    if not dated or weights.recency == 0:
        return [0.0] * len(times)
    newest = max(dated)
    half_life = max(weights.half_life_days, 1e-6) * 86_400.0
    return [0.0 if t is None
            else weights.recency * math.pow(0.5, (newest - t).total_seconds() / half_life)
            for t in times]


def entity_bonus(text: str, entities: frozenset[str], weights: RankingWeights) -> float:
    """The entity weight times the share of ``entities`` that occur in ``text``."""
    if not entities or weights.entities == 0:
        return 0.0
    lowered = text.lower()
    hits = sum(1 for entity in entities if entity in lowered)
    return weights.entities * hits / len(entities)
