"""Property and example tests of ``allocate_budget``, and of the default budget.

The promise: every grant is at most what its source needs and at most its ``max_tokens``; grants
never exceed the pool; a source gets less than it needs only when the pool is exhausted; a share a
source does not need flows on to the sources that do, by priority ("history never fills its share
just because it can"); ``min_tokens`` is granted first when the pool allows; pure and deterministic.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from contextwright import Budget, BuildPlan
from contextwright.core.budget import Allocation, Claim, allocate_budget, weighted_share
from strategies import AllocationCase, allocation_cases

PROPERTY = settings(max_examples=300, deadline=None,
                    phases=[phase for phase in Phase if phase is not Phase.explain],
                    suppress_health_check=[HealthCheck.too_slow])


def allocate(case: AllocationCase) -> dict[str, Allocation]:
    return allocate_budget(case.pool, case.claims, case.total_weight, case.available)


def want(claim: Claim) -> int:
    """What a claim could use: its need, capped by its max."""
    return claim.need if claim.max_tokens is None else min(claim.need, claim.max_tokens)


# ------------------------------------------------------------------------------ properties

@PROPERTY
@given(allocation_cases())
def test_grants_never_exceed_need_max_or_pool(case: AllocationCase) -> None:
    allocations = allocate(case)
    assert set(allocations) == {c.name for c in case.claims}
    for claim in case.claims:
        grant = allocations[claim.name].grant
        assert 0 <= grant <= claim.need, claim
        assert claim.max_tokens is None or grant <= claim.max_tokens, claim
    assert sum(a.grant for a in allocations.values()) <= case.pool


@PROPERTY
@given(allocation_cases())
def test_a_claim_gets_less_than_it_needs_only_when_the_pool_is_exhausted(
        case: AllocationCase) -> None:
    allocations = allocate(case)
    short = [c.name for c in case.claims if allocations[c.name].grant < want(c)]
    if short:
        assert sum(a.grant for a in allocations.values()) == case.pool, (
            f"{short} got less than they need while the pool has tokens left")


@PROPERTY
@given(allocation_cases())
def test_history_never_fills_its_share_just_because_it_can(case: AllocationCase) -> None:
    # A claim never gets more than it needs, however large its weighted share; and when every
    # claim fits in the pool, each gets exactly what it needs (up to its max) — nothing more.
    allocations = allocate(case)
    for claim in case.claims:
        assert allocations[claim.name].grant <= want(claim)
    if sum(want(c) for c in case.claims) <= case.pool:
        assert {c.name: allocations[c.name].grant for c in case.claims} == {
            c.name: want(c) for c in case.claims}


@PROPERTY
@given(allocation_cases())
def test_min_tokens_is_honoured_when_the_pool_allows(case: AllocationCase) -> None:
    # SourceSpec.min_tokens: "tokens this source is granted before others share the rest (if it
    # needs them)". When the pool covers every floor, every floor is granted.
    floors = {c.name: min(c.min_tokens, want(c)) for c in case.claims}
    if sum(floors.values()) > case.pool:
        return
    allocations = allocate(case)
    for claim in case.claims:
        assert allocations[claim.name].grant >= floors[claim.name], (
            f"{claim.name} granted {allocations[claim.name].grant} < its floor "
            f"{floors[claim.name]} although the pool ({case.pool}) covers every floor")


@PROPERTY
@given(allocation_cases())
def test_leftovers_go_to_the_sources_that_need_them_by_priority(case: AllocationCase) -> None:
    allocations = allocate(case)
    shares = {c.name: min(c.need, allocations[c.name].share) for c in case.claims}
    if sum(shares.values()) > case.pool:
        return  # not even the shares fit: nothing is left over to hand on
    by_priority = sorted(case.claims, key=lambda c: c.rank)
    for index, claim in enumerate(by_priority):
        grant = allocations[claim.name].grant
        assert grant >= shares[claim.name], f"{claim.name} got less than its share"
        if grant > shares[claim.name]:  # it received leftovers: everyone before it is full
            for earlier in by_priority[:index]:
                assert allocations[earlier.name].grant == want(earlier), (
                    f"{claim.name} got leftovers before {earlier.name} (higher priority) was full")


@PROPERTY
@given(allocation_cases(), st.randoms(use_true_random=False))
def test_allocation_is_deterministic_and_ignores_claim_order(case: AllocationCase,
                                                             rnd: random.Random) -> None:
    first = allocate(case)
    assert allocate(case) == first
    shuffled = list(case.claims)
    rnd.shuffle(shuffled)
    assert allocate(replace(case, claims=tuple(shuffled))) == first


@PROPERTY
@given(allocation_cases())
def test_shares_are_clipped_weighted_fractions_of_available(case: AllocationCase) -> None:
    allocations = allocate(case)
    unclipped = 0
    for claim in case.claims:
        share = allocations[claim.name].share
        assert share == weighted_share(claim, case.total_weight, case.available)
        if claim.max_tokens is not None:
            assert share <= claim.max_tokens
        assert share >= claim.min_tokens  # min_tokens <= max_tokens, as plans require
        plain = replace(claim, max_tokens=None, min_tokens=0)
        unclipped += weighted_share(plain, case.total_weight, case.available)
    assert unclipped <= case.available, "weighted shares add up to more than available"


@PROPERTY
@given(st.floats(0.0, 1.0, allow_nan=False), st.floats(0.0, 1.0, allow_nan=False),
       st.integers(1, 200_000))
def test_weighted_share_is_the_floor_of_the_exact_fraction(weight: float, others: float,
                                                           available: int) -> None:
    total = weight + others
    share = weighted_share(Claim(name="history", weight=weight, need=0), total, available)
    # Weights are read as the decimals they print as (0.15 is 3/20).
    exact = (Fraction(repr(weight)) / Fraction(repr(total)) * available if total > 0
             else Fraction(0))
    assert share == math.floor(exact)


# -------------------------------------------------------------------------------- examples

SEED_WEIGHTS = {"system": 0.20, "tools": 0.15, "history": 0.30, "user": 0.25, "toolResults": 0.10}
SEED_MAX = {"system": 1200, "tools": 800, "history": 1500, "user": 1300, "toolResults": 500}


def test_seed_000_available_budget() -> None:
    # The defaults: 8192 × 0.75 − 1024 = 5120.
    assert Budget(window=8192).available == 5120
    assert Budget(window=8192, reserved_reasoning=512).available == 4608
    assert Budget(window=8192, available_override=3000).available == 3000
    assert BuildPlan.named("tool_heavy").budget.available == 5120


@pytest.mark.parametrize(("name", "expected"), [
    ("system", 1024), ("tools", 768), ("history", 1536), ("user", 1280), ("toolResults", 512),
])
def test_seed_000_weighted_shares(name: str, expected: int) -> None:
    # The example plan's shares of 5120 (weights sum to 1.0), before max clipping.
    total = sum(SEED_WEIGHTS.values())
    claim = Claim(name=name, weight=SEED_WEIGHTS[name], need=0)
    assert weighted_share(claim, total, 5120) == expected


@pytest.mark.parametrize(("name", "expected"), [
    ("system", 1024), ("tools", 768), ("history", 1500), ("user", 1280), ("toolResults", 500),
])
def test_seed_000_weighted_shares_clipped_by_max(name: str, expected: int) -> None:
    # The example plan also caps each source (1200 / 800 / 1500 / 1300 / 500).
    total = sum(SEED_WEIGHTS.values())
    claim = Claim(name=name, weight=SEED_WEIGHTS[name], need=0, max_tokens=SEED_MAX[name])
    assert weighted_share(claim, total, 5120) == expected


def _seed_claims(**needs: int) -> list[Claim]:
    return [Claim(name=name, weight=SEED_WEIGHTS[name], need=need, max_tokens=SEED_MAX[name],
                  rank=(rank, rank)) for rank, (name, need) in enumerate(needs.items())]


def test_seed_000_history_does_not_fill_its_share() -> None:
    # The example plan: system 680 and user 180 are never cut, so the pool is 5120 − 860.
    # History needs 400 of its 1536 share: it gets 400, and tools (rank first) get the rest of
    # what they need although their share is only 768.
    allocations = allocate_budget(4260, _seed_claims(tools=2000, history=400, toolResults=240),
                                  1.0, 5120)
    assert allocations["history"] == Allocation(share=1500, grant=400)
    assert allocations["toolResults"] == Allocation(share=500, grant=240)
    assert allocations["tools"] == Allocation(share=768, grant=800)  # its max
    assert sum(a.grant for a in allocations.values()) == 1440


def test_seed_000_pool_shared_when_everyone_needs_more() -> None:
    allocations = allocate_budget(2000, _seed_claims(tools=5000, history=5000, toolResults=5000),
                                  1.0, 5120)
    grants = {name: a.grant for name, a in allocations.items()}
    assert sum(grants.values()) == 2000
    assert all(grants[n] <= SEED_MAX[n] for n in grants)


def test_min_tokens_survive_a_small_pool() -> None:
    # Minimal case of the min_tokens property: the pool (550) covers the notes' floor (100)
    # but the proportional scale-down halves it.
    claims = [Claim(name="notes", weight=0.01, need=100, min_tokens=100, rank=(7, 1)),
              Claim(name="history", weight=0.99, need=1000, rank=(5, 0))]
    allocations = allocate_budget(550, claims, 1.0, 1000)
    assert allocations["notes"].grant == 100
    assert allocations["history"].grant == 450
