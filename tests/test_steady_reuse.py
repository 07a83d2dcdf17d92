"""Steady-state builds reuse what earlier builds worked out: never at the cost of a changed input.

Each test builds once (filling the caches), changes the history in place or appends to it, and
checks that the next build sees the change exactly as a build in a fresh process would.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, InvalidInputError, Request, clear_caches
from contextwright.core.gather import Candidate, Unit
from contextwright.core.images import ImagePart
from contextwright.core.items import ContextItem, Layer, Message, parse_listed, parse_message
from contextwright.core.report import Decision
from contextwright.core.select import drop_decisions

BUILDER = ContextBuilder(tokenizer="o200k_base")


def _call_round(n: int, call_id: str) -> list[dict[str, Any]]:
    result = {"order_id": f"ORD-{n:04d}-X{n}", "status": "shipped",
              "eta": f"2024-06-{n % 28 + 1:02d}"}
    return [
        {"role": "user", "content": f"Where is order ORD-{n:04d}-X{n}?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "get_order", "arguments": json.dumps({"id": f"ORD-{n:04d}"})}}]},
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)},
        {"role": "assistant", "content": f"Order ORD-{n:04d}-X{n} ships on day {n}."},
    ]


def _history(rounds: int) -> list[dict[str, Any]]:
    return [m for n in range(rounds) for m in _call_round(n, f"call_{n}")]


def _build(history: list[dict[str, Any]], plan: str = "tool_heavy", budget: int = 1200,
           user_input: str = "what about ORD-0003?") -> tuple[Any, Any, Any]:
    request = Request(user_input=user_input, system="You help.", history=history)
    ctx = BUILDER.build(BuildPlan.named(plan).with_budget(available_override=budget), request)
    return ctx.to_messages("openai"), ctx.to_request("anthropic"), ctx.report.to_dict()


def _fresh(history: list[dict[str, Any]], **kwargs: Any) -> tuple[Any, Any, Any]:
    """The same build with every cache empty (what a new process would build)."""
    clear_caches()
    return _build(copy.deepcopy(history), **kwargs)


def test_parse_listed_is_parse_message_and_names_the_bad_message() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]
    assert parse_listed(messages, "history", 0) is parse_message(messages[0], "history[0]")
    with pytest.raises(InvalidInputError, match=r"history\[1\]\.role"):
        parse_listed(messages, "history", 1)


def test_a_tool_result_edited_to_answer_no_call_is_refused_after_a_clean_build() -> None:
    history = _history(6)
    _build(history)
    _build(history)  # remembered blocks
    history[2]["tool_call_id"] = "call_nobody"
    with pytest.raises(InvalidInputError, match=r"history\[2\] answers no call"):
        _build(history)


@pytest.mark.parametrize("plan", ["tool_heavy", "chat", "simple_qa"])
def test_an_older_message_edited_in_place_is_seen_by_the_next_build(plan: str) -> None:
    history = _history(40)
    _build(history, plan=plan)
    _build(history, plan=plan)
    for at in (1, 2, len(history) - 8, len(history) - 6):  # omitted (digest) and kept messages
        message = history[at]
        if message["role"] == "tool":
            message["content"] = json.dumps({"order_id": f"ORD-EDITED-{at}", "status": "lost"})
        elif message.get("tool_calls"):
            message["tool_calls"][0]["function"]["arguments"] = json.dumps({"id": f"E{at}"})
        else:
            message["content"] = f"edited ORD-EDITED-{at}"
        assert _build(history, plan=plan) == _fresh(history, plan=plan)


@pytest.mark.parametrize("plan", ["tool_heavy", "chat"])
def test_steady_builds_equal_fresh_builds_as_the_history_grows(plan: str) -> None:
    history = _history(30)
    for n in range(30, 36):
        history.extend(_call_round(n, f"call_{n}") if n % 2 else [
            {"role": "user", "content": f"and ORD-{n:04d}?"},
            {"role": "assistant", "content": f"ORD-{n:04d} is on its way, code Q{n}Z."}])
        steady = _build(history, plan=plan)
        assert steady == _fresh(history, plan=plan)
        _build(history, plan=plan)  # refill the caches for the next round


def _unit(source: str, *candidates: Candidate) -> Unit:
    return Unit(source=source, candidates=list(candidates), round=0, rank=0)


def _candidate(key: str, tokens: int, images: tuple[ImagePart, ...] = ()) -> Candidate:
    message = Message(role="user", content=f"text of {key}", images=images)
    item = ContextItem(key=key, message=message, layer=Layer.HISTORY)
    return Candidate(item, message, tokens)


def test_remembered_drop_decisions_equal_fresh_ones_per_source_and_reason() -> None:
    plain = _candidate("history.m1", 12)
    pictured = _candidate("history.m2", 90, (ImagePart(url="https://example.invalid/a.png"),))
    first = drop_decisions(_unit("history", plain, pictured), "budget")
    again = drop_decisions(_unit("history", plain, pictured), "budget")
    assert again == first == [
        Decision(source="history", key="history.m1", action="dropped", reason="budget",
                 tokens_before=12),
        Decision(source="history", key="history.m2", action="dropped",
                 reason="budget (with its 1 image(s))", tokens_before=90)]
    other = drop_decisions(_unit("older", plain), "budget: older than what fits")
    assert other == [Decision(source="older", key="history.m1", action="dropped",
                              reason="budget: older than what fits", tokens_before=12)]
    twin = _candidate("history.m1", 13)  # another candidate object: its own decision
    assert drop_decisions(_unit("history", twin), "budget")[0].tokens_before == 13
