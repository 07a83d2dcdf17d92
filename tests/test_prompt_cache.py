"""Builds that keep the provider's prompt cache warm: a stable prefix across the calls of one
conversation, cut in steps, reported and priced; provider cache hints; the fingerprint kept in
the session state so any worker continues the cache line."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from hypothesis import example, given, settings
from hypothesis import strategies as st
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import TypeAdapter

from contextwright import BuildPlan, ContextBuilder, ContextManager, Request
from contextwright.core.cache import (
    PRICE_MODELS,
    CachePolicy,
    Fingerprint,
    PriceModel,
    cache_report_from_dict,
)
from contextwright.core.final import FinalContext
from contextwright.core.gather import _reaches as reaches
from contextwright.core.items import DETACHED_ORDER, detached
from contextwright.core.plan import FrozenOptions
from contextwright.core.stepping import Stepping
from contextwright.errors import InvalidInputError
from contextwright.manager.recall import SessionHistorySource
from contextwright.recall import LexicalTurnRecaller, RecallExpansion, turn_index
from contextwright.session.sqlite import SqliteStore
from contextwright.session.store import SessionKey
from contextwright.sources import HistorySource
from fakes.provider_server import ProviderServer

TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look up an order by id.",
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}},
                   "required": ["id"]}}}]
SYSTEM = "You are the support agent of a small shop. Answer briefly and check orders."


def plan(history: int = 900) -> BuildPlan:
    """``tool_heavy`` with a small history cap, so cutting happens within a few turns."""
    base = BuildPlan.named("tool_heavy").with_budget(window=6000, reserved_output=200,
                                                     safety_ratio=1.0)
    return replace(base, sources=tuple(
        replace(s, max_tokens=history) if s.source == "history" else s for s in base.sources))


def turn_messages(t: int, size: int = 3) -> list[dict[str, Any]]:
    """One user turn of an agent: question, a call, its result, the answer."""
    order = f"ORD{t:04d}"
    result = {"id": order, "status": "shipped" if t % 2 else "packed",
              "items": [{"sku": f"SKU{t}{i}", "qty": i + 1} for i in range(size)],
              "note": "handle with care " * size}
    return [
        {"role": "user", "content": f"Where is my order {order}? It has {size} items."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{t}", "type": "function",
             "function": {"name": "lookup", "arguments": json.dumps({"id": order})}}]},
        {"role": "tool", "tool_call_id": f"call_{t}", "content": json.dumps(result)},
        {"role": "assistant", "content": f"Order {order} is {result['status']}."},
    ]


def replay(sizes: list[int], builder: ContextBuilder | None = None, *, cache: Any = True,
           history: int = 900) -> Iterator[tuple[Request, FinalContext]]:
    """Each turn a call: the history so far, the next question, the environment's time."""
    builder = builder or ContextBuilder()
    messages: list[dict[str, Any]] = []
    previous: FinalContext | None = None
    for t, size in enumerate(sizes):
        question = turn_messages(t, size)[0]["content"]
        request = Request(user_input=question, system=SYSTEM, history=list(messages),
                          tools=TOOLS, env={"time": f"2026-12-02T10:{t % 60:02d}:00Z"})
        ctx = builder.build(plan(history), request, previous=previous, cache=cache)
        yield request, ctx
        previous = ctx
        messages += turn_messages(t, size)


def openai_messages(ctx: FinalContext) -> list[str]:
    return [json.dumps(m, sort_keys=True) for m in ctx.to_messages("openai")]


# --- the property -------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=12), min_size=2, max_size=14))
def test_each_build_keeps_the_previous_prefix_or_reports_the_break(sizes: list[int]) -> None:
    before: FinalContext | None = None
    for _, ctx in replay(sizes):
        assert ctx.total_tokens <= ctx.available
        cache = ctx.report.cache
        assert cache is not None
        if before is None:
            assert not cache.previous
        else:
            old, new = openai_messages(before), openai_messages(ctx)
            stable = before.stable_fingerprint.stable_end  # type: ignore[union-attr]
            same = 0
            while same < min(len(old), len(new)) and old[same] == new[same]:
                same += 1
            assert cache.messages_kept == same
            if same < stable:  # the stable part did not survive: the report says where, why
                assert cache.broke_at == same and cache.reason
                assert cache.advanced or "changed" in cache.reason or "plan" in cache.reason
        before = ctx


def test_the_same_sequence_gives_the_same_requests_in_another_process() -> None:
    sizes = [3, 9, 2, 11, 4, 8, 1, 12, 5]
    here = [ctx.to_request("anthropic", model="claude-sonnet-4-5") for _, ctx in replay(sizes)]
    again = [ctx.to_request("anthropic", model="claude-sonnet-4-5") for _, ctx in replay(sizes)]
    assert here == again
    script = (
        "import json, sys; sys.path[:0] = [sys.argv[1]]\n"
        "from test_prompt_cache import replay\n"
        "print(json.dumps([c.to_request('anthropic', model='claude-sonnet-4-5')"
        f" for _, c in replay({sizes!r})], sort_keys=True))\n")
    tests = Path(__file__).parent
    out = subprocess.run([sys.executable, "-c", script, str(tests)], capture_output=True,
                         text=True, check=True, cwd=tests).stdout
    assert json.loads(out) == json.loads(json.dumps(here, sort_keys=True))


# --- what the build does --------------------------------------------------------------------


def test_history_is_cut_in_steps_so_most_calls_only_append() -> None:
    contexts = [ctx for _, ctx in replay([6] * 24, history=2400)]
    advanced = [ctx for ctx in contexts if ctx.report.cache and ctx.report.cache.advanced]
    assert 1 <= len(advanced) <= 4, "cuts come in steps, not on every call"
    today = [ctx for _, ctx in replay([6] * 24, cache=False, history=2400)]
    stable_hits = sum(c.report.cache.prefix_tokens for c in contexts[1:])  # type: ignore[union-attr]
    assert stable_hits > 0
    # Without previous, the history part of the prefix changes on nearly every call.
    changed = sum(1 for a, b in itertools.pairwise(today)
                  if openai_messages(a)[:2] != openai_messages(b)[:2])
    assert changed >= 10
    for ctx in advanced:
        cache = ctx.report.cache
        assert cache is not None and "history's cut advanced" in (cache.reason or "")
        assert cache.broke_key == "history" and (cache.broke_item or "").startswith("history.")


def _order_values(ctx: FinalContext) -> set[str]:
    """The order ids and SKUs the request shows, verbatim or in the digest."""
    shown = "\n".join(f"{m.get('content')} {m.get('tool_calls')}"
                      for m in ctx.to_messages("openai"))
    return set(re.findall(r"ORD\d{4}|SKU\d+", shown))


def test_a_cut_in_steps_takes_its_step_from_the_messages_not_from_the_digest() -> None:
    # The step a cut leaves free is verbatim messages: the digest keeps the room a fresh build
    # gives it, so the exact values of what the step let go are listed, not lost.
    cuts = 0
    for request, ctx in replay([1] * 30, history=900):
        cache = ctx.report.cache
        if not (cache and "history" in cache.advanced):
            continue
        cuts += 1
        fresh = ContextBuilder().build(plan(900), request)
        # A cut keeps a pinned head, so its digest covers a few more messages in about the
        # same room and lists a few fewer values than a fresh build's (31 of 35-37 here).
        assert len(_order_values(ctx)) >= 0.8 * len(_order_values(fresh))
    assert cuts >= 5

def test_without_previous_and_cache_the_build_is_as_before() -> None:
    request = Request(user_input="hi", system=SYSTEM, env={"time": "10:00"})
    ctx = ContextBuilder().build(BuildPlan.named("tool_heavy"), request)
    assert ctx.report.cache is None and ctx.stable_fingerprint is None
    assert "time: 10:00" in ctx.messages[0].content  # env in the system message, as ever
    assert not ctx.fingerprint.stable


def test_environment_facts_go_after_the_stable_part() -> None:
    builder = ContextBuilder()
    first = builder.build(BuildPlan.named("tool_heavy"), Request(
        user_input="hi", system=SYSTEM, env={"time": "10:00"}), cache=True)
    second = builder.build(BuildPlan.named("tool_heavy"), Request(
        user_input="hi", system=SYSTEM, env={"time": "10:01"}), previous=first)
    assert first.messages[0] == second.messages[0], "the system message does not change"
    assert "10:00" not in first.messages[0].content
    # Before the question (which stays last), after everything that stays.
    assert first.messages[-1].content == "hi"
    assert first.messages[-2].role == "user" and "10:00" in first.messages[-2].content
    assert second.report.cache.prefix_tokens > 0  # type: ignore[union-attr]
    # In an agent loop whose turn has results, after the results: the loop only appends.
    turn = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{}"}]
    loop = builder.build(BuildPlan.named("tool_heavy"), Request(
        user_input="hi", system=SYSTEM, tools=TOOLS, turn=turn, env={"time": "10:02"}),
        cache=True)
    assert loop.messages[-1].role == "user" and "10:02" in loop.messages[-1].content
    assert loop.messages[-2].role == "tool"


def test_tool_result_tiers_change_only_when_the_cut_advances() -> None:
    contexts = [ctx for _, ctx in replay([4] * 12, history=3000)]
    for before, ctx in itertools.pairwise(contexts):
        cache = ctx.report.cache
        assert cache is not None
        if not cache.advanced:
            stable = before.stable_fingerprint.stable_end  # type: ignore[union-attr]
            assert openai_messages(ctx)[:stable] == openai_messages(before)[:stable]


