"""``eval cases`` credits a required message only when that message itself is shown.

Cases are built for real and measured on the OpenAI rendering: call ids the rendering renames
must still match, and a copy of a message's words in another message must not stand for it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from contextwright import ContextBuilder, Request
from contextwright.errors import DatasetError
from contextwright.evaluate.case_metrics import Checks, Wanted, measure
from contextwright.evaluate.cases import CaseRun, EvalCase, build_case, parse_case

COUNT = ContextBuilder(tokenizer="o200k_base").tokenizer.count
GET_ORDER = {"type": "function", "function": {
    "name": "get_order", "description": "Order status.",
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}},
                   "required": ["id"]}}}
BIG_RESULT = json.dumps({"order": "KST418", "status": "shipped", "carrier": "DHL",
                         "items": [{"sku": f"S{i}", "qty": i, "note": "x" * 40}
                                   for i in range(40)]})


def built(history: list[dict[str, Any]], wanted: tuple[str, ...], *, user_input: str,
          budget: int, tools: list[dict[str, Any]] | None = None) -> tuple[tuple[str, ...],
                                                                           list[dict[str, Any]]]:
    """(what is missing, the rendered messages) of one case built for real."""
    request = Request(system="Be brief.", user_input=user_input, history=history,
                      tools=tools or [])
    case = EvalCase(id="c", line=1, request=request,
                    checks=Checks(required=Wanted(messages=wanted)))
    run = CaseRun(budget=budget)
    build = build_case(ContextBuilder(tokenizer="o200k_base"), case,
                       run.budgeted(case, run.plan_of(case)))
    return build.result.missing, build.messages


def order_history(first_id: str, second_id: str) -> list[dict[str, Any]]:
    def call(call_id: str, order: str) -> dict[str, Any]:
        return {"id": call_id, "type": "function",
                "function": {"name": "get_order", "arguments": json.dumps({"id": order})}}
    return [
        {"role": "user", "content": "Where is order KST418?", "id": "h1"},
        {"role": "assistant", "content": None, "id": "h2",
         "tool_calls": [call(first_id, "KST418")]},
        {"role": "tool", "tool_call_id": first_id, "content": BIG_RESULT, "id": "h3"},
        {"role": "assistant", "content": "It shipped with DHL.", "id": "h4"},
        {"role": "user", "content": "And order KST419?", "id": "h5"},
        {"role": "assistant", "content": None, "id": "h6",
         "tool_calls": [call(second_id, "KST419")]},
        {"role": "tool", "tool_call_id": second_id, "id": "h7",
         "content": '{"order": "KST419", "status": "packed"}'},
        {"role": "assistant", "content": "It is packed.", "id": "h8"},
    ]


@pytest.mark.parametrize(("first_id", "second_id"), [
    ("call_00000000-0000-0000-0000-000000000001", "call_00000000-0000-0000-0000-000000000002"),
    ("portkey-" + "a" * 60, "portkey-" + "b" * 60),
    ("call_0", "call_0"),
])
def test_calls_and_results_count_under_the_ids_the_rendering_sends(first_id: str,
                                                                   second_id: str) -> None:
    missing, messages = built(order_history(first_id, second_id), ("h2", "h3", "h6", "h7"),
                              user_input="Thanks, anything else?", budget=4000,
                              tools=[GET_ORDER])
    sent_ids = [call["id"] for m in messages for call in m.get("tool_calls") or ()]
    assert len(sent_ids) == 2 and all(len(i) <= 40 for i in sent_ids)
    assert missing == ()


def test_a_dropped_message_quoted_by_the_input_is_missing() -> None:
    filler = [{"role": "assistant" if i % 2 else "user", "id": f"f{i}",
               "content": f"Chat {i}: " + "some long small talk about the weather. " * 12}
              for i in range(12)]
    history = [{"role": "user", "content": "Please cancel my order.", "id": "h1"},
               {"role": "assistant", "content": "Which order? Please give its number.",
                "id": "h2"},
               {"role": "user", "content": "It is KST418.", "id": "h3"}, *filler]
    question = "Please cancel my order. Also, can you confirm the refund goes to my card?"
    kept, _ = built(history, ("h1",), user_input=question, budget=5000)
    assert kept == ()
    missing, messages = built(history, ("h1",), user_input=question, budget=400)
    assert all(m["content"] != "Please cancel my order." for m in messages)
    assert missing == ("message h1",)


def test_a_later_message_with_the_same_words_does_not_stand_for_a_dropped_one() -> None:
    filler = [{"role": "assistant" if i % 2 == 0 else "user", "content": f"filler {i} " * 60,
               "id": f"f{i}"} for i in range(10)]
    history = [{"role": "user", "content": "Cancel it.", "id": "old"}, *filler,
               {"role": "assistant", "content": "Cancel it.", "id": "new"}]
    missing, _ = built(history, ("old", "new"), user_input="Q?", budget=300)
    assert missing == ("message old",)


def test_each_rendered_message_stands_for_one_request_message() -> None:
    request = Request(user_input="q", history=[
        {"role": "user", "content": "yes", "id": "a"},
        {"role": "assistant", "content": "Shall I go on?", "id": "b"},
        {"role": "user", "content": "yes", "id": "c"}])
    rendered = [{"role": "assistant", "content": "Shall I go on?"},
                {"role": "user", "content": "yes"}, {"role": "user", "content": "q"}]
    checks = Checks(required=Wanted(messages=("a", "b", "c")))
    assert measure(request, checks, rendered, [], COUNT).missing == ("message c",)


def test_a_recalled_turn_and_a_merged_system_message_still_count() -> None:
    request = Request(user_input="q", history=[
        {"role": "user", "content": "My sister lives in Porto.", "id": "u"},
        {"role": "system", "content": "The user is a VIP.", "id": "s"}])
    rendered = [{"role": "system", "content": "Be brief.\n\n[History]\nThe user is a VIP."},
                {"role": "user", "content": "[recalled 2024-05-01]\nMy sister lives in Porto."},
                {"role": "user", "content": "q"}]
    result = measure(request, Checks(required=Wanted(messages=("u", "s"))), rendered, [], COUNT)
    assert result.missing == ()
    assert result.useful_tokens == (COUNT("q") + COUNT("My sister lives in Porto.")
                                    + COUNT("The user is a VIP."))


def test_a_noise_fact_seen_in_an_old_calls_arguments_is_noise() -> None:
    call = {"role": "assistant", "content": None, "id": "t1", "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "get_order", "arguments": '{"id": "ZX-OLD-77"}'}}]}
    request = Request(user_input="q", history=[call, {"role": "tool", "tool_call_id": "c1",
                                                      "content": "gone"}])
    rendered = [{"role": "assistant", "content": None, "tool_calls": call["tool_calls"]},
                {"role": "tool", "tool_call_id": "c1", "content": "gone"},
                {"role": "user", "content": "q"}]
    result = measure(request, Checks(noise=Wanted(facts=("ZX-OLD-77",))), rendered, [], COUNT)
    assert result.noise_shown == ('fact[0] "ZX-OLD-77"',)
    assert result.noise_tokens == COUNT("ZX-OLD-77")


@pytest.mark.parametrize(("field", "value", "where"), [
    ("must_contain", {"facts": [" "]}, "must_contain.facts[0]"),
    ("noise", {"facts": ["\n\t"]}, "noise.facts[0]"),
    ("position", {"tail": ["  "]}, "position.tail[0]"),
])
def test_a_fact_of_whitespace_alone_is_refused(field: str, value: dict[str, Any],
                                               where: str) -> None:
    line = json.dumps({"id": "c", "request": {"user_input": "q"}, field: value})
    with pytest.raises(DatasetError, match=rf"^cases.jsonl:1: {re.escape(where)}: only "
                                           "whitespace, which any context holds$"):
        parse_case(line, "cases.jsonl:1", 1)


def test_an_earlier_message_asking_what_the_input_asks_is_not_shown_by_the_input() -> None:
    request = Request(user_input="Where is my order?", history=[
        {"role": "user", "content": "Where is my order?", "id": "asked"},
        {"role": "assistant", "content": "Let me check.", "id": "a"}])
    dropped = [{"role": "assistant", "content": "Let me check."},
               {"role": "user", "content": "Where is my order?"}]
    kept = [{"role": "user", "content": "Where is my order?"}, *dropped]
    checks = Checks(required=Wanted(messages=("asked",)))
    assert measure(request, checks, dropped, [], COUNT).missing == ("message asked",)
    assert measure(request, checks, kept, [], COUNT).missing == ()
