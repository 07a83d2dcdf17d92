"""The recall indexes of the whole process hold to one byte budget, however many recallers.

``set_cache_limits(index_bytes=...)`` bounds the turn indexes and the lexical postings of
every builder and manager together: the postings are one registered cache shared by every
recaller, and what an entry keeps alive (a turn list's text) is counted where it is kept.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from contextwright import (
    BuildPlan,
    ContextBuilder,
    Request,
    cache_stats,
    clear_caches,
    set_cache_limits,
)
from contextwright.core.caches import cache_limits
from contextwright.recall import LexicalTurnRecaller, RecallTurn

MB = 2**20
MODELS = ("gpt-4o", "gpt-4.1", "gpt-5", "o3", "claude-sonnet-4-5", "gpt-5-mini", "o4-mini",
          "claude-opus-4-1")


@pytest.fixture
def small_budgets() -> Iterator[None]:
    before = cache_limits()
    set_cache_limits(MB, index_bytes=MB)
    clear_caches()
    yield
    set_cache_limits(before["total_bytes"], index_bytes=before["index_bytes"])
    clear_caches()


def _history(session: int) -> list[dict[str, Any]]:
    return [{"role": "user" if k % 2 == 0 else "assistant",
             "content": f"session {session} message {k} " + f"unique{session}_{k} " * 150}
            for k in range(60)]


def test_recallers_share_one_registered_postings_cache() -> None:
    clear_caches()
    history = _history(0)
    first, second = ContextBuilder(model=MODELS[0]), ContextBuilder(model=MODELS[1])
    for builder in (first, second):
        builder.build(BuildPlan.named("chat"), Request(user_input="what about unique0_3?",
                                                       history=history))
    stats = cache_stats()["recall.lexical.postings"]
    assert stats.entries == 1, "one history's postings, whichever builder ranked it"
    assert stats.max_bytes == int(cache_limits()["index_bytes"] * 0.25)


def test_the_recall_caches_of_many_builders_stay_within_the_index_budget(
        small_budgets: None) -> None:
    builders = [ContextBuilder(model=model) for model in MODELS]
    plan = BuildPlan.named("chat")
    for builder in builders:  # what the first build imports and sets up is not kept by a cache
        builder.build(plan, Request(user_input="hello?", history=_history(-1)))
    clear_caches()
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for session in range(40):  # distinct sessions, each built once, then dropped
            builders[session % len(builders)].build(plan, Request(
                user_input=f"what did session {session} say about unique{session}_3?",
                history=_history(session)))
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    recall = {name: stats for name, stats in cache_stats().items()
              if name.startswith("recall.")}
    counted = sum(stats.bytes or 0 for stats in recall.values())
    assert counted <= MB, recall
    # Both pools (1 MB each), with room for what the estimates leave out; the text of every
    # history's older turns kept past its index (the postings of each recaller) is far more.
    assert kept < 3 * MB, f"{kept / MB:.1f} MB kept by the caches"


def test_a_list_the_caller_gave_is_counted_with_the_postings_that_keep_it() -> None:
    clear_caches()
    recaller = LexicalTurnRecaller()
    turns = [RecallTurn(index=i, text=f"turn {i} about parcel P{i} " + "words " * 200,
                        key=f"k{i}") for i in range(50)]
    recaller.rank("where is parcel P7?", turns, limit=3)
    postings = cache_stats()["recall.lexical.postings"]
    text = sum(len(turn.text) for turn in turns)
    assert postings.bytes is not None and postings.bytes > text