def test_a_fingerprint_survives_json_and_bad_ones_are_typed_errors() -> None:
    _, ctx = list(replay([3, 3]))[-1]
    text = ctx.fingerprint.to_json()
    assert Fingerprint.from_json(text) == ctx.fingerprint
    assert len(text) < 4000, "small enough for a session state"
    data = json.loads(text)
    assert data["layouts"]["history"]["lead"] == [0, 1], "the first question leads"
    bad_lead = {**data, "layouts": {"history": {**data["layouts"]["history"], "lead": [3]}}}
    for bad in ("{", "[]", '{"version": 99}', json.dumps({**data, "tokens": [1]}),
                json.dumps(bad_lead)):
        with pytest.raises(InvalidInputError):
            Fingerprint.from_json(bad)
    older = {**data, "layouts": {"history": {k: v for k, v in data["layouts"]["history"].items()
                                             if k != "lead"}}}
    assert Fingerprint.from_json(json.dumps(older)).layouts["history"].lead == ()
    with pytest.raises(InvalidInputError):
        ContextBuilder().build(plan(), Request(user_input="x"), previous=42)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        CachePolicy(step=1.5)


def test_previous_from_a_json_fingerprint_continues_like_the_context() -> None:
    requests = list(replay([5, 5, 5]))
    request, ctx = requests[-1]
    previous = requests[-2][1]
    builder = ContextBuilder()
    from_json = builder.build(plan(), request, previous=previous.fingerprint.to_json())
    assert from_json.messages == ctx.messages


def test_a_plan_that_places_history_otherwise_cuts_it_afresh() -> None:
    *_, (request, ctx) = replay([6] * 12, history=1500)
    builder = ContextBuilder()
    same = builder.build(plan(1500), request, previous=ctx)
    other = builder.build(plan(1200), request, previous=ctx)
    assert same.messages == ctx.messages
    cache = other.report.cache
    assert cache is not None and cache.advanced == ("history",)
    assert cache.reason == "history's cut advanced: the plan gives it other settings"


def test_price_models_price_cached_tokens() -> None:
    anthropic_prices, openai_prices = PRICE_MODELS
    assert anthropic_prices.relative_cost(0, 1000) == 1.0  # under 1,024: nothing is written
    assert anthropic_prices.relative_cost(0, 2000) == pytest.approx(1.25)
    assert anthropic_prices.relative_cost(2000, 2000) == pytest.approx(0.1)
    assert openai_prices.cached(1000) == 0  # below 1,024 nothing is cached
    assert openai_prices.cached(1300) == 1280  # 1,024 and whole 128-token steps
    assert PriceModel("x", 0.5, 1.0, 0).relative_cost(500, 1000) == pytest.approx(0.75)


# --- provider hints -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


def test_anthropic_requests_carry_at_most_four_breakpoints_and_are_accepted(
        server: ProviderServer) -> None:
    client = anthropic.Anthropic(base_url=server.origin, api_key="test", max_retries=0)
    adapter: TypeAdapter[Any] = TypeAdapter(MessageCreateParamsNonStreaming)
    for turn, (_, ctx) in enumerate(replay([4, 7, 2, 9, 3])):
        body = ctx.to_request("anthropic", model="claude-sonnet-4-5")
        adapter.validate_python(body)
        marks = [b for b in [*body.get("tools", []), *body["system"],
                             *(b for m in body["messages"] for b in m["content"])]
                 if "cache_control" in b]
        # The first call has no history, and its input follows the env part (which changes
        # every call): only the system prompt ends a prefix the next call reads.
        assert (2 if turn else 1) <= len(marks) <= 4
        # The system prompt's breakpoint caches the tools before it: none of their own.
        assert "cache_control" not in body["tools"][-1]
        assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
        client.messages.create(**body)
        plain = ctx.to_request("anthropic", model="claude-sonnet-4-5", cache=False)
        assert "cache_control" not in json.dumps(plain)


def test_openai_requests_carry_the_prompt_cache_key(server: ProviderServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    builder = ContextBuilder()
    ctx = builder.build(plan(), Request(user_input="hi", system=SYSTEM, tools=TOOLS),
                        cache=True, cache_key="session-hash-1")
    chat = ctx.to_request("openai", model="gpt-4o")
    responses = ctx.to_request("openai-responses", model="gpt-4o")
    TypeAdapter(CompletionCreateParamsNonStreaming).validate_python(chat)
    TypeAdapter(ResponseCreateParamsNonStreaming).validate_python(responses)
    assert chat["prompt_cache_key"] == responses["prompt_cache_key"] == "session-hash-1"
    client.chat.completions.create(**chat)
    client.responses.create(**responses)


# --- ContextManager ---------------------------------------------------------------------------


def test_the_manager_keeps_the_fingerprint_so_another_worker_continues(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    first = ContextManager(SqliteStore(path), system=SYSTEM, background=False)
    second = ContextManager(SqliteStore(path), system=SYSTEM, background=False)
    try:
        prepared = first.prepare("u1", "s1", "Where is my order ORD0001?", tools=TOOLS)
        assert first.state("u1", "s1").cache is not None
        first.record("u1", "s1", assistant="It has shipped.")
        again = second.prepare("u1", "s1", "And ORD0002?", tools=TOOLS)
        cache = again.report.cache
        assert cache is not None and cache.previous
        assert cache.prefix_tokens > 0 and cache.messages_kept >= 2
        body = again.to_request("openai", model="gpt-4o")
        assert body["prompt_cache_key"] and "u1" not in body["prompt_cache_key"]
        assert prepared.to_request("anthropic", model="claude-sonnet-4-5")["system"][0][
            "cache_control"] == {"type": "ephemeral"}
    finally:
        first.close()
        second.close()


def test_a_manager_with_cache_off_stores_no_fingerprint() -> None:
    manager = ContextManager(system=SYSTEM, background=False, cache=False)
    prepared = manager.prepare("u", "s", "hello")
    assert prepared.report.cache is None and manager.state("u", "s").cache is None


def test_an_unreadable_stored_fingerprint_starts_a_new_line(caplog: pytest.LogCaptureFixture
                                                            ) -> None:
    from contextwright.session.memory import MemoryStore
    from contextwright.session.state import update_state
    from contextwright.session.store import SessionKey

    store = MemoryStore()
    manager = ContextManager(store, system=SYSTEM, background=False)
    manager.prepare("u", "s", "hello")
    manager.record("u", "s", assistant="hi")
    key = SessionKey(user_id="u", session_id="s")
    update_state(store, key, lambda s: replace(s, cache={"version": 0}))
    prepared = manager.prepare("u", "s", "again")
    assert prepared.report.cache is not None and not prepared.report.cache.previous
    assert "fingerprint unreadable" in caplog.text


def tool(name: str, description: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object", "properties": {}}}}


SHOP_TOOLS = [tool("get_weather", "Current weather of a city."),
              tool("save_memo", "Save a memo for the user."),
              tool("list_orders", "List the user's orders."),
              tool("refund_order", "Refund an order.")]


def relevant_tools_plan() -> BuildPlan:
    base = BuildPlan.named("tool_heavy")
    return replace(base, sources=tuple(
        replace(s, options={"select": "relevant", "max_tools": 2}) if s.source == "tools"
        else s for s in base.sources))


def tool_names(ctx: FinalContext) -> list[str]:
    return [schema["function"]["name"] for schema in ctx.tool_schemas]


def test_a_tool_once_in_stays_in_until_the_input_needs_another() -> None:
    builder, plan_ = ContextBuilder(), relevant_tools_plan()
    first = builder.build(plan_, Request(user_input="What is the weather in Paris?",
                                         tools=SHOP_TOOLS), cache=True)
    assert tool_names(first) == ["get_weather"]
    # A follow-up that names no tool keeps the same tools (fresh, it would offer them all).
    follow = builder.build(plan_, Request(user_input="and in Rome?", tools=SHOP_TOOLS),
                           previous=first)
    fresh = builder.build(plan_, Request(user_input="and in Rome?", tools=SHOP_TOOLS))
    assert tool_names(follow) == ["get_weather"] and len(tool_names(fresh)) == 2
    assert follow.report.cache.prefix_tokens > 0  # type: ignore[union-attr]
    # An input that needs other tools gets them: the set changes, and the report says so.
    orders = builder.build(plan_, Request(user_input="refund my orders please",
                                          tools=SHOP_TOOLS), previous=follow)
    assert set(tool_names(orders)) == {"list_orders", "refund_order"}
    assert orders.report.cache.reason == "the tool definitions changed"  # type: ignore[union-attr]


def test_with_the_cache_on_a_fact_summarised_away_is_still_recalled() -> None:
    from test_manager_recall import FACT, QUESTION, _say, _small_talk

    manager = ContextManager(background=False)  # cache on: the default
    _say(manager, FACT, "Noted.")
    _small_talk(manager, 38, start=2)
    for _ in range(3):  # whichever call the question comes on, the recalled fact is shown
        prepared = manager.prepare("u", "s", QUESTION)
        assert manager.state("u", "s").summary_upto > 2
        assert any(FACT in str(m["content"]) for m in prepared.to_messages("openai"))
        assert prepared.to_messages("openai")[-1]["content"] == QUESTION
        manager.record("u", "s", assistant="It is 4-19-27.")


RECALL_MARKER = re.compile(r"^\[recalled[^\]]*\]\n")
TOPICS = ["the lighthouse trip", "Maya's violin recital", "the broken bike", "a sourdough starter",
          "the chess club", "moving to Lisbon", "the garden shed", "a job interview"]


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(TOPICS) - 1), st.integers(1, 30)), min_size=3,
                max_size=30))
