"""The default recaller's expansion: the neighbours of a hit and the words of the best hits.

A recalled turn alone is often half a thread: "Yes, last Tuesday, with my sister" answers a
question two turns earlier, in words the question does not use. The shipped recaller brings
back the turns around a hit and searches for the rarest words of its best hits too.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.errors import InvalidInputError
from contextwright.manager import ContextManager
from contextwright.recall.lexical import _expanded, best_first, with_neighbours
from contextwright.sources.conversation import HistorySource
from contextwright.sources.recall import LexicalTurnRecaller, RecallExpansion, RecallTurn

FILLER = ["We talked about the weather in spring.", "I baked bread again today.",
          "My cousin visits next month.", "The train was late this morning.",
          "I started reading a new novel.", "We watched a film about whales."]


def turns_of(texts: list[str]) -> list[RecallTurn]:
    return [RecallTurn(index=i, text=text, key=f"t{i}") for i, text in enumerate(texts)]


def thread(hit_at: int = 10, size: int = 30) -> list[str]:
    texts = [f"{FILLER[i % len(FILLER)]} (day {i})" for i in range(size)]
    texts[hit_at] = "Did you finally go to the pottery workshop?"
    texts[hit_at + 1] = "Yes, last Tuesday, with my sister Ilse."
    return texts


def test_the_turn_after_a_hit_comes_back_though_it_shares_no_word() -> None:
    turns = turns_of(thread())
    plain = LexicalTurnRecaller().rank("pottery workshop", turns, limit=5)
    expanded = LexicalTurnRecaller(expansion=RecallExpansion()).rank("pottery workshop",
                                                                    turns, limit=5)
    assert [p for p, _ in plain] == [10]
    positions = [p for p, _ in expanded]
    assert positions[0] == 10 and 11 in positions and 9 in positions
    scores = dict(expanded)
    assert scores[11] == pytest.approx(0.7 * scores[10])  # neighbour weight × the hit
    assert scores[12] == pytest.approx(0.35 * scores[10])  # halved at distance 2


def test_feedback_finds_a_turn_through_the_words_of_the_best_hit() -> None:
    texts = [f"{FILLER[i % len(FILLER)]} (day {i})" for i in range(40)]
    texts[5] = "The pottery workshop is run by Marguerite in the old tannery."
    texts[30] = "Marguerite said the tannery kiln reaches 1200 degrees."
    turns = turns_of(texts)
    no_feedback = RecallExpansion(feedback_turns=0, neighbours=0)
    feedback = RecallExpansion(neighbours=0)
    assert 30 not in dict(LexicalTurnRecaller(expansion=no_feedback).rank(
        "pottery workshop", turns, limit=10))
    found = dict(LexicalTurnRecaller(expansion=feedback).rank("pottery workshop", turns,
                                                               limit=10))
    assert 30 in found and found[30] < found[5]


def test_expansion_never_returns_more_than_the_limit_and_is_deterministic() -> None:
    turns = turns_of(thread(hit_at=3, size=12))
    recaller = LexicalTurnRecaller(expansion=RecallExpansion())
    first = recaller.rank("pottery workshop sister", turns, limit=3)
    assert len(first) == 3
    assert LexicalTurnRecaller(expansion=RecallExpansion()).rank(
        "pottery workshop sister", turns, limit=3) == first


def test_the_shipped_recallers_expand() -> None:
    source = HistorySource()
    assert isinstance(source.recaller, LexicalTurnRecaller)
    assert source.recaller.expansion == RecallExpansion()
    manager = ContextManager(background=False)
    assert isinstance(manager.recaller, LexicalTurnRecaller)
    assert manager.recaller.expansion == RecallExpansion()


@pytest.mark.parametrize(("recaller", "shown"), [(None, True),
                                                  (LexicalTurnRecaller(), False)])
def test_a_build_recalls_the_reply_to_the_matching_turn(recaller: LexicalTurnRecaller | None,
                                                        shown: bool) -> None:
    # One message per turn (each a user message), as in a group chat log.
    history = [{"role": "user", "content": text} for text in thread(hit_at=10, size=40)]
    plan = (BuildPlan.builder("recall").add("history", 1.0, max_tokens=200, options={
        "recall_share": 0.9, "recall_limit": 6}).add("user", 0.2).build())
    builder = ContextBuilder(sources=[HistorySource(recaller)])
    ctx = builder.build(plan, Request(user_input="How was the pottery workshop?",
                                      history=history))
    text = " ".join(m.content for m in ctx.messages)
    assert "pottery workshop?" in text
    assert ("my sister Ilse" in text) is shown


@pytest.mark.parametrize("arguments", [{"neighbours": -1}, {"neighbour_weight": 1.5},
                                       {"feedback_weight": float("nan")},
                                       {"feedback_max_share": -0.1}])
def test_bad_expansion_settings_are_refused(arguments: dict[str, float]) -> None:
    with pytest.raises(InvalidInputError, match="recall expansion"):
        RecallExpansion(**arguments)  # type: ignore[arg-type]


def test_the_hybrid_recaller_brings_neighbours_too() -> None:
    from contextwright.retrieval import HybridTurnRecaller

    turns = turns_of(thread())
    plain = HybridTurnRecaller(None).rank("pottery workshop", turns, limit=5)
    expanded = HybridTurnRecaller(None, expansion=RecallExpansion()).rank(
        "pottery workshop", turns, limit=5)
    assert [p for p, _ in plain] == [10]
    assert [p for p, _ in expanded][:3] == [10, 9, 11]


def _ranking(positions: list[int], scores: list[float]) -> list[tuple[int, float]]:
    """(position, score) best first, ties by position, positions unique."""
    pairs = dict(zip(positions, scores, strict=False))
    return sorted(pairs.items(), key=lambda pair: (-pair[1], pair[0]))


@settings(max_examples=300, deadline=None)
@given(size=st.integers(1, 120), data=st.data(),
       neighbours=st.integers(0, 3), weight=st.sampled_from([0.0, 0.5, 0.7, 1.0]),
       hits_cap=st.integers(1, 70), feedback_weight=st.sampled_from([0.3, 0.5, 1.0]),
       limit=st.integers(1, 90))
def test_the_array_merge_of_hits_feedback_and_neighbours_is_the_dict_merge(
        size: int, data: st.DataObject, neighbours: int, weight: float, hits_cap: int,
        feedback_weight: float, limit: int) -> None:
    score = st.one_of(st.just(0.0), st.floats(0.001, 20),  # BM25 scores: 0 or a real weight
                      st.sampled_from([1.5, 3.0, 7.25]))  # ties
    positions = st.lists(st.integers(0, size - 1), min_size=1, max_size=60)
    hit_positions = data.draw(positions)
    hits = _ranking(hit_positions, data.draw(st.lists(score, min_size=len(hit_positions),
                                                      max_size=len(hit_positions))))
    fed = data.draw(st.lists(st.integers(0, size - 1), max_size=60))
    feedback = _ranking(fed, data.draw(st.lists(score, min_size=len(fed), max_size=len(fed))))
    expansion = RecallExpansion(neighbours=neighbours, neighbour_weight=weight,
                                neighbour_hits=hits_cap, feedback_weight=feedback_weight)
    merged = dict(hits)
    if feedback and feedback[0][1] > 0:
        scale = feedback_weight * hits[0][1] / feedback[0][1]
        for position, value in feedback:
            merged[position] = merged.get(position, 0.0) + value * scale
    expected = with_neighbours(best_first(merged), expansion, size, limit)
    assert _expanded(hits, feedback, expansion, size, limit) == expected
