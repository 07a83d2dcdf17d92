"""FinalContext's renderings: the text rendering says what it leaves out, as the provider
renderings do, and a request option of the wrong kind is refused rather than sent."""

from __future__ import annotations

from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.errors import InvalidInputError

NAMED = Request(user_input="and you?", history=[
    {"role": "user", "content": "I am fine", "name": "alice"},
    {"role": "assistant", "content": "Good."},
    {"role": "user", "content": "Me too", "name": "bob"},
    {"role": "assistant", "content": "Great."}])


def test_the_text_prompt_reports_the_speaker_names_it_leaves_out() -> None:
    ctx = ContextBuilder().build(BuildPlan.named("chat"), NAMED)
    assert "alice" not in ctx.to_text()
    assert ctx.rendering_notes("text") == [
        "2 speaker name(s) left out: the text prompt names each message's role, not who speaks"]
    assert ctx.rendering_notes("anthropic") == [
        "2 speaker name(s) left out: a Messages API message has no name field"]


def test_a_text_prompt_without_names_has_no_note() -> None:
    ctx = ContextBuilder().build(BuildPlan.named("chat"), Request(user_input="hi"))
    assert ctx.rendering_notes("text") == []


WEATHER = {"type": "function", "function": {"name": "get_weather"}}


@pytest.mark.parametrize("fmt", ["openai", "openai-responses", "anthropic"])
@pytest.mark.parametrize(("options", "message"), [
    ({"parallel_tool_calls": "yes"}, "parallel_tool_calls must be True, False or None"),
    ({"parallel_tool_calls": 0}, "parallel_tool_calls must be True, False or None"),
    ({"model": ""}, "model must be a model name"),
    ({"model": 5}, "model must be a model name"),
    ({"cache": "no"}, "cache must be True, False or None"),
])
def test_a_request_option_of_the_wrong_kind_is_refused_not_sent(
        fmt: str, options: dict[str, Any], message: str) -> None:
    ctx = ContextBuilder().build(BuildPlan.named("chat"),
                                 Request(user_input="hi", tools=[WEATHER]))
    with pytest.raises(InvalidInputError, match=message):
        ctx.to_request(fmt, **options)  # type: ignore[arg-type]
    body = ctx.to_request(fmt, model="m", parallel_tool_calls=False,  # type: ignore[arg-type]
                          cache=False)
    assert body["model"] == "m"


def test_the_text_prompt_reports_the_reasoning_it_leaves_out() -> None:
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}
    request = Request(user_input="Weather in Paris?", tools=[weather], turn=[
        {"role": "assistant", "content": None, "thinking_blocks": [
            {"type": "thinking", "thinking": "Look it up.", "signature": "c2ln"}],
         "tool_calls": [{"id": "toolu_1", "type": "function", "function": {
             "name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}])
    ctx = ContextBuilder().build(BuildPlan.named("tool_heavy"), request)
    assert "Look it up." not in ctx.to_text()
    assert any("carry reasoning" in note and "the text prompt" in note
               for note in ctx.rendering_notes("text"))