def test_a_chat_with_recall_keeps_its_prefix_or_reports_the_break(
        turns: list[tuple[int, int]]) -> None:
    builder = ContextBuilder()
    chat = BuildPlan.named("chat").with_budget(available_override=900)
    history: list[dict[str, Any]] = []
    before: FinalContext | None = None
    for index, (topic, length) in enumerate(turns):
        question = f"What did we decide about {TOPICS[topic]}? ({index})"
        ctx = builder.build(chat, Request(user_input=question, history=list(history)),
                            previous=before, cache=True)
        assert ctx.total_tokens <= ctx.available
        shown = [RECALL_MARKER.sub("", str(m["content"])) for m in ctx.to_messages("openai")]
        assert len(shown) == len(set(shown)), "a message was shown twice (plain and recalled)"
        cache = ctx.report.cache
        assert cache is not None
        if before is not None:
            old, new = openai_messages(before), openai_messages(ctx)
            stable = before.stable_fingerprint.stable_end  # type: ignore[union-attr]
            if old[:stable] != new[:stable]:
                assert cache.broke_at is not None and cache.broke_at < stable and cache.reason
        before = ctx
        history += [{"role": "user", "content": question},
                    {"role": "assistant",
                     "content": f"About {TOPICS[topic]} ({index}): " + "fine " * length}]


def test_a_turn_the_layout_shows_in_its_place_is_not_recalled_into_it_again() -> None:
    # Turn 1 answers every fourth question; once the cut advances it stays in the pinned head,
    # in its place and unmarked. Recalled again, it must not be shown a second time (marked).
    builder = ContextBuilder()
    chat = BuildPlan.named("chat").with_budget(available_override=900)
    words = ["lighthouse", "violin", "bicycle", "sourdough", "chess", "Lisbon", "garden",
             "interview", "painting", "camping", "pottery", "marathon"]
    history: list[dict[str, Any]] = []
    before: FinalContext | None = None
    for t in range(90):
        topic = words[t % len(words)]
        question = (f"Tell me again about my career options in counseling ({t})" if t % 4 == 3
                    else f"Today I did some {topic} with friends, it was fun ({t}).")
        ctx = builder.build(chat, Request(user_input=question, history=list(history)),
                            previous=before, cache=True)
        shown = [RECALL_MARKER.sub("", str(m["content"])) for m in ctx.to_messages("openai")]
        assert len(shown) == len(set(shown)), f"call {t} shows a message twice"
        before = ctx
        reply = (f"Your career options in counseling: school counselor, therapist ({t})."
                 if t == 1 else f"Nice, {topic} sounds lovely; tell me more about it ({t}).")
        history += [{"role": "user", "content": question}, {"role": "assistant", "content": reply}]


def test_a_reply_that_repeats_the_previous_last_message_is_not_taken_for_its_end() -> None:
    builder, chat = ContextBuilder(), BuildPlan.named("chat").with_budget(window=4000)
    first = [{"role": "user", "content": "first question"}, {"role": "assistant", "content": "OK."}]
    one = builder.build(chat, Request(user_input="next", history=first), cache=True)
    more = [*first, {"role": "user", "content": "please remember my name is Bob"},
            {"role": "assistant", "content": "OK."}]
    two = builder.build(chat, Request(user_input="what is my name?", history=more), previous=one)
    assert any("Bob" in m.content for m in two.messages)
    assert [m.content for m in two.messages] == [
        m.content for m in builder.build(chat, Request(user_input="what is my name?",
                                                       history=more), cache=True).messages]


def chat_rounds(count: int) -> list[dict[str, Any]]:
    """``count`` rounds of a small chat: a question, its answer."""
    return [message for t in range(count) for message in (
        {"role": "user", "content": f"question {t}: what about item {t}?"},
        {"role": "assistant", "content": f"answer {t}: item {t} is fine " + "and good " * 8})]


@pytest.mark.parametrize(("budget", "rounds", "at"), [(3000, 6, 6), (1500, 60, 110)])
def test_turns_inserted_into_earlier_history_are_shown_and_reported_as_an_edit(
        budget: int, rounds: int, at: int) -> None:
    builder = ContextBuilder()
    chat = BuildPlan.named("chat").with_budget(available_override=budget)
    first = builder.build(chat, Request(user_input="next?", system="S",
                                        history=chat_rounds(rounds)), cache=True)
    edited = chat_rounds(rounds + 1)
    edited[at:at] = [{"role": "user", "content": "Remember: the door code is 4417."},
                     {"role": "assistant", "content": "Noted."}]
    request = Request(user_input="continue", system="S", history=edited)
    ctx = builder.build(chat, request, previous=first.fingerprint, cache=True)
    # Inserted into the turns the previous build showed: shown now, as a fresh build shows it.
    assert any("4417" in m.content for m in ctx.messages)
    assert any("4417" in m.content for m in builder.build(chat, request, cache=True).messages)
    cache = ctx.report.cache
    assert cache is not None and cache.advanced == ("history",)
    assert "inserted" in cache.reason and "edited" in cache.reason
    assert not any(d.key in ("history.m6", "history.m7") and "kept run" in d.reason
                   for d in ctx.report.decisions)


def test_a_pinned_head_older_than_the_budget_reaches_is_found_again_after_a_cut() -> None:
    # Past the first cut the history is longer than the budget: the newest-first stream stops
    # well short of the pinned head (the oldest messages), which must still be found.
    builder = ContextBuilder()
    heavy = BuildPlan.named("tool_heavy").with_budget(available_override=1200)
    history: list[dict[str, Any]] = []
    previous: FinalContext | None = None
    cuts = 0
    for t in range(24):
        request = Request(user_input=f"Where is my order ORD{t:04d}?", system=SYSTEM * 8,
                          history=list(history), tools=TOOLS)
        ctx = builder.build(heavy, request, previous=previous, cache=True)
        cache = ctx.report.cache
        assert cache is not None
        if cache.advanced and previous is not None and cuts:
            # Only the appended messages force a cut; the head (system, first question) stays.
            assert "no longer fits" in cache.reason, cache.reason
            assert cache.messages_kept >= 2
        cuts += bool(cache.advanced)
        previous = ctx
        history += turn_messages(t, 3 + t % 4)
    assert cuts >= 3


CHAT_4000 = BuildPlan.named("chat").with_budget(available_override=4000)


def _chat_with_cuts(turns: int) -> list[tuple[Request, FinalContext]]:
    """A chat past its first cuts, a long system prompt (the prefix is worth caching)."""
    builder = ContextBuilder()
    topics = ["puppy", "Lisbon trip", "order 1001", "my cat Bo", "the guitar lessons"]
    history: list[dict[str, Any]] = []
    built: list[tuple[Request, FinalContext]] = []
    for t in range(turns):
        topic = topics[t % len(topics)]
        question = f"When did we talk about {topic}? ({t})" if t % 3 == 0 else f"I love {topic}."
        request = Request(user_input=question, system="You are a terse assistant. " * 150,
                          history=list(history))
        built.append((request, builder.build(CHAT_4000, request,
                                             previous=built[-1][1] if built else None,
                                             cache=True)))
        history += [{"role": "user", "content": question},
                    {"role": "assistant", "content": f"About {topic}: detail {t}. " * (t % 5 + 8)}]
    return built


def test_after_a_cut_anthropic_reads_the_pinned_head_an_earlier_breakpoint_wrote() -> None:
    built = [ctx for _, ctx in _chat_with_cuts(40)]
    cuts = 0
    for before, ctx in itertools.pairwise(built):
        cache = ctx.report.cache
        assert cache is not None
        body = before.to_request("anthropic", model="claude-sonnet-4-5")
        marks = [b for b in [*body["system"], *(b for m in body["messages"]
                                                for b in m["content"])] if "cache_control" in b]
        assert len(marks) <= 4
        if not cache.advanced or cache.messages_kept < 2:
            continue
        cuts += 1
        # The previous request marked the end of the head every cut keeps (a grown head
        # reaches further): Anthropic reads the prefix through it, and the report says so.
        ends = [p for p in before.cache_points if p < cache.messages_kept]
        assert ends, "only the system prompt is read"
        assert before.messages[ends[-1]].content in json.dumps(marks, ensure_ascii=False)
        assert cache.readable_tokens["anthropic"] == sum(ctx.message_tokens[:ends[-1] + 1])
        assert cache.readable_tokens["openai"] == cache.prefix_tokens
    assert cuts >= 2


def test_the_anthropic_price_counts_only_a_prefix_an_earlier_breakpoint_wrote() -> None:
    built = _chat_with_cuts(34)
    reports = [ctx.report.cache for _, ctx in built]
    at = next(i for i, r in enumerate(reports) if r and r.advanced and r.messages_kept > 1)
    before, (request, ctx) = built[at - 1][1], built[at]
    cache = ctx.report.cache
    assert cache is not None
    # The same requests, had the earlier one been sent with the system prompt's breakpoint
    # only: the identical prefix is as long, but Anthropic reads the system prompt alone.
    unmarked = replace(before.fingerprint, breakpoints=(0,))
    again = ContextBuilder().build(CHAT_4000, request, previous=unmarked,
                                   cache=True).report.cache
    assert again is not None and again.prefix_tokens == cache.prefix_tokens
    system = ctx.message_tokens[0]
    assert again.readable_tokens == {"anthropic": system, "openai": cache.prefix_tokens}
    assert again.cost["anthropic"] > cache.cost["anthropic"]
    assert again.cost["openai"] == cache.cost["openai"]


def test_a_text_build_continues_its_own_fingerprint() -> None:
    builder = ContextBuilder()
    request = Request(user_input="hello", system=SYSTEM)
    first = builder.build(plan(), request, target="text", cache=True)
    again = builder.build(plan(), request, target="text",
                          previous=Fingerprint.from_json(first.fingerprint.to_json()))
    cache = again.report.cache
    assert cache is not None and cache.messages_kept == len(first.messages)


def test_a_session_erased_during_a_build_does_not_get_its_fingerprint_back() -> None:
    from contextwright.errors import SessionGone
    from contextwright.session.memory import MemoryStore
    from contextwright.session.store import SessionKey

    store = MemoryStore()
    manager = ContextManager(store, system=SYSTEM, background=False)
    manager.prepare("u", "s", "hello")
    manager.record("u", "s", assistant="hi")
    key = SessionKey(user_id="u", session_id="s")
    build = manager._build

    def erase_and_recreate(*args: Any, **kwargs: Any) -> FinalContext:
        context = build(*args, **kwargs)
        manager.erase_session("u", "s")
        store.append(key, [{"role": "user", "content": "a new session"}])
        return context

    manager._build = erase_and_recreate  # type: ignore[method-assign]
    with pytest.raises(SessionGone):
        manager.prepare("u", "s", None)
    assert manager.state("u", "s").cache is None


