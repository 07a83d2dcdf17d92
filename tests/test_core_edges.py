"""Small edges of the core: each wrong input gets a true, typed message; each report number
compares like with like."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, InvalidInputError, Request
from contextwright.core.fence import fenced_body
from contextwright.tokens import get_tokenizer


def _chat_context() -> Any:
    return ContextBuilder().build(BuildPlan.named("chat"), Request(user_input="hi"))


@pytest.mark.parametrize("call", [
    lambda ctx: ctx.to_request("claude"),
    lambda ctx: ctx.to_messages("claude"),
    lambda ctx: ctx.rendering_notes("claude"),
])
def test_unknown_format_is_an_invalid_input_error_listing_the_formats(call: Any) -> None:
    with pytest.raises(InvalidInputError, match="choose one of openai, openai-responses, "
                                                "anthropic"):
        call(_chat_context())


def test_misspelt_format_names_the_closest_one() -> None:
    with pytest.raises(InvalidInputError, match="did you mean 'openai-responses'"):
        _chat_context().to_request("openai_responses")


def _call(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]}


def _result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


USER = {"role": "user", "content": "hi"}
INTERJECTED = [USER, _call("c1"), {"role": "user", "content": "hurry up"}, _result("c1"),
               {"role": "assistant", "content": "done"}]
"""The user typed while the tool ran: call, user message, result."""


def test_a_result_after_an_interjection_names_its_call_and_what_stands_between() -> None:
    message = (r"history\[3\] answers the call of history\[1\], but history\[2\] \(a user "
               r"message\) stands between them")
    with pytest.raises(InvalidInputError, match=message):
        Request(user_input="q", history=INTERJECTED).validate()
    with pytest.raises(InvalidInputError, match=message):
        ContextBuilder().build(BuildPlan.named("chat"),
                               Request(user_input="q", history=INTERJECTED))


def test_a_second_answer_after_an_interjection_is_not_called_misplaced() -> None:
    history = [USER, _call("c1"), _result("c1"), USER, _result("c1")]
    with pytest.raises(InvalidInputError, match=r"history\[4\] is a tool result that follows "
                                                "no assistant tool call"):
        Request(user_input="q", history=history).validate()


def test_a_request_that_is_not_an_object_says_so_without_private_names() -> None:
    with pytest.raises(InvalidInputError, match="the request must be a JSON object, not a "
                                                "list") as info:
        Request.from_dict([{"user_input": "hi"}])
    assert "_RequestModel" not in str(info.value)


def test_a_document_given_as_plain_text_says_a_document_is_an_object() -> None:
    with pytest.raises(InvalidInputError, match=r"documents\[0\]: a document must be an "
                                                "object .*, not a string") as info:
        Request(user_input="hi", documents=["a retrieved passage"])  # type: ignore[list-item]
    assert "_DocumentModel" not in str(info.value)
    assert "invalid request" not in str(info.value)


def test_a_compacted_tool_result_reports_a_saving_counted_like_with_like() -> None:
    raw = json.dumps({"code": 200, "data": {"city": "上海", "weather": "多云", "temp": 25,
                                            "humidity": 60}}, ensure_ascii=False)
    turn = [_call("c1"), {"role": "tool", "tool_call_id": "c1", "content": raw}]
    ctx = ContextBuilder().build(BuildPlan.named("tool_heavy"),
                                 Request(user_input="weather?", turn=turn))
    compacted = [d for d in ctx.report.decisions if d.action == "compacted"]
    assert compacted, "the JSON result is shown compacted"
    for decision in compacted:
        assert decision.tokens_before is not None and decision.tokens_after is not None
        saved = decision.tokens_before - decision.tokens_after
        count = get_tokenizer("o200k_base").count
        shown = next(m for m in ctx.to_messages("openai") if m["role"] == "tool")["content"]
        assert saved == count(raw) - count(fenced_body(shown)) > 0


def test_arguments_nested_past_the_parser_are_called_too_deep_not_invalid() -> None:
    depth = 5000
    arguments = '{"a":' * depth + "1" + "}" * depth
    turn = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
        _result("c1")]
    with pytest.raises(InvalidInputError, match="nested too deeply") as info:
        Request(user_input="go", turn=turn).validate()
    assert "not valid JSON" not in str(info.value)
