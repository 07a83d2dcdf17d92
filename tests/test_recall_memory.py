"""The recall indexes are bounded by approximate bytes: evicted entries are rebuilt, equal."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, ContextManager, MemoryStore, Request
from contextwright.core.caches import (
    GrowingCache,
    MappingCache,
    cache_limits,
    cache_stats,
    set_cache_limits,
)
from contextwright.recall import LexicalTurnRecaller, RecallExpansion, clear_recall_caches
from contextwright.recall import history as recall_history
from contextwright.recall.bm25 import TurnList, TurnPostings
from contextwright.recall.lexical import (
    DATED_TERMS,
    WORD_TERMS,
    dated_term_counts,
    word_term_counts,
)
from contextwright.recall.turns import RecallTurn
from contextwright.sources.conversation import HistorySource

TOPICS = ("pasta", "kettles", "trains", "violins", "glaciers", "tea", "bicycles", "owls")


@pytest.fixture(autouse=True)
def _limits() -> Iterator[None]:
    before = cache_limits()
    clear_recall_caches()
    yield
    set_cache_limits(before["total_bytes"], index_bytes=before["index_bytes"],
                     per_cache=dict.fromkeys((
                         "recall.history.indexes", "recall.lexical.postings",
                         "manager.recall.sessions", "recall.history.recalled_units",
                         "test.growing")))
    clear_recall_caches()


def _history(seed: int, rounds: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for n in range(rounds):
        topic = TOPICS[(n * 7 + seed) % len(TOPICS)]
        history += [
            {"role": "user", "content": f"Session {seed} round {n}: what about {topic} "
                                        f"and ticket T{seed}-{n}?"},
            {"role": "assistant", "content": f"About {topic}: ticket T{seed}-{n} is noted, "
                                             f"code {seed * 1000 + n}."},
        ]
    return history


def _turns(texts: list[str]) -> list[RecallTurn]:
    return [RecallTurn(index=2 * i, text=text, key=f"k{i}") for i, text in enumerate(texts)]


# ----- the cache itself -----


def test_a_growing_cache_drops_the_least_recently_used_by_bytes_and_keeps_the_newest() -> None:
    sizes: dict[str, int] = {}
    cache: GrowingCache[str, str] = GrowingCache("test.growing", max_entries=10, share=0.5,
                                                 size=lambda value: sizes[value])
    set_cache_limits(per_cache={"test.growing": 3_000})
    for name in ("a", "b", "c"):
        sizes[name] = 700
        cache[name] = name
        cache.trim()
    assert list(cache) == ["a", "b", "c"]  # 3 × (700 + 160) fits in 3,000
    taken = cache.pop("a")  # used again: taken out, grown, put back
    assert taken == "a"
    sizes["a"] = 1_500
    cache["a"] = "a"
    assert cache.trim() == 1
    assert list(cache) == ["c", "a"], "b was the least recently used"
    assert cache.bytes == 700 + 1_500 + 2 * 160
    sizes["big"] = 10_000
    cache["big"] = "big"
    cache.trim()
    assert list(cache) == ["big"], "the newest entry stays, however large"
    stats = cache.stats()
    assert (stats.entries, stats.max_bytes, stats.evictions) == (1, 3_000, 3)
    assert cache.pop("gone") is None and cache.stats().misses == 1


def test_new_index_budget_applies_at_once() -> None:
    sizes = {"a": 1_000, "b": 1_000}
    cache: GrowingCache[str, str] = GrowingCache("test.growing", max_entries=10, share=0.5,
                                                 size=lambda value: sizes[value])
    cache["a"], cache["b"] = "a", "b"
    set_cache_limits(index_bytes=2_000)
    assert cache.max_bytes == 1_000 and list(cache) == ["b"]
    with pytest.raises(ValueError, match="index_bytes"):
        set_cache_limits(index_bytes=-1)


def test_a_mapping_cache_finds_entries_of_both_generations() -> None:
    cache: MappingCache[int, str] = MappingCache("test.mapping", max_entries=4, share=0.01,
                                                 size=lambda key, value: len(value))
    for key in range(3):  # the third put turns the first two into the old generation
        cache[key] = f"v{key}"
    assert cache.get(0) == "v0" and cache.get(2) == "v2"
    assert cache.get(99) is None and len(cache) == 3


# ----- postings -----


def test_postings_added_in_a_batch_equal_postings_added_one_by_one() -> None:
    counted = [Counter({"order": 1, "kettle": 9, "blue": 2}), Counter(),
               Counter({"order": 7, "tea": 1}), Counter({"kettle": 300, "tea": 6})]
    one, batch = TurnPostings(), TurnPostings()
    for counts in counted:
        one.add(counts)
    batch.add_all(counted)
    assert dict(batch.postings) == dict(one.postings)
    assert batch.big_counts == one.big_counts == {("kettle", 0): 9, ("order", 2): 7,
                                                  ("kettle", 3): 300}
    assert list(batch.lengths) == list(one.lengths) == [12, 0, 8, 306]
    assert batch.total_length == one.total_length and batch.held == one.held > 0


def test_a_recaller_starts_from_the_postings_a_turn_list_carries() -> None:
    texts = [f"turn {n} about {TOPICS[n % len(TOPICS)]} and order ORD-{n % 5}"
             for n in range(60)]
    plain = _turns(texts)
    carried = TurnList(plain)
    carried.postings = TurnPostings(terms=DATED_TERMS)
    carried.postings.add_all(map(dated_term_counts, plain[:40]))  # a prefix
    for query in ("which order was ORD-3?", "tell me about owls and tea"):
        expected = LexicalTurnRecaller().rank(query, plain, limit=8)
        assert LexicalTurnRecaller().rank(query, carried, limit=8) == expected
    assert len(carried.postings) == 60, "extended with the turns it lacked"


def test_postings_made_another_way_are_not_used() -> None:
    # Postings without date terms must not serve a recaller that matches dates, and the other
    # way round: each ranks as it would from the turns alone, and the carried ones stay as made.
    texts = [f"turn {n} about {TOPICS[n % len(TOPICS)]}, said {n % 3 + 1} days ago"
             for n in range(30)]
    plain = [RecallTurn(index=i, text=text, key=f"k{i}", timestamp=f"2023-05-{i % 28 + 1:02d}")
             for i, text in enumerate(texts)]
    for terms, counts, recaller in (
            (WORD_TERMS, word_term_counts, LexicalTurnRecaller()),
            (DATED_TERMS, dated_term_counts, LexicalTurnRecaller(dates=False))):
        carried = TurnList(plain)
        carried.postings = TurnPostings(terms=terms)
        carried.postings.add_all(map(counts, plain))
        query = "what about owls on 5 May 2023?"
        fresh = type(recaller)(dates=recaller.dates)
        assert recaller.rank(query, carried, limit=8) == fresh.rank(query, plain, limit=8)
        assert len(carried.postings) == 30
    dated = LexicalTurnRecaller().rank("what about owls on 5 May 2023?", plain, limit=3)
    assert dated[0][0] == 4, "the turn said on 5 May ranks first"


# ----- the indexes under a byte bound -----


def _rankings(recaller: LexicalTurnRecaller, histories: list[list[dict[str, Any]]]
              ) -> list[list[tuple[int, float]]]:
    return [recaller.rank(f"what was ticket T{seed}-3 about?",
                          recall_history.turn_index(history).turns, limit=5)
            for seed, history in enumerate(histories)]


def test_bounded_indexes_evict_and_rebuild_the_same_rankings() -> None:
    histories = [_history(seed, 40) for seed in range(6)]
    expected = _rankings(LexicalTurnRecaller(), histories)
    clear_recall_caches()
    set_cache_limits(per_cache={"recall.history.indexes": 40_000,
                                "recall.lexical.postings": 40_000})
    recaller = LexicalTurnRecaller()
    for _ in range(2):  # the second pass rebuilds what the first evicted
        assert _rankings(recaller, histories) == expected
    indexes = cache_stats()["recall.history.indexes"]
    assert indexes.bytes is not None and indexes.max_bytes == 40_000
    assert indexes.evictions and indexes.evictions > 0
    assert len(recall_history._INDEXES) < len(histories)
    assert recall_history._INDEXES.bytes <= 40_000 or len(recall_history._INDEXES) == 1
    postings = recaller._indexes
    assert postings.evictions > 0 and len(postings) < len(histories)
    assert postings.bytes <= 40_000 or len(postings) == 1


def test_builds_under_a_tiny_index_budget_render_what_unbounded_builds_do() -> None:
    builder = ContextBuilder(sources=[HistorySource(LexicalTurnRecaller(
        expansion=RecallExpansion()))])
    chat = BuildPlan.named("chat").with_budget(available_override=1_500)
    histories = [_history(seed, 60) for seed in range(4)]

    def rendered() -> list[list[dict[str, Any]]]:
        return [builder.build(chat, Request(user_input=f"ticket T{seed}-7?",
                                            history=history)).to_messages("openai")
                for seed, history in enumerate(histories)]

    expected = rendered()
    clear_recall_caches()
    set_cache_limits(index_bytes=1)  # every index and unit is over its bound: rebuilt each time
    assert rendered() == expected
    assert rendered() == expected
    assert len(recall_history._INDEXES) == 1


def test_session_indexes_are_bounded_by_bytes_and_rebuilt_from_the_store() -> None:
    def fill(cm: ContextManager) -> None:
        for session in ("a", "b", "c"):
            cm.prepare("u", session, f"My locker combination is {session}-9-4.")
            cm.record("u", session, assistant="Noted.")
            for n in range(14):
                cm.prepare("u", session, f"Round {n}: tell me about {TOPICS[n % 8]}.")
                cm.record("u", session, assistant=f"A thought on {TOPICS[n % 8]}.")

    def recalled(cm: ContextManager) -> list[list[str]]:
        return [[d.reason for d in cm.prepare("u", session, "What was my locker combination?"
                                              ).report.decisions
                 if d.action == "kept" and d.reason.startswith("recalled")]
                for session in ("a", "b", "c")]

    unbounded = ContextManager(store=MemoryStore(), background=False, cache=False)
    fill(unbounded)
    expected = recalled(unbounded)
    assert all(expected), "each session recalls its combination"
    set_cache_limits(per_cache={"manager.recall.sessions": 1})
    bounded = ContextManager(store=MemoryStore(), background=False, cache=False)
    fill(bounded)
    sessions = bounded._recall_indexes._entries
    assert len(sessions) == 1 and sessions.evictions > 0
    assert recalled(bounded) == expected