def test_trusted_mode_rules_stay_in_the_system_prompt_and_zones_are_data() -> None:
    from contextwright.core.providers import ANTHROPIC_LEAD

    manager = ContextManager(system="你是客服助手。", background=False)
    prepared = manager.prepare("u", "s", "先查订单 A-20241001 再退款")
    messages = prepared.to_messages("openai")
    assert "[输出区]" in messages[0]["content"]  # trusted: the system prompt
    assert not any("<<data" in str(m["content"]) for m in messages if m["role"] == "user")
    body = prepared.to_request("anthropic", model="claude-sonnet-4-5")
    text = json.dumps(body, ensure_ascii=False)
    assert ANTHROPIC_LEAD not in text  # nothing was omitted, so no lead message
    blocks = [b for m in body["messages"] for b in m["content"]]
    assert any(b["type"] == "search_result" and "[任务区]" in json.dumps(b, ensure_ascii=False)
               for b in blocks)
    assert body["messages"][-1]["content"][-1]["text"] == "先查订单 A-20241001 再退款"


def _recall_chat(objective: str, calls: int = 70, *, tail: bool = False
                 ) -> list[FinalContext]:
    """A chat whose inputs each recall other older turns, replayed with ``objective``.

    Without ``tail``, recalled turns join the kept run (an allowance) and a cut follows when
    they are not enough, so the objectives' cuts can be compared.
    """
    # Coverage 0.68 (the default before ``recall_cuts``): the objectives' cuts stay comparable.
    policy = CachePolicy(objective=objective, recall_tail=tail,  # type: ignore[arg-type]
                         recall_share=0 if tail else 0.15, min_recall_coverage=0.68)
    topics = [TOPICS[(t * 3) % len(TOPICS)] for t in range(calls)]
    return _replay_chat(
        ContextBuilder(), policy, [],
        [f"Remind me what we said about {topic} last time ({t})."
         for t, topic in enumerate(topics)],
        lambda t: _news(topics[t], t))


def _news(topic: str, t: int) -> list[dict[str, Any]]:
    """A round of news on ``topic``, its reply one of several lengths."""
    return [{"role": "user", "content": f"Some news on {topic} ({t})."},
            {"role": "assistant",
             "content": f"Noted about {topic} ({t}): " + "details " * (8 + t % 9)}]


def _replay_chat(builder: ContextBuilder, policy: CachePolicy,
                 history: list[dict[str, Any]], inputs: list[str],
                 after: Callable[[int], list[dict[str, Any]]]) -> list[FinalContext]:
    """Each input a ``chat`` call continuing the previous one; ``after(t)`` is then appended."""
    chat = BuildPlan.named("chat").with_budget(available_override=1500)
    before: FinalContext | None = None
    built = []
    for t, asked in enumerate(inputs):
        ctx = builder.build(chat, Request(user_input=asked, history=list(history)),
                            previous=before, cache=policy)
        assert ctx.total_tokens <= ctx.available
        built.append(ctx)
        before = ctx
        history += after(t)
    return built


def test_the_cost_objective_frees_its_step_from_lesser_recalled_turns_and_cuts_less() -> None:
    fill, cost = _recall_chat("fill"), _recall_chat("cost")
    cuts = {name: sum(bool(c.report.cache and c.report.cache.advanced) for c in built)
            for name, built in (("fill", fill), ("cost", cost))}
    assert 0 < cuts["cost"] < cuts["fill"]
    cached = {name: _cached_share(built) for name, built in (("fill", fill), ("cost", cost))}
    assert cached["cost"] > cached["fill"]
    lesser = "recalled below the best for this input; left out to leave room"
    assert any(lesser in d.reason for c in cost for d in c.report.decisions)
    assert not any(lesser in d.reason for c in fill for d in c.report.decisions)
    for ctx in cost:  # what was left out to free the step is not shown after all
        shown = {d.key for d in ctx.report.decisions if d.action == "kept"}
        assert not {d.key for d in ctx.report.decisions if lesser in d.reason} & shown


def _cuts(built: list[FinalContext], why: str) -> list[FinalContext]:
    return [c for c in built if c.report.cache and c.report.cache.advanced
            and why in (c.report.cache.reason or "")]


def test_the_balanced_objective_frees_recalled_turns_only_on_cuts_the_appended_messages_force(
        ) -> None:
    fill, balanced = _recall_chat("fill"), _recall_chat("balanced")
    assert CachePolicy().objective == "balanced"
    lesser = "recalled below the best for this input; left out to leave room"
    outgrown = _cuts(balanced, "no longer fits its grant")
    for_recall = _cuts(balanced, "of the turns recalled for this input")
    assert outgrown and for_recall  # the chat exercises both kinds of cut
    # A cut forced by growth frees its step from lesser recalled turns, so later calls append.
    assert any(lesser in d.reason for c in outgrown for d in c.report.decisions)
    # A cut the input's recall forces keeps every recalled turn that fits.
    assert not any(lesser in d.reason for c in for_recall for d in c.report.decisions)
    cuts = {name: sum(bool(c.report.cache and c.report.cache.advanced) for c in built)
            for name, built in (("fill", fill), ("balanced", balanced))}
    assert cuts["balanced"] < cuts["fill"]
    cached = {name: _cached_share(built)
              for name, built in (("fill", fill), ("balanced", balanced))}
    assert cached["balanced"] > cached["fill"]


def _transient(ctx: FinalContext) -> list[int]:
    """Indexes of the messages after the kept run that the fingerprint leaves out."""
    fingerprint = ctx.fingerprint
    assert fingerprint is not None
    end = fingerprint.stable_end
    return [i for i, section in enumerate(ctx.sections) if i >= end and section == "history"]


def test_turns_an_input_recalls_go_after_the_kept_run_for_that_call_only() -> None:
    built = _recall_chat("balanced", tail=True)
    with_tail = [(i, c) for i, c in enumerate(built[:-1]) if _transient(c)]
    assert with_tail, "the chat never showed recalled turns after its kept run"
    for i, ctx in with_tail:
        tail = _transient(ctx)
        messages = ctx.to_messages("openai")
        assert tail == list(range(tail[0], tail[-1] + 1))  # one run, right after the kept run
        assert all(str(messages[j]["content"]).startswith("[recalled]")
                   for j in tail if messages[j]["role"] == "user")
        assert str(messages[tail[0]]["content"]).startswith("[recalled]")
        assert messages[-1]["role"] == "user"  # the question stays last
        cache = ctx.report.cache
        assert cache is not None
        positions = [int(key.split(".m")[1]) for key in cache.transient]
        assert positions == sorted(positions), "the tail's turns in their original order"
        assert cache is not None and not cache.advanced  # no cut for them
        # The report names each of them (one key a message), and its JSON form keeps them.
        assert len(cache.transient) == len(set(cache.transient)) == len(tail)
        recalled = {d.key for d in ctx.report.decisions if d.action == "kept"}
        assert recalled & set(cache.transient)  # the recalled turns' own messages among them
        assert cache_report_from_dict(json.loads(json.dumps(cache.to_dict()))) == cache
        # The next call repeats everything before them: only the tail and the new turn differ.
        after = built[i + 1]
        report = after.report.cache
        assert report is not None
        if not report.advanced:
            assert report.broke_at is None or report.broke_at >= tail[0]
            assert after.to_messages("openai")[:tail[0]] == messages[:tail[0]]
            assert report.broke_at is None or "only what changes every call" in (
                report.reason or "")
        # Anthropic: the conversation's last breakpoint is the kept run's last message (one
        # before it may end the pinned head); none after it.
        assert ctx.cache_points[-1] == tail[0] - 1 and len(ctx.cache_points) <= 2
        body = ctx.to_request("anthropic", model="claude-sonnet-4-5")
        marked = [b for m in body["messages"] for b in m["content"]
                  if isinstance(b, dict) and "cache_control" in b]
        last_kept = str(messages[tail[0] - 1]["content"])
        assert len(marked) == len(ctx.cache_points)
        assert last_kept in json.dumps(marked[-1], ensure_ascii=False)
        assert ctx.total_tokens <= ctx.available


def test_under_cost_a_cut_the_input_forces_shows_its_lesser_recalled_turns_for_that_call_only(
        ) -> None:
    built = _recall_chat("cost", tail=True)
    lesser = "recalled below the best for this input; left out to leave room"
    forced = [(i, c) for i, c in enumerate(built[:-1])
              if c.report.cache and c.report.cache.advanced and c.report.cache.transient]
    assert forced, "no cut showed its freed recalled turns after the kept run"
    for i, ctx in forced:
        cache = ctx.report.cache
        assert cache is not None and "of the turns recalled for this input" in (cache.reason or "")
        tail = _transient(ctx)
        assert len(tail) == len(cache.transient)
        assert not {d.key for d in ctx.report.decisions if lesser in d.reason} & set(
            cache.transient)  # shown, so not reported as left out
        assert ctx.cache_points[-1] == tail[0] - 1  # nothing after the kept run is cached
        after = built[i + 1].report.cache
        assert after is not None
        if not after.advanced:  # the next call continues the run without them
            assert after.broke_at is None or after.broke_at >= tail[0]
    # With the tail off, "cost" drops them as before.
    plain = _recall_chat("cost")
    assert not any(c.report.cache and c.report.cache.transient for c in plain)
    assert any(lesser in d.reason for c in plain for d in c.report.decisions)


def test_without_the_recall_tail_a_layout_that_lacks_recalled_turns_is_cut_instead() -> None:
    built = _recall_chat("balanced")
    assert not any(_transient(c) for c in built)
    assert any("of the turns recalled for this input" in (c.report.cache.reason or "")
               for c in built if c.report.cache)


