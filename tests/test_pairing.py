"""The tool-pair rule (``core.pairing``) and the three places that apply it agree."""

from __future__ import annotations

from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, InvalidInputError, Request, ValidationError
from contextwright.core.pairing import Pairing, pair_results
from contextwright.core.validate import validate_openai


def test_results_answer_open_calls_in_any_order_each_once() -> None:
    assert pair_results(["a", "b"], ["b", "a"]) == Pairing(None, [])
    assert pair_results(["a", "b"], ["a"]) == Pairing(None, ["b"])
    assert pair_results(["a", "a"], ["a", "a"]) == Pairing(None, [])  # a reused id, twice
    assert pair_results(["a"], ["a", "a"]) == Pairing(1, [])  # answered already
    assert pair_results(["a", "b"], ["x", "a"]) == Pairing(0, ["a", "b"])
    assert pair_results(["a"], [None]) == Pairing(0, ["a"])
    assert pair_results([], []) == Pairing(None, [])


def _call(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]}


def _result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


USER = {"role": "user", "content": "hi"}

BAD_HISTORIES = [
    ([_result("a")], r"history\[0\] is a tool result that follows no assistant tool call"),
    ([USER, _result("a")], r"history\[1\] is a tool result that follows no assistant tool call"),
    ([USER, _call("a"), _result("b")], r"history\[2\] answers no call of history\[1\]"),
    ([USER, _call("a"), _result("a"), _result("a")],
     r"history\[3\] answers no call of history\[1\]"),
]


@pytest.mark.parametrize(("history", "message"), BAD_HISTORIES)
def test_the_request_check_and_the_build_reject_a_stray_result_alike(
        history: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        Request(user_input="q", history=history).validate()
    with pytest.raises(InvalidInputError, match=message):
        ContextBuilder().build(BuildPlan.named("chat"), Request(user_input="q", history=history))


def test_a_missing_result_is_a_placeholder_when_building_and_an_error_in_output() -> None:
    history = [USER, _call("a", "b"), _result("b")]
    ctx = ContextBuilder().build(BuildPlan.named("chat"), Request(user_input="q", history=history))
    messages = ctx.to_messages("openai")
    assert [m.get("tool_call_id") for m in messages if m["role"] == "tool"] == ["b", "a"]
    validate_openai(messages)  # the build completed the pair
    with pytest.raises(ValidationError, match="has no result"):
        validate_openai([USER, _call("a", "b"), _result("b")])
    with pytest.raises(ValidationError, match=r"messages\[2\] answers no call"):
        validate_openai([USER, _call("a"), _result("x")])


def test_two_calls_of_one_message_with_the_same_id_are_refused_wherever_they_come_in() -> None:
    # No result could say which of the two it answers, and no provider takes the pair.
    turn = [_call("call_0", "call_0"), _result("call_0"), _result("call_0")]
    with pytest.raises(InvalidInputError, match=r"tool_calls\[1\]\.id 'call_0' repeats"):
        Request(user_input="go on", turn=turn).validate()
    with pytest.raises(InvalidInputError, match=r"history\[0\]\.tool_calls\[1\]"):
        ContextBuilder().build(BuildPlan.named("tool_heavy"),
                               Request(user_input="go on", history=turn))
    # An id reused by a later message of the conversation is still fine (renamed on render).
    again = [_call("call_0"), _result("call_0"), _call("call_0"), _result("call_0")]
    ctx = ContextBuilder().build(BuildPlan.named("tool_heavy"),
                                 Request(user_input="go on", history=again))
    assert ctx.to_request("anthropic", model="claude-sonnet-4-5")
