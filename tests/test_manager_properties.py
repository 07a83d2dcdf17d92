"""Properties of managed sessions over random agent conversations.

Any sequence of user messages, answers and tool rounds, in English and Chinese, under a small
budget (so windows slide, summaries run and the cache line is cut): every ``prepare`` fits the
budget, renders to requests both providers accept and ends with the user's newest message or
this turn's results; a retry on another worker continues the stored layout without cutting it,
and sends the same on every worker.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright.core.validate import validate_openai
from contextwright.manager import ContextManager, PreparedContext
from contextwright.session import MemoryStore

WORDS = ("order", "refund", "flight", "weather", "Beijing", "memo", "A-1024", "seat",
         "订单", "退款", "航班", "天气", "北京", "明天", "2026-11-29", "$1,299.00")
TOOL = {"type": "function", "function": {
    "name": "lookup", "description": "Look a record up.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join)
steps = st.lists(st.one_of(
    st.tuples(st.just("ask"), texts),
    st.tuples(st.just("answer"), texts),
    st.tuples(st.just("tools"), st.lists(texts, min_size=1, max_size=3)),
), min_size=1, max_size=30)


def _manager(store: MemoryStore, window: int) -> ContextManager:
    return ContextManager(store=store, background=False, system="You help with orders.",
                          budget={"window": window, "reserved_output": 256})


def _tool_round(cm: ContextManager, results: list[str], step: int) -> None:
    calls = [{"id": f"call_{step}_{n}", "type": "function",
              "function": {"name": "lookup", "arguments": json.dumps({"q": text[:20]})}}
             for n, text in enumerate(results)]
    cm.record("u", "s", assistant={"role": "assistant", "content": "", "tool_calls": calls},
              tool_results=[{"tool_call_id": call["id"], "name": "lookup",
                             "content": json.dumps({"result": text}, ensure_ascii=False)}
                            for call, text in zip(calls, results, strict=True)])


def _check(prepared: PreparedContext, last_user: str) -> list[dict[str, Any]]:
    context = prepared.context
    assert context.total_tokens <= context.plan.budget.available
    messages = prepared.to_messages("openai")
    validate_openai(messages)
    prepared.to_request("anthropic")  # checks what it renders
    users = [m for m in messages if m["role"] == "user"]
    assert users and last_user in str(users[-1]["content"])
    return messages


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps, window=st.sampled_from((1400, 2200, 4000)))
def test_every_managed_build_fits_renders_and_is_the_same_on_any_worker(
        steps: list[tuple[str, Any]], window: int) -> None:
    store = MemoryStore()
    cm = _manager(store, window)
    last_user: str | None = None
    open_turn = False
    for number, (kind, payload) in enumerate(steps):
        if kind == "ask":
            last_user = payload
            prepared = cm.prepare("u", "s", payload, tools=[TOOL])
            open_turn = True
        elif last_user is None:
            continue  # a session starts with the user
        elif kind == "answer":
            cm.record("u", "s", assistant=payload)
            open_turn = False
            continue
        else:
            if not open_turn:
                continue
            _tool_round(cm, payload, number)
            prepared = cm.prepare("u", "s", tools=[TOOL])  # the turn goes on
        _check(prepared, last_user)
        # A retry on a fresh worker continues the layout the store holds: no cut advances
        # (it may show this input's recalled turns after the kept run, in room the cut left).
        # A second retry, on yet another worker, sends exactly what the first retry sent.
        again = _manager(store, window).prepare("u", "s", tools=[TOOL])
        assert again.report.cache is not None and not again.report.cache.advanced, (
            again.report.cache)
        third = _manager(store, window).prepare("u", "s", tools=[TOOL])
        assert third.to_messages("openai") == _check(again, last_user)
    cm.close()