def test_an_unknown_cache_objective_is_a_typed_error() -> None:
    with pytest.raises(InvalidInputError, match="objective"):
        CachePolicy(objective="speed")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="recall_tail"):
        CachePolicy(recall_tail="yes")  # type: ignore[arg-type]


# --- how focused an input's recall is --------------------------------------------------------

CHATTY = ("Busy week: the lighthouse, violin practice, a bike repair, baking bread with the "
          "starter, chess on Tuesday, boxes for Lisbon, painting the shed and interview prep "
          "({t}).")


def _topic_history(turns: int) -> list[dict[str, Any]]:
    return [m for t in range(turns) for m in _news(TOPICS[t % len(TOPICS)], t)]


def test_a_question_about_one_turn_is_focused_and_a_chatty_message_is_not() -> None:
    turns = turn_index(_topic_history(24)).turns
    recaller = LexicalTurnRecaller(expansion=RecallExpansion())
    focused = recaller.focus("When was the violin recital?", turns, limit=8)
    chatty = recaller.focus(CHATTY.format(t=0), turns, limit=8)
    assert focused is not None and chatty is not None
    assert 0 <= chatty < CachePolicy().min_recall_focus < 0.5 < focused <= 1
    assert recaller.focus("the and of", turns, limit=8) is None  # nothing to match
    # The focus comes with the ranking it belongs to: asked again, the same value.
    recaller.rank("When was the violin recital?", turns, limit=8)
    assert recaller.focus("When was the violin recital?", turns, limit=8) == focused


WORDS = ("lighthouse", "violin", "bicycle", "sourdough", "chess", "Lisbon", "shed", "interview",
         "kayak", "pottery", "tango", "orchard", "telescope", "marathon", "aquarium", "origami",
         "vineyard", "glacier", "harmonica", "lantern", "quilt", "falcon", "canyon", "tapestry")


def _word_history() -> list[dict[str, Any]]:
    """48 rounds of news, each on one of ``WORDS``."""
    return [m for t in range(48) for m in _news(f"the {WORDS[t % len(WORDS)]}", t)]


def _mixed_input(t: int) -> str:
    """A chatty input naming eight topics (diffuse recall: each older turn holds one of its
    words), and every fifth input a question about one topic."""
    named = [WORDS[(t * 5 + k) % len(WORDS)] for k in range(8)]
    return (f"What did we say about the {named[0]}?" if t % 5 == 4
            else f"Busy days: {', '.join(named)} and more ({t}).")


def _thanks(t: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"Thanks, noted ({t})."},
            {"role": "assistant", "content": f"You are welcome ({t}). " + "ok " * 9}]


def _mixed_chat(min_focus: float, recaller: Any = None, calls: int = 60,
                coverage: float = CachePolicy().min_recall_coverage,
                diffuse_tail: str = CachePolicy().diffuse_tail,
                inputs: Callable[[int], str] = _mixed_input,
                recall_cuts: str = CachePolicy().recall_cuts,
                statement_tail: bool | str = CachePolicy().statement_tail) -> list[FinalContext]:
    """A chat of ``inputs`` (``_mixed_input``s) over ``_word_history``."""
    builder = ContextBuilder(sources=() if recaller is None else [HistorySource(recaller)])
    policy = CachePolicy(min_recall_focus=min_focus, min_recall_coverage=coverage,
                         diffuse_tail=diffuse_tail,  # type: ignore[arg-type]
                         recall_cuts=recall_cuts,  # type: ignore[arg-type]
                         statement_tail=statement_tail)  # type: ignore[arg-type]
    return _replay_chat(builder, policy, _word_history(),
                        [inputs(t) for t in range(calls)], _thanks)


def _diffuse(built: list[FinalContext]) -> list[FinalContext]:
    """The calls whose input's recall is diffuse (under the default ``min_recall_focus``)."""
    return [c for c in built if c.report.cache and "history" in c.report.cache.recall_focus
            and c.report.cache.recall_focus["history"] < CachePolicy().min_recall_focus]


def _cached_share(built: list[FinalContext]) -> float:
    return (sum(c.report.cache.prefix_tokens for c in built if c.report.cache)
            / sum(c.total_tokens for c in built))


def test_a_diffuse_input_cuts_no_run_for_its_recall_a_focused_one_still_does() -> None:
    # Coverage 1: any best recalled turn missing from what is shown calls for a cut; any
    # input may cut (a statement too), so the focus gate alone holds the diffuse ones back.
    gated = _mixed_chat(CachePolicy().min_recall_focus, coverage=1.0, recall_cuts="any")
    ungated = _mixed_chat(0.0, coverage=1.0, recall_cuts="any")
    for_recall = "of the turns recalled for this input"

    def split(built: list[FinalContext]) -> tuple[list[FinalContext], list[FinalContext]]:
        rated = [(c, c.report.cache.recall_focus["history"]) for c in built
                 if c.report.cache and "history" in c.report.cache.recall_focus]
        threshold = CachePolicy().min_recall_focus
        return ([c for c, f in rated if f < threshold], [c for c, f in rated if f >= threshold])

    diffuse, focused = split(gated)
    assert diffuse and focused
    assert not _cuts(diffuse, for_recall)  # never cut for a diffuse input's recall
    assert _cuts(focused, for_recall)  # a focused input still cuts when the run lacks its turns
    # Without the gate, diffuse inputs cut for their recall too, and less is cached.
    assert _cuts(split(ungated)[0], for_recall)
    assert _cached_share(gated) > _cached_share(ungated) + 0.1
    report = gated[-1].report.cache
    assert report is not None
    assert cache_report_from_dict(json.loads(json.dumps(report.to_dict()))) == report


def _diffuse_question(t: int) -> str:
    """``_mixed_input``, its chatty statements asked as questions."""
    text = _mixed_input(t)
    return text if text.endswith("?") else text.replace("Busy days:", "How did these go:")


def test_a_diffuse_statement_is_shown_the_run_as_it_is_a_diffuse_question_gets_a_tail() -> None:
    # "Busy days: the kayak, the violin…" asks nothing, and its recalled turns each match one
    # word of it: turns shown after the run would be paid for uncached, for a weak signal.
    statements = _mixed_chat(CachePolicy().min_recall_focus)
    assert _diffuse(statements) and not any(_transient(c) for c in _diffuse(statements))
    # Asked as a question, the same words get the missing turns after the run.
    questions = _mixed_chat(CachePolicy().min_recall_focus, inputs=_diffuse_question)
    assert any(_transient(c) for c in _diffuse(questions))
    # "always" shows every diffuse input its tail (the earlier default), "never" none.
    always = _mixed_chat(CachePolicy().min_recall_focus, diffuse_tail="always",
                         statement_tail=True)
    assert any(_transient(c) for c in _diffuse(always))
    never = _mixed_chat(CachePolicy().min_recall_focus, diffuse_tail="never",
                        inputs=_diffuse_question)
    assert _diffuse(never) and not any(_transient(c) for c in _diffuse(never))
    assert _cached_share(statements) > _cached_share(always)
    with pytest.raises(InvalidInputError, match="diffuse_tail"):
        CachePolicy(diffuse_tail="sometimes")  # type: ignore[arg-type]


def _focused_statement(t: int) -> str:
    """A statement about one older topic (focused recall), every fifth input a question."""
    word = WORDS[(t * 5) % len(WORDS)]
    return (f"What did we say about the {word}?" if t % 5 == 4
            else f"The {word} news made my day ({t}).")


def test_only_a_question_cuts_the_run_for_its_recall_a_statement_gets_a_tail() -> None:
    for_recall = "of the turns recalled for this input"
    questions = _mixed_chat(CachePolicy().min_recall_focus, coverage=1.0,
                            inputs=_focused_statement, statement_tail=True)
    asked = [c for c, t in zip(questions, range(60), strict=True) if t % 5 == 4]
    told = [c for c, t in zip(questions, range(60), strict=True) if t % 5 != 4]
    assert _cuts(asked, for_recall) and not _cuts(told, for_recall)
    assert any(_transient(c) for c in told)  # its turns go after the run, this call only
    # Without tails for statements, a statement is shown the run as it is (nothing after it
    # is sent uncached for one call), and more of the chat is cached.
    untailed = _mixed_chat(CachePolicy().min_recall_focus, coverage=1.0,
                           inputs=_focused_statement, statement_tail=False)
    told_untailed = [c for c, t in zip(untailed, range(60), strict=True) if t % 5 != 4]
    assert not _cuts(told_untailed, for_recall)
    assert not any(_transient(c) for c in told_untailed)
    assert _cached_share(untailed) > _cached_share(questions)
    anyone = _mixed_chat(CachePolicy().min_recall_focus, coverage=1.0,
                         inputs=_focused_statement, recall_cuts="any")
    assert _cuts([c for c, t in zip(anyone, range(60), strict=True) if t % 5 != 4], for_recall)
    assert _cached_share(questions) > _cached_share(anyone)
    with pytest.raises(InvalidInputError, match="recall_cuts"):
        CachePolicy(recall_cuts="some")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="statement_tail"):
        CachePolicy(statement_tail="yes")  # type: ignore[arg-type]


def _statement_naming_a_value(t: int) -> str:
    """``_focused_statement``, every other statement naming an order id."""
    word = WORDS[(t * 5) % len(WORDS)]
    if t % 2:
        return f"About the {word}: my order ORD-{4100 + t} is the one I meant ({t})."
    return _focused_statement(t)


