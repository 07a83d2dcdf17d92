"""The prompt cache of text builds (``target="text"``), and the cache report's edge cases.

A text prompt is one string: its cached prefix is the leading text it shares with the previous
prompt. The report compares the text rendering part by part (the system part, then each
message), counts those parts' tokens, and never compares prompts of different targets. Also
the edges of the report and of the provider hints: an empty input's price, the cache key.
"""

from __future__ import annotations

import itertools
import re
from typing import Literal

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.builder import session_cache_key
from contextwright.core.cache import PRICE_MODELS, PriceModel
from contextwright.core.final import FinalContext

PLAN = BuildPlan.named("chat").with_budget(available_override=2000)


def test_an_input_of_no_tokens_is_not_priced_as_free() -> None:
    for prices in (*PRICE_MODELS, PriceModel("x", 0.5, 1.0, 0)):
        assert prices.relative_cost(0, 0) == 1.0


def _turns(builder: ContextBuilder, count: int, *, target: Literal["chat", "text"] = "text"
           ) -> list[FinalContext]:
    """``count`` cached calls of one conversation, each appending a round to the history."""
    history: list[dict[str, str]] = []
    previous: FinalContext | None = None
    built = []
    for turn in range(count):
        request = Request(user_input=f"question {turn}?", system="You are terse.",
                          history=list(history), env={"time": f"2026-12-02T10:{turn:02d}:00Z"})
        previous = builder.build(PLAN, request, previous=previous, cache=True, target=target)
        built.append(previous)
        history += [{"role": "user", "content": f"question {turn}?"},
                    {"role": "assistant", "content": f"answer {turn}"}]
    return built


def test_a_cached_text_prompt_shows_what_changes_every_call_just_before_the_input() -> None:
    first, second = (context.to_text() for context in _turns(ContextBuilder(), 2))
    stable = first[:first.index("=== Environment ===")]
    assert second.startswith(stable) and "=== History ===" in second[len(stable):]
    tail = second[second.index("=== Environment ===\n"):].split("\n")
    assert tail[:3] == ["=== Environment ===", "time: 2026-12-02T10:01:00Z", "=== User ==="]


def test_a_cached_text_build_counts_its_prompt_and_the_prefix_it_repeats() -> None:
    builder = ContextBuilder()
    built = _turns(builder, 4)
    for before, after in itertools.pairwise(built):
        text, earlier = after.to_text(), before.to_text()
        cache = after.report.cache
        assert cache is not None and cache.input_tokens == builder.tokenizer.count(text)
        # What the previous prompt showed before its volatile part is repeated, line for line.
        stable = earlier[:earlier.index("=== Environment ===")]
        assert text.startswith(stable)
        assert cache.prefix_tokens == builder.tokenizer.count(stable)
        assert cache.broke_key == "history" and "system message" not in (cache.reason or "")
        assert 0 < cache.hit_share < 1 and cache.cost["openai"] == 1.0  # too short to cache
    assert sum(built[-1].fingerprint.tokens) == built[-1].total_tokens


def test_a_text_build_without_a_cache_policy_counts_its_blocks_too() -> None:
    builder = ContextBuilder()
    request = Request(user_input="hello?", system="You are terse.",
                      history=[{"role": "user", "content": "hi."}])
    plain = builder.build(PLAN, request, target="text")
    assert sum(plain.fingerprint.tokens) == builder.tokenizer.count(plain.to_text())
    again = builder.build(PLAN, request, target="text", previous=plain)
    cache = again.report.cache
    assert cache is not None and cache.input_tokens == builder.tokenizer.count(again.to_text())
    # The cached build adds the data note to the system part: the prompt differs from there.
    assert cache.broke_at == 0 and cache.reason == (
        "the previous build was made without a cache policy")


def test_a_build_for_another_target_starts_a_new_cache_line_and_says_so() -> None:
    builder = ContextBuilder()
    chat, text = _turns(builder, 1, target="chat")[0], _turns(builder, 1)[0]
    request = Request(user_input="question 0?", system="You are terse.",
                      env={"time": "2026-12-02T10:00:00Z"})
    for previous, target in ((chat, "text"), (text, "chat")):
        built = builder.build(PLAN, request, previous=previous.fingerprint, cache=True,
                              target=target)
        cache = built.report.cache
        assert cache is not None and cache.previous
        assert (cache.prefix_tokens, cache.hit_share, cache.messages_kept) == (0, 0.0, 0)
        assert cache.broke_at == 0 and "a new cache line starts" in (cache.reason or "")
        assert previous.target in (cache.reason or "")


def test_a_cache_key_given_to_a_build_is_sent_with_or_without_a_cache_policy() -> None:
    builder = ContextBuilder()
    request = Request(user_input="hi", system="S")
    for cache in (True, None, False):
        built = builder.build(PLAN, request, cache=cache, cache_key="conv-1")
        for fmt in ("openai", "openai-responses"):
            assert built.to_request(fmt, model="m")["prompt_cache_key"] == "conv-1"
            assert "prompt_cache_key" not in built.to_request(fmt, model="m", cache=False)
    assert "prompt_cache_key" not in builder.build(PLAN, request).to_request("openai", model="m")


def test_session_cache_keys_tell_every_pair_of_ids_apart() -> None:
    pairs = [("a\x1fb", "c"), ("a", "b\x1fc"), ("a", "b"), ("a\x1f", "b"), ("a", "\x1fb"),
             ('a","b', "c"), ("a", 'b","c'), ("", "a"), ("a", "")]
    keys = [session_cache_key(user, session) for user, session in pairs]
    assert len(set(keys)) == len(pairs)
    assert all(re.fullmatch(r"[0-9a-f]{24}", key) for key in keys)  # OpenAI takes up to 64


def test_a_history_that_went_away_is_named_as_the_break() -> None:
    builder = ContextBuilder()
    for target in ("chat", "text"):
        first = _turns(builder, 3, target=target)[-1]
        request = Request(user_input="anything else?", system="You are terse.",
                          env={"time": "2026-12-02T11:00:00Z"})
        emptied = builder.build(PLAN, request, previous=first, target=target)
        cache = emptied.report.cache
        assert cache is not None and cache.broke_at == 1 and cache.broke_key == "env"
        assert cache.reason == ("history went away: the previous request showed 4 of its "
                                "messages, this one shows none")
