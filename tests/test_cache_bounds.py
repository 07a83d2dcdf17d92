"""The caches' memory bounds: bytes and entries are honoured, recently used entries stay.

Also: caches keyed by ``id()`` never answer for another object that got the id of a dead one
(each entry holds its object, so the id cannot be reused while the entry lives).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.analysis import ANALYZERS, Analyzer
from contextwright.core import caches
from contextwright.core.caches import (
    ENTRY_BYTES,
    BoundedCache,
    MemoDict,
    cache_limits,
    cache_stats,
    memoized,
    register_cache,
    set_cache_limits,
    text_bytes,
)
from contextwright.core.items import parse_message


@pytest.fixture(autouse=True)
def default_limits() -> Iterator[None]:
    before = cache_limits()
    yield
    set_cache_limits(before["total_bytes"], count_hits=before["count_hits"],
                     per_cache={name: before["per_cache"].get(name)
                                for name in {*before["per_cache"],
                                             *cache_limits()["per_cache"]}})


def text_cache(name: str, *, max_bytes: int, max_entries: int = 1_000_000
               ) -> BoundedCache[str, str]:
    set_cache_limits(per_cache={name: max_bytes})
    return BoundedCache(name, max_entries=max_entries, share=0.01,
                        size=lambda key, value: text_bytes(key) + text_bytes(value))


def test_a_cache_filled_past_its_byte_budget_evicts() -> None:
    cache = text_cache("tests.bounds.bytes", max_bytes=100_000)
    value = "x" * 1_000
    for i in range(1_000):  # ~1.2 MB offered to a 100 kB cache
        cache.put(f"key {i}", value)
        assert cache.bytes <= cache.max_bytes
    assert 40 <= len(cache) <= 100_000 // (1_000 + ENTRY_BYTES)
    stats = cache.stats()
    assert stats.bytes == cache.bytes and stats.max_bytes == 100_000
    assert stats.evictions and stats.evictions + stats.entries == 1_000
    assert cache.get("key 999") == value  # the newest is kept
    assert "key 0" not in cache  # the oldest is gone


def test_a_cache_is_bounded_by_entries_too() -> None:
    cache = text_cache("tests.bounds.entries", max_bytes=10**9, max_entries=100)
    for i in range(1_000):
        cache.put(str(i), "v")
        assert len(cache) <= 100
    assert len(cache) >= 50


def test_an_entry_used_since_the_last_turnover_survives() -> None:
    cache = text_cache("tests.bounds.recent", max_bytes=10**9, max_entries=100)
    cache.put("hot", "kept")
    for i in range(10_000):
        if cache.get("hot") is None:  # as callers do: the young generation, then the old one
            assert cache.revive("hot") == "kept", f"evicted after {i} puts"
        cache.put(str(i), "cold")
    assert "hot" in cache and "0" not in cache


def test_an_entry_bigger_than_a_quarter_of_the_budget_is_not_kept() -> None:
    cache = text_cache("tests.bounds.big", max_bytes=40_000)
    cache.put("small", "x")
    assert cache.put("big", "y" * 20_000) == "y" * 20_000
    assert "big" not in cache and cache.get("small") == "x"


def test_lowering_the_limit_evicts_at_once() -> None:
    cache = text_cache("tests.bounds.lower", max_bytes=10**7)
    for i in range(1_000):
        cache.put(str(i), "z" * 100)
    assert cache.bytes > 100_000
    set_cache_limits(per_cache={"tests.bounds.lower": 50_000})
    assert cache.bytes <= 50_000 and cache.max_bytes == 50_000
    set_cache_limits(per_cache={"tests.bounds.lower": None})  # back to its share of the total
    assert cache.max_bytes == int(cache_limits()["total_bytes"] * 0.01)


def test_hits_and_misses_are_counted() -> None:
    set_cache_limits(count_hits=True)
    cache = text_cache("tests.bounds.stats", max_bytes=10**6)
    assert cache.get("a") is None and cache.revive("a") is None
    cache.put("a", "1")
    assert cache.get("a") == "1" and cache.get("a") == "1"
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.entries) == (2, 1, 1)
    set_cache_limits(count_hits=False)
    assert cache.get("a") == "1"
    assert cache.stats().hits is None  # not counted: a hit is then one plain dict lookup


def test_memoized_remembers_none_and_clears() -> None:
    calls: list[str] = []

    @memoized("tests.bounds.memo", max_entries=100, share=0.01,
              size=lambda args, _: len(args[0]))
    def parse(text: str) -> int | None:
        calls.append(text)
        return int(text) if text.isdigit() else None

    assert parse("12") == 12 and parse("12") == 12
    assert parse("no") is None and parse("no") is None
    assert calls == ["12", "no"]
    parse.cache_clear()
    assert parse("12") == 12 and calls == ["12", "no", "12"]
    with pytest.raises(TypeError, match="by position"):
        parse(text="12")  # type: ignore[call-arg]


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True])
def test_bad_limits_are_a_clear_error(bad: Any) -> None:
    with pytest.raises(ValueError, match="whole number of bytes"):
        set_cache_limits(bad)
    with pytest.raises(ValueError, match="per_cache"):
        set_cache_limits(per_cache={"core.items.parsed": bad})


def test_the_environment_sets_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTWRIGHT_CACHE_MB", "64")
    assert caches._env_total_bytes() == 64 * 2**20
    monkeypatch.setenv("CONTEXTWRIGHT_CACHE_MB", "lots")
    with pytest.raises(ValueError, match="CONTEXTWRIGHT_CACHE_MB"):
        caches._env_total_bytes()
    monkeypatch.delenv("CONTEXTWRIGHT_CACHE_MB")
    assert caches._env_total_bytes() == caches.DEFAULT_TOTAL_BYTES


def test_the_shipped_shares_fit_in_the_budget() -> None:
    ContextBuilder().build(BuildPlan.named("tool_heavy"), Request(user_input="hi"))
    shares = {name: cache.share for name, cache in caches._bounded_caches().items()
              if not name.startswith(("tests.", "tokens.counts."))}
    token_share = max(cache.share for name, cache in caches._bounded_caches().items()
                      if name.startswith("tokens.counts."))
    assert len(shares) >= 14
    assert sum(shares.values()) + token_share <= 1.0 + 1e-9  # one tokenizer in use


def test_builds_keep_the_heavy_caches_within_their_bytes() -> None:
    limit = 200_000
    names = ["core.items.parsed", "core.gather.candidates", "sources.conversation.items",
             "tokens.counts.o200k_base"]
    set_cache_limits(per_cache=dict.fromkeys(names, limit))
    builder = ContextBuilder(tokenizer="o200k_base")
    plan = BuildPlan.named("tool_heavy").with_budget(available_override=4_000)
    for session in range(6):
        history = [{"role": "user" if i % 2 == 0 else "assistant",
                    "content": f"session {session} turn {i}: " + "word " * 60}
                   for i in range(300)]
        result = builder.build(plan, Request(user_input="turn 299?", history=history))
        assert result.total_tokens > 0
    stats = cache_stats()
    for name in names:
        assert 0 < stats[name].entries and stats[name].bytes is not None
        assert stats[name].bytes <= limit, name


def test_an_id_keyed_cache_never_answers_for_a_new_object_with_a_dead_ones_id() -> None:
    """Parses are keyed by the dict's id: a dict that dies after its entry was evicted may
    leave its id to a new dict with other content, which must be parsed afresh."""
    set_cache_limits(per_cache={"core.items.parsed": 20 * (ENTRY_BYTES + 700)})
    seen_ids: set[int] = set()
    for round_no in range(300):
        raw = {"role": "user", "content": f"message number {round_no}"}
        seen_ids.add(id(raw))
        assert parse_message(raw, "history[0]").content == f"message number {round_no}"
        assert parse_message(raw, "history[0]").content == f"message number {round_no}"
        del raw
        if round_no % 7 == 0:
            gc.collect()
    # Ids were reused (the test would prove nothing otherwise) and every parse was right.
    assert len(seen_ids) < 300


def test_an_identity_checked_cache_answers_only_for_its_own_object() -> None:
    """The value keys of a kept item are remembered per item object: after its entry is
    evicted and the item dies, a new item with the same id must get its own keys."""
    from contextwright.core.items import ContextItem, Layer, Message
    from contextwright.sources.history_digest import _item_keys

    set_cache_limits(per_cache={"sources.history_digest.item_keys": 20 * (ENTRY_BYTES + 300)})
    seen_ids: set[int] = set()
    for n in range(300):
        item = ContextItem(key=f"history.m{n}", layer=Layer.HISTORY,
                           message=Message(role="user", content=f"order ORD-{10_000 + n}"))
        seen_ids.add(id(item))
        assert "ORD-" + str(10_000 + n) in _item_keys(item)
        del item
        if n % 7 == 0:
            gc.collect()
    assert len(seen_ids) < 300


class _Lengths(MemoDict[str, int]):
    """A memo of ``len`` that counts how often it works a value out."""

    def __init__(self, name: str) -> None:
        super().__init__(name, max_entries=1_000_000, share=0.01,
                         size=lambda key, _: text_bytes(key))
        self.computed = 0

    def __missing__(self, key: str) -> int:
        kept = self.revive(key)
        if kept is not None:
            return kept
        self.computed += 1
        return self.remember(key, len(key))


def test_a_memo_read_as_a_dict_stays_within_its_bytes() -> None:
    set_cache_limits(per_cache={"tests.bounds.memo_dict": 100_000})
    memo = _Lengths("tests.bounds.memo_dict")
    register_cache(memo.name, memo)
    for i in range(2_000):  # ~2 MB of distinct keys offered to a 100 kB memo
        key = f"{i:05d}" + "k" * 1_000
        assert memo[key] == 1_005
        assert memo.bytes <= 100_000
    stats = cache_stats()["tests.bounds.memo_dict"]
    assert stats.bytes == memo.bytes and stats.max_bytes == 100_000
    assert 40 <= stats.entries <= 100_000 // (1_000 + ENTRY_BYTES)
    assert stats.evictions and stats.evictions + stats.entries == 2_000
    assert memo.computed == stats.misses == 2_000


def test_a_memo_keeps_what_was_used_since_its_last_turnover() -> None:
    set_cache_limits(per_cache={"tests.bounds.memo_hot": 20_000})
    memo = _Lengths("tests.bounds.memo_hot")
    lookup = memo.__getitem__  # bound once, as the analyzers do: turnovers keep it valid
    assert lookup("hot") == 3
    for i in range(5_000):
        assert lookup("hot") == 3
        assert lookup(f"cold {i}") == len(f"cold {i}")
    assert memo.computed == 5_001, "the hot key was worked out once"
    assert "hot" in memo and memo.bytes <= 20_000
    memo.clear()
    assert memo.entries == 0 and memo.bytes == 0


def test_lowering_a_memos_limit_drops_entries_at_once() -> None:
    memo = _Lengths("tests.bounds.memo_lower")
    for i in range(1_000):
        memo[f"{i} " + "z" * 100]
    assert memo.bytes > 50_000
    set_cache_limits(per_cache={"tests.bounds.memo_lower": 50_000})
    assert memo.bytes <= 50_000 and memo.max_bytes == 50_000


@pytest.mark.parametrize("name", sorted(ANALYZERS))
def test_an_analyzers_memo_is_bounded_by_bytes_under_long_distinct_words(name: str) -> None:
    """A server meets ever new ids: long distinct words may not grow the match memo past its
    bytes, and the terms stay those of a fresh analysis."""
    limit = 200_000
    set_cache_limits(per_cache={f"analysis.{name}": limit})
    analysis = ANALYZERS[name]
    fresh = Analyzer(analysis.config)
    for i in range(3_000):  # ~1.5 MB of distinct words
        text = f"order{i:05d}{'x' * 480} 上海天气 order{i:05d}{'x' * 480}"
        assert analysis.terms(text) == fresh.terms(text)
        stats = cache_stats()[f"analysis.{name}"]
        assert stats.bytes is not None and stats.bytes <= limit
    assert stats.entries >= 2 and stats.evictions


def test_tool_call_blocks_stay_within_their_bytes() -> None:
    """Completed tool-call blocks are remembered per message objects: ended sessions' long
    tool results may not pile up in them."""
    limit = 100_000
    set_cache_limits(per_cache={"sources.conversation.blocks": limit})
    builder = ContextBuilder(tokenizer="o200k_base")
    plan = BuildPlan.named("tool_heavy").with_budget(available_override=4_000)
    for session in range(4):
        history: list[dict[str, Any]] = []
        for i in range(80):
            call_id = f"s{session}c{i}"
            history += [
                {"role": "user", "content": f"session {session}: look up order {i}"},
                {"role": "assistant", "content": "", "tool_calls": [{
                    "id": call_id, "type": "function",
                    "function": {"name": "lookup_order", "arguments": f'{{"order": {i}}}'}}]},
                {"role": "tool", "tool_call_id": call_id,
                 "content": '{"items": [' + ", ".join(f'"item {i}-{k}"' for k in range(80))
                 + "]}"},
                {"role": "assistant", "content": f"Order {i} has 80 items."}]
        builder.build(plan, Request(user_input="order 3?", history=history))
    stats = cache_stats()["sources.conversation.blocks"]
    assert stats.entries and stats.evictions
    assert stats.bytes is not None and stats.bytes <= limit


def test_the_digests_entry_bounded_memos_keep_only_short_values() -> None:
    """Their entries are few bytes each only if their values are short: a long one is not kept."""
    from contextwright.sources import history_digest as digest

    long_id = "ORD-" + "7" * 200
    assert len(long_id) > digest.MEMO_CHARS
    digest._key.cache_clear()
    digest._value_rank.cache_clear()
    assert digest._key_of(long_id) == digest.fact_key(long_id)
    assert digest._key_of("ORD-4411") == digest.fact_key("ORD-4411")
    assert digest._key.cache_info().currsize == 1, "only the short value entered the memo"
    entry = digest.Entry(at=0, who="user", values=(long_id, "ORD-4411"), relied_on=True)
    assert digest._ranked([entry])[1] == [long_id, "ORD-4411"]
    assert digest._value_rank.cache_info().currsize == 1


def test_a_plans_options_carry_their_key_so_options_made_per_build_leave_no_entry() -> None:
    from contextwright.core.plan import FrozenOptions
    from contextwright.sources import conversation

    conversation._OPTION_KEYS.clear()
    frozen = FrozenOptions({"b": 1, "a": [1, {"x": 2}]})
    assert conversation.options_key(frozen) == conversation.options_key(
        {"a": [1, {"x": 2}], "b": 1}) == '{"a": [1, {"x": 2}], "b": 1}'
    assert len(conversation._OPTION_KEYS) == 1, "only the plain mapping is remembered by id"
    assert frozen.cache_key is frozen.cache_key, "made once"
