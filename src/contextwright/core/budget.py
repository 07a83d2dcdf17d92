"""Budget allocation: weighted shares, clipped, then water-filled to the sources that need more.

The promise, tested as a property: every grant is at most what its source needs and at most its
``max_tokens``; grants never exceed the pool; a source gets less than it needs only when the pool is
exhausted; a source never fills a share it does not need (the rest flows on, by priority). Pure and
deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from contextwright.core.caches import register_cache
from contextwright.errors import PlanError


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """What one cuttable source asks of the pool."""

    name: str
    """Source name."""
    weight: float
    """Relative weight in the plan."""
    need: int
    """Tokens the source could use (already capped at its max and the pool)."""
    max_tokens: int | None = None
    """Hard upper bound."""
    min_tokens: int = 0
    """Floor of the share, when the source needs it."""
    rank: tuple[int, int] = (0, 0)
    """Priority for leftovers: (layer, plan position); lower goes first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Allocation:
    """The share a source was entitled to and the tokens it was granted."""

    share: int
    """``weight / Σweights × available``, clipped by max/min."""
    grant: int
    """Tokens granted after redistribution."""


def weighted_share(claim: Claim, total_weight: float, available: int) -> int:
    """The clipped weighted share of ``available`` for one claim."""
    share = _floor_share(claim.weight, total_weight, available) if total_weight > 0 else 0
    share = max(share, claim.min_tokens)
    if claim.max_tokens is not None:
        share = min(share, claim.max_tokens)
    return share


def _floor_share(weight: float, total_weight: float, available: int) -> int:
    # Weights mean what they say in decimal (0.15 is 3/20, not the binary float just below it),
    # and the floor must be exact: in floats 0.12 / 0.32 * 8 lands on the wrong side of 3. The
    # float result decides unless it is within rounding error of an integer.
    approximate = weight / total_weight * available
    nearest = round(approximate)
    if abs(approximate - nearest) > 1e-6 * max(1.0, approximate):
        return math.floor(approximate)
    return math.floor(_decimal(weight) * available / _decimal(total_weight))


@lru_cache(maxsize=1024)
def _decimal(value: float) -> Fraction:
    return Fraction(repr(value))


def allocate_budget(pool: int, claims: Sequence[Claim], total_weight: float,
                    available: int) -> dict[str, Allocation]:
    """Grant each claim tokens from ``pool`` (what is left after the parts never cut).

    ``total_weight`` includes the weights of the never-cut sources, so shares are fractions of the
    whole ``available`` budget as the plan states them. Weights that are not finite, or whose sum
    is not (a plan made in code is not checked as a loaded one is), are a ``PlanError``.
    """
    if not math.isfinite(total_weight) or not all(math.isfinite(c.weight) for c in claims):
        raise PlanError("the weights of the plan's sources must be finite, and so must their sum")
    shares = {c.name: weighted_share(c, total_weight, available) for c in claims}
    grants = {c.name: min(c.need, shares[c.name]) for c in claims}
    granted = sum(grants.values())
    if granted > pool:
        floors = {c.name: min(grants[c.name], c.min_tokens) for c in claims}
        grants = _scale_down(grants, floors, pool)
    leftover = pool - sum(grants.values())
    for claim in sorted(claims, key=lambda c: c.rank):
        if leftover <= 0:
            break
        want = claim.need if claim.max_tokens is None else min(claim.need, claim.max_tokens)
        extra = min(max(want - grants[claim.name], 0), leftover)
        grants[claim.name] += extra
        leftover -= extra
    return {c.name: Allocation(share=shares[c.name], grant=grants[c.name]) for c in claims}


def _scale_down(grants: dict[str, int], floors: dict[str, int], pool: int) -> dict[str, int]:
    """Shrink grants to fit ``pool`` (the parts never cut took more than their shares).

    Floors (``min_tokens``) are kept first, shrunk proportionally only if they alone do not
    fit; what is above the floors shrinks proportionally in what is left.
    """
    if pool <= 0:
        return dict.fromkeys(grants, 0)
    floor_total = sum(floors.values())
    if floor_total >= pool:
        return _proportional(floors, pool)
    above = {name: grant - floors[name] for name, grant in grants.items()}
    extra = _proportional(above, pool - floor_total)
    return {name: floors[name] + extra[name] for name in grants}


def _proportional(amounts: dict[str, int], pool: int) -> dict[str, int]:
    total = sum(amounts.values())
    if total <= pool:
        return dict(amounts)
    return {name: math.floor(amount * pool / total) for name, amount in amounts.items()}


register_cache("core.budget.decimal", _decimal)
