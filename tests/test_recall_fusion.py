"""Rank fusion of two turn rankings (``FusedTurnRecaller``'s rule), without a model."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwright.errors import InvalidInputError
from contextwright.recall import RecallTurn
from contextwright.recall.hybrid import FusedTurnRecaller, reciprocal_rank_fusion

rankings = st.lists(st.lists(st.integers(0, 30), unique=True, max_size=12), max_size=3)


def _scored(positions: list[int]) -> list[tuple[int, float]]:
    return [(p, 100.0 - i) for i, p in enumerate(positions)]


def test_a_turn_in_both_rankings_beats_one_in_either() -> None:
    lexical = _scored([4, 7, 1])
    dense = _scored([9, 7, 4])
    fused = reciprocal_rank_fusion((lexical, dense), k=10, limit=5)
    assert [p for p, _ in fused] == [4, 7, 9, 1]
    assert fused[0][1] == pytest.approx(1 / 11 + 1 / 13)


def test_ties_go_to_the_earlier_turn_and_the_limit_holds() -> None:
    fused = reciprocal_rank_fusion((_scored([5, 2]), _scored([2, 5])), k=10, limit=1)
    assert fused == [(2, pytest.approx(1 / 11 + 1 / 12))]


@given(rankings, st.floats(0.5, 100), st.integers(0, 20))
def test_fusion_is_sorted_bounded_and_covers_every_ranked_turn(
        positions: list[list[int]], k: float, limit: int) -> None:
    fused = reciprocal_rank_fusion([_scored(p) for p in positions], k=k, limit=limit)
    assert len(fused) == min(limit, len({p for ranking in positions for p in ranking}))
    assert fused == sorted(fused, key=lambda entry: (-entry[1], entry[0]))
    # Only the scores decide: the rankings' own scores are ignored.
    rescored = [[(p, 0.0) for p in ranking] for ranking in positions]
    assert reciprocal_rank_fusion(rescored, k=k, limit=limit) == fused


@pytest.mark.parametrize("k", [0, -1, float("nan"), float("inf"), True, "10"])
def test_the_rank_constant_must_be_a_positive_number(k: object) -> None:
    class NoEmbedder:
        name, dim = "none", 4

    with pytest.raises(InvalidInputError, match="k must be a positive number"):
        FusedTurnRecaller(NoEmbedder(), k=k)  # type: ignore[arg-type]


def test_no_turns_or_no_room_ranks_nothing() -> None:
    class NoEmbedder:
        name, dim = "none", 4

    recaller = FusedTurnRecaller(NoEmbedder())  # type: ignore[arg-type]
    turn = RecallTurn(index=0, text="hello", key="k0")
    assert recaller.rank("hello", [], limit=3) == []
    assert recaller.rank("hello", [turn], limit=0) == []