def test_by_default_a_statement_gets_a_tail_only_when_it_names_an_exact_value() -> None:
    # "my order ORD-4105 is the one I meant" refers back to something specific and is shown
    # the turns recalled for it; "The kayak news made my day" names nothing and is shown
    # the run as it is (a tail is sent uncached on every call that shows one).
    assert CachePolicy().statement_tail == "facts"
    built = _mixed_chat(CachePolicy().min_recall_focus, coverage=1.0,
                        inputs=_statement_naming_a_value)
    naming = [c for c, t in zip(built, range(60), strict=True) if t % 2 and t % 5 != 4]
    plain = [c for c, t in zip(built, range(60), strict=True) if not t % 2 and t % 5 != 4]
    assert any(_transient(c) for c in naming)
    assert not any(_transient(c) for c in plain)
    every = _mixed_chat(CachePolicy().min_recall_focus, coverage=1.0,
                        inputs=_statement_naming_a_value, statement_tail=True)
    assert any(_transient(c) for c, t in zip(every, range(60), strict=True)
               if not t % 2 and t % 5 != 4)
    assert _cached_share(built) > _cached_share(every)


class _PlainRecaller:
    """A user's recaller: it ranks, and cannot say how focused a query is."""

    def __init__(self) -> None:
        self._inner = LexicalTurnRecaller(expansion=RecallExpansion())

    def rank(self, query: str, turns: Any, *, limit: int) -> list[tuple[int, float]]:
        return self._inner.rank(query, turns, limit=limit)


def test_a_recaller_that_cannot_tell_its_focus_is_taken_as_focused() -> None:
    plain = _mixed_chat(CachePolicy().min_recall_focus, _PlainRecaller(), calls=30)
    ungated = _mixed_chat(0.0, _PlainRecaller(), calls=30)
    assert not any(c.report.cache and c.report.cache.recall_focus for c in plain)
    assert [c.to_messages("openai") for c in plain] == [c.to_messages("openai") for c in ungated]


def test_a_bad_min_recall_focus_is_a_typed_error() -> None:
    for bad in (-0.1, 1.5):
        with pytest.raises(InvalidInputError, match="min_recall_focus"):
            CachePolicy(min_recall_focus=bad)


def _managed_word_chat(calls: int, manager: ContextManager | None = None,
                       before_call: Callable[[int, ContextManager], None] | None = None
                       ) -> list[FinalContext]:
    """``calls`` prepares of a managed chat over ``_word_history``, mixed inputs."""
    manager = manager or ContextManager(background=False)
    history = _word_history()
    for at in range(0, len(history), 2):
        manager.record("u", "s", messages=history[at:at + 2])
    built = []
    for t in range(calls):
        if before_call is not None:
            before_call(t, manager)
        built.append(manager.prepare("u", "s", _mixed_input(t)).context)
        manager.record("u", "s", assistant=f"You are welcome ({t}). " + "ok " * 9)
    return built


def test_when_a_managed_window_slides_its_leading_recalled_turns_stay_cached() -> None:
    """The window's slide cuts the run, but the stored turns leading it are kept as its head."""
    built = _managed_word_chat(40)
    slid = [(built[i - 1], c) for i, c in enumerate(built) if i and c.report.cache
            and "no longer holds the previous cut's messages" in (c.report.cache.reason or "")]
    assert slid  # the window slid during the chat
    for before, after in slid:
        assert after.report.cache is not None
        # Its head (up to ``head_share`` of the grant) is still cached: without it, only the
        # system prompt and a turn that happened to lead the fresh cut again were.
        assert after.report.cache.prefix_tokens > CachePolicy().head_share / 2 * before.total_tokens
        assert after.messages[1] == before.messages[1]
        assert after.messages[1].content.startswith("[recalled")


def test_a_stored_turn_is_rendered_once_however_the_window_and_the_cuts_move(
        rendered: list[str]) -> None:
    """A turn recalled from the store is the same items wherever the window starts.

    It used to be placed relative to the window's start, and each cut's tiers keyed its items
    anew, so every slide and every cut rendered and counted each shown turn again.
    """
    built = _managed_word_chat(40)
    reasons = [c.report.cache.reason or "" for c in built if c.report.cache]
    assert sum("no longer holds the previous cut's messages" in r for r in reasons) >= 2
    recalled = [key for key in rendered if key.startswith("history.recalled.")]
    assert len(set(recalled)) >= 20  # the chat shows many stored turns, over many calls
    assert len(recalled) == len(set(recalled))


