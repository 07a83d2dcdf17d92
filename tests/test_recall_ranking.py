"""The lexical recaller's fast paths rank exactly like plain BM25, and recalled turns are reused."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.sources.conversation import HistorySource
from contextwright.sources.recall import LexicalTurnRecaller, RecallTurn, _terms, turn_index

WORDS = ["order", "kettle", "ORD-7731", "refund", "pasta", "salt", "上海", "天气", "明天",
         "flight", "book", "blue", "water", "sauce", "Paris", "9am"]


def reference_rank(recaller: LexicalTurnRecaller, query: str, turns: list[RecallTurn],
                   limit: int) -> list[tuple[int, float]]:
    """BM25 written the obvious way, term by term in sorted order, every turn scored."""
    counts = [Counter(_terms(turn.text)) for turn in turns]
    lengths = [sum(c.values()) for c in counts]
    size = len(turns)
    average = (sum(lengths) / size) or 1.0
    scores = [0.0] * size
    for term in sorted(set(_terms(query))):
        df = sum(1 for c in counts if term in c)
        if not df or df > size // 2:
            continue
        idf = math.log(1 + (size - df + 0.5) / (df + 0.5))
        for position, c in enumerate(counts):
            if term in c:
                tf = c[term]
                scores[position] += idf * (recaller.k1 + 1) * tf / (
                    tf + recaller.k1 * (1 - recaller.b) + recaller.k1 * recaller.b
                    * lengths[position] / average)
    ranked = sorted(((p, s) for p, s in enumerate(scores) if s >= recaller.min_score),
                    key=lambda entry: (-entry[1], entry[0]))
    return ranked[:limit]


def assert_same_ranking(got: list[tuple[int, float]], everything: list[tuple[int, float]],
                        limit: int) -> None:
    """``got`` is the top ``limit`` of ``everything`` (the reference's full ranking): same
    scores, same turns in the same order, except that turns whose scores differ only by float
    rounding (a sum of the same terms taken in another order) may come in either order."""
    expected = everything[:limit]
    assert len(got) == len(expected)
    assert all(math.isclose(a, b, rel_tol=1e-12) for (_, a), (_, b) in zip(got, expected,
                                                                           strict=True))
    got_groups, all_groups = _tied_groups(got), _tied_groups(everything)
    assert got_groups[:-1] == all_groups[:len(got_groups) - 1]
    if got_groups:  # the last group may be cut by the limit: any of its tied turns will do
        assert got_groups[-1] <= all_groups[len(got_groups) - 1]


def _tied_groups(ranking: list[tuple[int, float]]) -> list[set[int]]:
    """The ranking's positions, grouped where scores are equal up to rounding."""
    groups: list[set[int]] = []
    last: float | None = None
    for position, score in ranking:
        if last is not None and math.isclose(score, last, rel_tol=1e-12):
            groups[-1].add(position)
        else:
            groups.append({position})
        last = score
    return groups


def turns_of(texts: list[str]) -> list[RecallTurn]:
    return [RecallTurn(index=2 * n, text=text, key=f"k{n}") for n, text in enumerate(texts)]


_TEXT = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(_TEXT, min_size=1, max_size=60), query=_TEXT,
       limit=st.integers(1, 10))
def test_ranking_equals_plain_bm25(texts: list[str], query: str, limit: int) -> None:
    recaller = LexicalTurnRecaller(dates=False)
    turns = turns_of(texts)
    assert_same_ranking(recaller.rank(query, turns, limit=limit),
                        reference_rank(recaller, query, turns, len(turns)), limit)


def test_rare_and_common_query_terms_rank_alike() -> None:
    # A rare term scores few turns (kept by position in a dict); common terms score most turns
    # (accumulated in a list): both must give the reference ranking, ties broken by position.
    texts = [f"salt water pasta {n % 7}" for n in range(200)] + ["ORD-7731 kettle refund"] * 3
    turns = turns_of(texts)
    recaller = LexicalTurnRecaller(dates=False, min_score=0.1)
    for query in ("ORD-7731 refund", "pasta water 3", "salt 5 kettle"):
        for limit in (1, 3, 64):
            assert_same_ranking(recaller.rank(query, turns, limit=limit),
                                reference_rank(recaller, query, turns, len(turns)), limit)


