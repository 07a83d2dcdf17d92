"""The default recaller's expansion: the neighbours of a hit and the words of the best hits.

A recalled turn alone is often half a thread: "Yes, last Tuesday, with my sister" answers a
question two turns earlier, in words the question does not use. The shipped recaller brings
back the turns around a hit and searches for the rarest words of its best hits too.
"""

from __future__ import annotations

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.errors import InvalidInputError
from contextwright.manager import ContextManager
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