def test_a_fingerprint_naming_stored_turns_by_their_distance_from_the_window_still_continues(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fingerprints saved by earlier versions (a stored turn that far before the window)."""
    offsets: list[int] = []
    init = SessionHistorySource.__init__

    def noting(self: SessionHistorySource, **kwargs: Any) -> None:
        init(self, **kwargs)
        offsets.append(kwargs["begin"] - 1)

    monkeypatch.setattr(SessionHistorySource, "__init__", noting)
    key = SessionKey(user_id="u", session_id="s")

    def as_earlier_versions_wrote_it(t: int, manager: ContextManager) -> None:
        record = manager.store.get_state(key)
        if not offsets or record is None or not record.data.get("cache"):
            return
        state = json.loads(json.dumps(record.data))
        layout = state["cache"]["layouts"]["history"]
        assert all(detached(start) for start in layout["recalled"] if start < 0)
        layout["recalled"] = [start - DETACHED_ORDER - offsets[-1] if detached(start)
                              else start for start in layout["recalled"]]
        manager.store.put_state(key, state, expected_version=record.version)

    now = _managed_word_chat(24)
    earlier = _managed_word_chat(24, before_call=as_earlier_versions_wrote_it)
    assert [c.to_messages("openai") for c in earlier] == [c.to_messages("openai") for c in now]
    continued = [c for c in earlier[1:] if c.report.cache and not c.report.cache.advanced
                 and any(d.key.startswith("history.recalled.") and d.action == "kept"
                         for d in c.report.decisions)]
    assert len(continued) >= 5


def test_a_managed_chat_finds_its_recalled_stored_turns_again_on_any_worker(
        tmp_path: Path) -> None:
    """Turns recalled from the session's store stay in the cached run, call after call.

    The manager shows older turns from the store before the request's window; the next call
    (on either worker) offers them again as they were shown, so the run is continued instead
    of cut because its first messages were not offered any more.
    """
    path = tmp_path / "sessions.db"
    workers = [ContextManager(SqliteStore(path), background=False) for _ in range(2)]
    try:
        history = _word_history()
        for at in range(0, len(history), 2):
            workers[0].record("u", "s", messages=history[at:at + 2])
        built = []
        for t in range(30):
            prepared = workers[t % 2].prepare("u", "s", _mixed_input(t))
            built.append(prepared.context)
            workers[t % 2].record("u", "s", assistant=f"You are welcome ({t}). " + "ok " * 9)
    finally:
        for worker in workers:
            worker.close()
    stored = [c for c in built[:-1] if any(
        d.key.startswith("history.recalled.") and d.action == "kept"
        for d in c.report.decisions)]
    assert len(stored) >= 10  # the chat does recall stored turns
    after = [built[i + 1].report.cache for i, c in enumerate(built[:-1]) if c in stored]
    # Cuts come when the mode's window slides (every few rounds), not on every call.
    continued = [r for r in after if r is not None and not r.advanced]
    assert len(continued) >= len(after) * 0.7
    assert all(r.prefix_tokens > 0 and r.hit_share > 0.4 for r in continued)


def test_a_cut_keeps_more_of_the_previous_run_when_that_costs_the_input_little() -> None:
    # The same chat replayed with a fixed head; at each of its cuts the build is made again
    # from the same previous call with a head that may grow (the default ``head_growth``).
    fixed = CachePolicy(head_growth=None, min_recall_coverage=0.68, recall_cuts="any")
    growing = replace(fixed, head_growth=CachePolicy().head_growth)
    chat = BuildPlan.named("chat").with_budget(available_override=1500)
    builder = ContextBuilder()
    history: list[dict[str, Any]] = []
    before: FinalContext | None = None
    compared = gained = 0
    for t in range(70):
        topic = TOPICS[(t * 3) % len(TOPICS)]
        request = Request(user_input=f"Remind me what we said about {topic} last time ({t}).",
                          history=list(history))
        ctx = builder.build(chat, request, previous=before, cache=fixed)
        if before is not None and ctx.report.cache and ctx.report.cache.advanced:
            grown = builder.build(chat, request, previous=before, cache=growing)
            assert grown.report.cache is not None and grown.total_tokens <= grown.available
            assert grown.report.cache.prefix_tokens >= ctx.report.cache.prefix_tokens
            shown, _ = _kept_history(grown)
            was_shown, was_recalled = _kept_history(ctx)
            assert was_shown - was_recalled <= shown  # every plain message still shown
            lost = sum(_history_tokens(ctx, key) for key in was_recalled - shown)
            assert lost <= 0.05 * sum(_history_tokens(ctx, key) for key in was_recalled)
            compared += 1
            gained += grown.report.cache.prefix_tokens > ctx.report.cache.prefix_tokens
        before = ctx
        history += _news(topic, t)
    assert compared >= 5 and gained >= 1


def _kept_history(ctx: FinalContext) -> tuple[set[str], set[str]]:
    """Keys of the history items a build kept, and of those among them that were recalled."""
    kept = [d for d in ctx.report.decisions if d.action == "kept" and d.source == "history"]
    return ({d.key for d in kept}, {d.key for d in kept if d.reason.startswith("recalled")})


def _history_tokens(ctx: FinalContext, key: str) -> int:
    return sum(d.tokens_after for d in ctx.report.decisions
               if d.key == key and d.action == "kept")


def test_head_growth_must_be_a_share_or_none() -> None:
    for bad in (-0.1, 1.5, True):
        with pytest.raises(InvalidInputError, match="head_growth"):
            CachePolicy(head_growth=bad)  # type: ignore[arg-type]
    assert CachePolicy(head_growth=None).head_growth is None


def test_a_user_who_switches_language_keeps_the_cache_line() -> None:
    builder = ContextBuilder(tokenizer="o200k_base")
    plan = BuildPlan.named("tool_heavy")
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "check the weather"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."}]
    previous = None
    systems = []
    for question in ("Thanks, and tomorrow?", "谢谢，明天呢？", "ok and the day after?"):
        ctx = builder.build(plan, Request(user_input=question, system="You are helpful.",
                                          history=history), previous=previous, cache=True)
        systems.append(ctx.to_messages("openai")[0]["content"])
        if previous is not None:
            assert ctx.report.cache is not None and ctx.report.cache.broke_at is None, question
        previous = Fingerprint.from_json(ctx.fingerprint.to_json())  # as a store keeps it
        assert previous.language == "en"
        history = [*history, {"role": "user", "content": question},
                   {"role": "assistant", "content": "..."}]
    assert systems[0] == systems[1] == systems[2]
    # A new cache line takes the input's language, as a build without a policy always does.
    fresh = builder.build(plan, Request(user_input="谢谢，明天呢？", system="You are helpful.",
                                        history=history), cache=True)
    assert fresh.language == "zh" and fresh.fingerprint.language == "zh"
    older = {k: v for k, v in fresh.fingerprint.to_dict().items() if k != "language"}
    assert Fingerprint.from_dict(older).language == ""  # a fingerprint stored before


def test_labels_follow_a_user_who_goes_on_in_another_language() -> None:
    # A session that opens with a Chinese greeting and goes on in English: one message in
    # another language keeps the line's labels; two in a row move them (the prompt is sent
    # anew once), so the session is not labelled in Chinese for good.
    builder = ContextBuilder(tokenizer="o200k_base")
    plan = BuildPlan.named("chat")
    history: list[dict[str, Any]] = []
    previous = None
    languages, broke = [], []
    for question in ("你好你好", "What is the weather like in Paris today?",
                     "And in Berlin tomorrow?", "谢谢！", "Thanks, and in Rome?"):
        ctx = builder.build(plan, Request(user_input=question, system="You are helpful.",
                                          history=history), previous=previous, cache=True)
        languages.append(ctx.language)
        broke.append(ctx.report.cache is not None and ctx.report.cache.broke_at is not None)
        previous = Fingerprint.from_json(ctx.fingerprint.to_json())
        history = [*history, {"role": "user", "content": question},
                   {"role": "assistant", "content": "..."}]
    assert languages == ["zh", "zh", "en", "en", "en"]
    assert broke == [False, False, True, False, False]


# --- a continued layout's source is read once ------------------------------------------------


class CountingHistory(HistorySource):
    """The built-in history source, counting how often a build reads it."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def build(self, request: Request, options: Any) -> Iterator[Any]:
        self.reads += 1
        return super().build(request, options)


def test_a_continued_layout_reads_its_source_once() -> None:
    history = CountingHistory()
    builder = ContextBuilder(sources=[history])
    reads = []
    for _, ctx in replay([3] * 10, builder, history=3000):
        reads.append((history.reads, ctx.report.cache))
        history.reads = 0
    continued = [n for n, cache in reads[1:] if cache is not None and not cache.advanced]
    assert continued and all(n == 1 for n in continued)


def _edited_replay(builder: ContextBuilder) -> list[tuple[list[str], list[tuple[Any, ...]]]]:
    """A replay whose history is edited now and then (the layout cannot go on), with a copy
    of the input in it (normalisation removes one)."""
    messages: list[dict[str, Any]] = []
    previous: FinalContext | None = None
    out = []
    for t in range(14):
        question = turn_messages(t, 4)[0]["content"]
        if t % 5 == 4 and len(messages) > 6:
            messages[-6] = {**messages[-6], "content": f"{messages[-6]['content']} (edited)"}
        if t == 7:
            messages.append({"role": "user", "content": question})  # the input, twice
        request = Request(user_input=question, system=SYSTEM, history=list(messages),
                          tools=TOOLS)
        ctx = builder.build(plan(1200), request, previous=previous, cache=True)
        out.append((openai_messages(ctx), [(d.source, d.key, d.action, d.reason,
                                            d.tokens_before, d.tokens_after)
                                           for d in ctx.report.decisions]))
        previous = ctx
        messages += turn_messages(t, 4)
    return out


def _besides_older(decisions: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The decisions but those leaving out messages (read or not), which ``_left_out`` sums."""
    return [d for d in decisions if d[2] not in ("dropped", "deduplicated", "conflict")]


def _left_out(decisions: list[tuple[Any, ...]]) -> set[int]:
    """The history positions the decisions say were left out, read or not."""
    positions: set[int] = set()
    for _, key, action, reason, *_ in decisions:
        unread = re.search(r"not read \(history\.m(\d+)–m(\d+)\)", reason)
        if unread:
            positions.update(range(int(unread[1]), int(unread[2]) + 1))
        elif action in ("dropped", "deduplicated", "conflict") and key.startswith("history.m"):
            positions.add(int(key.removeprefix("history.m")))
    return positions


def test_a_layout_that_cannot_go_on_is_cut_as_if_read_afresh(
        monkeypatch: pytest.MonkeyPatch) -> None:
    once = _edited_replay(ContextBuilder())
    monkeypatch.setattr("contextwright.core.stepping.Stepping.gather_options",
                        lambda *args: {})
    twice = _edited_replay(ContextBuilder())
    assert [m for m, _ in once] == [m for m, _ in twice]
    # The same messages are reported left out; read once, those older than the continued
    # layout's messages are not read (one decision for them all), read twice they were.
    assert [_left_out(d) for _, d in once] == [_left_out(d) for _, d in twice]
    assert [_besides_older(d) for _, d in once] == [_besides_older(d) for _, d in twice]
    question = json.dumps({"content": "Where is my order ORD0007? It has 4 items.",
                           "role": "user"}, sort_keys=True)
    assert once[7][0].count(question) == 1  # the copy normalisation removed stays out


def test_a_message_normalisation_removed_stays_out_of_a_continued_layout() -> None:
    contexts = []
    messages: list[dict[str, Any]] = []
    previous: FinalContext | None = None
    for t in range(4):
        question = turn_messages(t)[0]["content"]
        if t == 3:
            messages.append({"role": "user", "content": question})  # the input, twice
        request = Request(user_input=question, system=SYSTEM, history=list(messages),
                          tools=TOOLS)
        previous = ContextBuilder().build(plan(3000), request, previous=previous, cache=True)
        contexts.append(previous)
        messages += turn_messages(t)
    last = contexts[-1]
    shown = [m["content"] for m in last.to_messages("openai") if m["role"] == "user"]
    assert shown.count(turn_messages(3)[0]["content"]) == 1
    assert any(d.action == "deduplicated" for d in last.report.decisions)


class FailsAsOfACut(HistorySource):
    """A history source that cannot read as of an earlier length (its tier anchor)."""

    def build(self, request: Request, options: Any) -> Iterator[Any]:
        if options.get("tier_anchor") is not None:
            raise RuntimeError("no reading as of an earlier length")
        return super().build(request, options)


def test_a_source_that_fails_as_of_its_last_cut_is_read_afresh() -> None:
    builder = ContextBuilder(sources=[FailsAsOfACut()])
    contexts = [ctx for _, ctx in replay([3] * 4, builder, history=3000)]
    for ctx in contexts[1:]:  # the first call has no history yet
        assert "history" in ctx.sections
        assert not any("history" in w and "failed" in w for w in ctx.report.warnings)


# --- a continued layout's plain stream is read only back to where its shown messages start ---


class ItemCountingHistory(HistorySource):
    """The built-in history source, counting the items builds read of its plain stream."""

    def __init__(self) -> None:
        super().__init__()
        self.plain_items = 0

    def build(self, request: Request, options: Any) -> Iterator[Any]:
        plain = not options.get("recall_share")
        for item in super().build(request, options):
            self.plain_items += plain
            yield item


def _recall_replay(without_reach: bool) -> list[tuple[Any, ...]]:
    """A long recalling chat, each call continuing the last through its JSON fingerprint
    (without the layouts' reach, as an earlier version wrote it, if ``without_reach``).

    Per call: the messages sent, the cache report, the plain stream's items read, and the
    most a read back to the previous layout's shown messages may take.
    """
    history_source = ItemCountingHistory()
    builder = ContextBuilder(sources=[history_source])
    chat = BuildPlan.named("chat").with_budget(available_override=2500)
    history = chat_rounds(150)
    previous: Any = None
    last_layout: Any = None
    calls = []
    for t in range(24):
        question = f"What about item {(t * 37) % 150}? ({t})"
        read_before, most = history_source.plain_items, None
        if last_layout is not None:
            lead = last_layout.lead[1] - last_layout.lead[0] if last_layout.lead else 0
            most = len(history) - last_layout.reach + lead + 2  # a round past it, at most
        ctx = builder.build(chat, Request(user_input=question, history=list(history)),
                            previous=previous, cache=True)
        calls.append((openai_messages(ctx), ctx.report.cache,
                      history_source.plain_items - read_before, most))
        last_layout = ctx.fingerprint.layouts["history"]
        data = json.loads(ctx.fingerprint.to_json())
        for layout_data in data["layouts"].values():
            assert isinstance(layout_data["reach"], int)
            if without_reach:
                del layout_data["reach"]
        previous = json.dumps(data)
        history += [{"role": "user", "content": question},
                    {"role": "assistant", "content": f"item {t} noted " + "fine " * (t % 7)}]
    return calls


def test_a_continued_layout_reads_its_plain_stream_only_back_to_its_shown_messages() -> None:
    bounded, unbounded = _recall_replay(without_reach=False), _recall_replay(without_reach=True)
    assert [c[:2] for c in bounded] == [c[:2] for c in unbounded]  # messages, cache reports
    continued = [i for i, (_, cache, _, _) in enumerate(bounded)
                 if cache is not None and cache.previous and not cache.advanced]
    assert len(continued) >= 15
    assert all(bounded[i][2] <= bounded[i][3] for i in continued)
    # Without the reach, the stream is read as far back as the budget reaches.
    assert sum(unbounded[i][2] > unbounded[i][3] for i in continued) >= 10


def test_a_layout_reach_is_where_its_shown_plain_messages_start() -> None:
    builder = ContextBuilder()
    chat = BuildPlan.named("chat").with_budget(available_override=2500)
    short = builder.build(chat, Request(user_input="next?", history=chat_rounds(3)),
                          cache=True)
    layout = short.fingerprint.layouts["history"]
    assert layout.lead == (0, 6) and layout.reach == 0  # everything shown: one read
    long = builder.build(chat, Request(user_input="What about item 4?",
                                       history=chat_rounds(200)), cache=True)
    layout = long.fingerprint.layouts["history"]
    # chat_rounds' round t is "question t" (position 2t) and "answer t" (position 2t + 1).
    plain = [2 * int(found[2]) + (found[1] == "answer")
             for message in long.messages if not RECALL_MARKER.search(message.content)
             and (found := re.match(r"(question|answer) (\d+):", message.content))]
    assert plain and layout.reach == min(plain) > 0
    data = json.loads(long.fingerprint.to_json())
    for bad in (-1, True, "3", 1.5):
        broken = {**data, "layouts": {"history": {**data["layouts"]["history"], "reach": bad}}}
        with pytest.raises(InvalidInputError):
            Fingerprint.from_json(json.dumps(broken))
    older = {**data, "layouts": {"history": {k: v for k, v in data["layouts"]["history"].items()
                                             if k != "reach"}}}
    assert Fingerprint.from_json(json.dumps(older)).layouts["history"].reach is None


def _stock_reply_replay() -> list[str]:
    """An agent that ends every turn with the same reply: the cache reasons of 20 calls."""
    def turn(t: int) -> list[dict[str, Any]]:
        messages = turn_messages(t, 3)
        messages[-1] = {"role": "assistant", "content": "Done. Anything else I can check?"}
        return messages

    builder = ContextBuilder()
    heavy = BuildPlan.named("tool_heavy").with_budget(available_override=3000)
    history = [message for t in range(40) for message in turn(t)]
    previous: FinalContext | None = None
    reasons = []
    for t in range(40, 60):
        request = Request(user_input=f"Where is my order ORD{t:04d}?", system=SYSTEM,
                          history=list(history), tools=TOOLS)
        previous = builder.build(heavy, request, previous=previous, cache=True)
        assert previous.report.cache is not None
        reasons.append(previous.report.cache.reason or "")
        history += turn(t)
    return reasons


def test_an_older_message_that_reads_like_a_shown_one_does_not_break_the_prefix(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The digest of the last cut is remade from the messages the layout shows; an older reply
    # that reads the same (but was left out) used to be counted as shown, so the digest came
    # out otherwise and the layout was cut again on most calls.
    assert not [r for r in _stock_reply_replay() if "no longer offered" in r]
    # Read as far as the budget reaches (the look-alikes among what is read), the same.
    gather_options = Stepping.gather_options

    def unbounded(self: Stepping, *args: Any) -> Any:
        options = gather_options(self, *args)
        self.reaches.clear()
        return options

    monkeypatch.setattr(Stepping, "gather_options", unbounded)
    assert not [r for r in _stock_reply_replay() if "no longer offered" in r]
    monkeypatch.setattr("contextwright.core.stable._may_be_shown", lambda *_: True)
    assert [r for r in _stock_reply_replay() if "no longer offered" in r]  # the bug, undone


class RecallCountingHistory(HistorySource):
    """The built-in history source, counting the turns offered again as a layout showed them."""

    def __init__(self) -> None:
        super().__init__()
        self.again = 0

    def recalled_turns(self, request: Request, options: Any, starts: Any) -> Iterator[Any]:
        self.again += len(starts)
        return super().recalled_turns(request, options, starts)


@pytest.mark.parametrize("with_tools", [False, True])
def test_a_recalled_turn_the_input_recalls_again_is_not_read_twice(with_tools: bool) -> None:
    # With tools, the recalled turns hold calls and results (shown in their tier): rendered
    # as the layout shows them, they are found among this input's recalled turns all the same.
    counting = RecallCountingHistory()
    builder = ContextBuilder(sources=[counting])
    chat = BuildPlan.named("chat").with_budget(available_override=2500)
    history = chat_rounds(150)
    if with_tools:
        history[100:100] = [m for t in range(30, 50) for m in turn_messages(t, 2)]
    question = ("Where is my order ORD0042, and ORD0037?" if with_tools
                else "What about item 42 and item 7?")
    previous: FinalContext | None = None
    continued = 0
    for t in range(6):  # the same question: the same turns are recalled, call after call
        counting.again = 0
        previous = builder.build(chat, Request(user_input=question, history=list(history)),
                                 previous=previous, cache=True)
        layout = previous.fingerprint.layouts["history"]
        cache = previous.report.cache
        assert cache is not None
        if t and not cache.advanced:
            assert layout.recalled and counting.again == 0
            continued += 1
        history += [{"role": "user", "content": f"thanks ({t})"},
                    {"role": "assistant", "content": f"you are welcome ({t})"}]
    assert continued >= 3


def _mixed_replay(steps: list[tuple[int, int, bool]], plan_name: str, budget: int
                  ) -> list[list[dict[str, Any]]]:
    """Calls of a conversation of chat rounds and tool turns, some replies alike, each build
    continuing the last: the messages each sends."""
    builder = ContextBuilder()
    chosen = BuildPlan.named(plan_name).with_budget(available_override=budget)
    history = chat_rounds(150)  # longer than the budget reaches
    previous: FinalContext | None = None
    sent = []
    for t, (kind, size, alike) in enumerate(steps):
        if kind == 0:
            history += turn_messages(t, size)
        else:
            history += [{"role": "user", "content": f"About {TOPICS[kind % len(TOPICS)]} ({t})"},
                        {"role": "assistant", "content": "Sounds good, anything else?" if alike
                         else f"On {TOPICS[size % len(TOPICS)]}: " + "fine " * size}]
        request = Request(user_input=f"What about {TOPICS[(t * 3) % len(TOPICS)]}? ({t})",
                          system=SYSTEM, history=list(history), tools=TOOLS)
        previous = builder.build(chosen, request, previous=previous, cache=True)
        sent.append(openai_messages(previous))
    return sent


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 12), st.booleans()), min_size=4,
                max_size=24),
       st.sampled_from(["chat", "tool_heavy"]), st.sampled_from([1200, 2500]))
# The exact recount, dropping a whole round, once took units of other rounds with the same
# number (the pinned head's, a recalled turn's) along, and then what it took depended on how
# far the source was read.
@example([(0, 1, False), (1, 1, False), (1, 1, False), (0, 1, False), (0, 2, False),
          (1, 1, False), (1, 1, False), (1, 1, False), (1, 1, False), (1, 6, False),
          (1, 1, False)], "chat", 1200)
def test_reading_a_continued_layout_only_back_to_its_messages_changes_nothing_it_sends(
        steps: list[tuple[int, int, bool]], plan_name: str, budget: int) -> None:
    stops = []
    with pytest.MonkeyPatch.context() as patch:  # count the reads that stop at a reach
        patch.setattr("contextwright.core.gather._reaches",
                      lambda *args: stops.append(reaches(*args)) or stops[-1])
        bounded = _mixed_replay(steps, plan_name, budget)
    assert any(stops)
    with pytest.MonkeyPatch.context() as patch:  # read as far as the budget reaches
        patch.setattr("contextwright.core.gather._reaches", lambda *_: False)
        unbounded = _mixed_replay(steps, plan_name, budget)
    assert bounded == unbounded


def test_a_run_the_appended_messages_outgrew_is_reported_so() -> None:
    # Big results appended since the last cut: reading as far as the budget reaches no longer
    # gets back to the kept run. The run was outgrown, not changed, and the report says so.
    # Reading counts a result at most its share of the grant (it is cut to that), so it takes
    # several big rounds appended at once to outgrow the run.
    builder = ContextBuilder()
    history: list[dict[str, Any]] = []
    previous: FinalContext | None = None
    reasons = []
    for t, sizes in enumerate([(2,), (2,), (2,), (2,), (80, 80, 80), (2,), (2,)]):
        request = Request(user_input=f"Where is my order ORD{t:04d}?", system=SYSTEM,
                          history=list(history), tools=TOOLS)
        previous = builder.build(plan(900), request, previous=previous, cache=True)
        assert previous.report.cache is not None
        reasons.append(previous.report.cache.reason or "")
        for k, size in enumerate(sizes):
            history += turn_messages(10 * t + k, size)
    assert any("the messages appended since outgrew it" in r for r in reasons)
    assert not any("no longer offered as it was" in r for r in reasons)


def test_a_recalling_history_with_a_digest_continues_its_layout() -> None:
    # The digest of the last cut is remade from what the layout shows: a recalled turn's
    # reply, older than the run, is shown (with its marked opening), not left out.
    base = BuildPlan.named("chat").with_budget(available_override=2500)
    digesting = replace(base, sources=tuple(
        replace(s, options=FrozenOptions({**dict(s.options), "digest_share": 0.15}))
        if s.source == "history" else s for s in base.sources))
    builder = ContextBuilder()
    history = chat_rounds(150)
    history[100:100] = [m for t in range(30, 50) for m in turn_messages(t, 2)]
    previous: FinalContext | None = None
    cuts = []
    for t in range(20):
        request = Request(user_input=f"Where is my order ORD00{30 + t % 5}? ({t})",
                          history=list(history))
        previous = builder.build(digesting, request, previous=previous, cache=True)
        assert previous.report.cache is not None
        if previous.report.cache.advanced:
            cuts.append(previous.report.cache.reason)
        history += [{"role": "user", "content": f"thanks ({t})"},
                    {"role": "assistant", "content": f"welcome ({t}) " + "ok " * 20}]
    assert len(cuts) <= 3, cuts
    assert any("digest of omitted turns" in m.content for m in previous.messages)