def test_ranking_follows_a_growing_turn_list() -> None:
    recaller = LexicalTurnRecaller(dates=False)
    texts = [f"Tell me about pasta number {n}" for n in range(30)]
    turns = turns_of(texts)
    for n in range(5):
        turns.append(RecallTurn(index=100 + n, text=f"kettle order ORD-77{n} refund",
                                key=f"new{n}"))
        query = "refund kettle ORD-772"
        assert_same_ranking(recaller.rank(query, turns, limit=4),
                            reference_rank(recaller, query, turns, len(turns)), 4)


def history(rounds: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for n in range(rounds):
        topic = "the blue kettle order ORD-7731" if n % 10 == 3 else f"pasta recipe {n}"
        messages += [{"role": "user", "content": f"Question about {topic}?"},
                     {"role": "assistant", "content": f"An answer about {topic}. " * 8}]
    return messages


def recall_plan() -> BuildPlan:
    return (BuildPlan.builder("recall").add("system")
            .add("history", max_tokens=1200, options={"recall_share": 0.6, "recall_limit": 8})
            .add("user").budget(window=100_000).build())


def test_recalled_turns_are_the_same_items_build_after_build() -> None:
    # The same objects, so the builder reuses their rendering and token counts.
    source = HistorySource()
    options = recall_plan().spec("history").options
    request = Request(user_input="Where is the blue kettle order ORD-7731?",
                      history=history(120))
    first = [i for i in source.build(request, options) if "recalled" in i.metadata]
    second = [i for i in source.build(request, options) if "recalled" in i.metadata]
    assert first and len(first) == len(second)
    assert all(a is b for a, b in zip(first, second, strict=True))


def test_a_recalled_turn_edited_in_place_shows_its_new_text() -> None:
    builder = ContextBuilder()
    messages = history(120)
    request = Request(user_input="Where is the blue kettle order ORD-7731?", history=messages)
    before = builder.build(recall_plan(), request)
    assert any("An answer about the blue kettle" in m.content for m in before.messages)
    for message in messages[:40]:
        if message["role"] == "assistant" and "kettle" in message["content"]:
            message["content"] = message["content"].replace("An answer", "A corrected answer")
    after = builder.build(recall_plan(), Request(user_input=request.user_input,
                                                 history=messages))
    recalled = [m.content for m in after.messages if "kettle" in m.content]
    assert recalled and not any("An answer about the blue kettle" in c for c in recalled[:2])
    assert any("A corrected answer about the blue kettle" in c for c in recalled)


def test_turn_index_and_recaller_agree_after_appends() -> None:
    messages = history(40)
    recaller = LexicalTurnRecaller(dates=False)
    for n in range(6):
        messages += [{"role": "user", "content": f"More about kettle ORD-7731, part {n}"},
                     {"role": "assistant", "content": "Noted."}]
        index = turn_index(messages)
        assert_same_ranking(recaller.rank("kettle ORD-7731", index.turns, limit=5),
                            reference_rank(recaller, "kettle ORD-7731", list(index.turns),
                                           len(index.turns)), 5)


def test_turn_index_is_kept_for_equal_copies_and_rebuilt_for_changed_messages() -> None:
    messages = history(30)
    index = turn_index(messages)
    messages[10] = dict(messages[10])  # another object, same message: the same turns
    assert turn_index(messages).turns is index.turns  # the same index, seen anew
    messages[10] = {**messages[10], "content": "Question about a different thing?"}
    rebuilt = turn_index(messages)
    assert rebuilt.turns is not index.turns
    assert rebuilt.turns[5].text.startswith("Question about a different thing?")


def test_a_repeated_ranking_is_remembered_until_the_turns_or_the_input_change() -> None:
    texts = [f"turn {n} about the {'kettle' if n % 7 == 0 else 'pasta'} order" for n in range(50)]
    turns = turns_of(texts)
    recaller = LexicalTurnRecaller(dates=False)
    first = recaller.rank("kettle order", turns, limit=5)
    again = recaller.rank("kettle order", turns, limit=5)
    assert again == first and again is not first, "the caller gets its own list"
    again.clear()
    assert recaller.rank("kettle order", turns, limit=5) == first, "not changed by a caller"
    turns.append(RecallTurn(index=100, text="one more kettle, please", key="k50"))
    grown = recaller.rank("kettle order", turns, limit=5)
    assert grown == LexicalTurnRecaller(dates=False).rank("kettle order", turns, limit=5)
    assert grown != first, "a new turn ranks anew"
    assert recaller.rank("pasta", turns, limit=5) == LexicalTurnRecaller(dates=False).rank(
        "pasta", turns, limit=5)
    assert recaller.rank("kettle order", turns, limit=2) == grown[:2]
