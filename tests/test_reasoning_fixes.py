"""Reasoning at the end of a tool loop: a reply that says nothing but its thinking (Claude's
``end_turn`` with a thinking block and no text) has answered the loop, so its reasoning is not
sent (reported) and the empty reply is left out as an empty one is; the loop's calls keep
theirs. ``PreparedContext.to_messages`` hands the open loop's reasoning to a framework.
Renderings are checked against the official SDK types and the API's documented rules."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import TypeAdapter

from contextwright import BuildPlan, ContextBuilder, ContextManager, Request
from fakes.provider_server import check_chat, check_messages, check_responses

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
OPENING = {"type": "thinking", "thinking": "Look up Paris first.",
           "signature": "RXFRQkNnSVlBaElNc2lnbmF0dXJlLTE="}
AFTER = {"type": "thinking", "thinking": "Nothing more to say.", "signature": "c2lnLWVuZA=="}
SDK_TYPES: dict[str, TypeAdapter[Any]] = {
    "openai": TypeAdapter(CompletionCreateParamsNonStreaming),
    "openai-responses": TypeAdapter(ResponseCreateParamsNonStreaming),
    "anthropic": TypeAdapter(MessageCreateParamsNonStreaming),
}


def call(call_id: str, thinking: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]}
    if thinking:
        message["thinking_blocks"] = thinking
    return message


def checked_anthropic(body: dict[str, Any]) -> dict[str, Any]:
    SDK_TYPES["anthropic"].validate_python(body)
    check_messages({**body, "max_tokens": 4096,
                    "thinking": {"type": "enabled", "budget_tokens": 1024}})
    return body


def kinds(body: dict[str, Any]) -> list[tuple[str, list[str]]]:
    return [(m["role"], [b["type"] for b in m["content"]]) for m in body["messages"]]


@pytest.mark.parametrize("thinking", [False, True])
def test_an_empty_answer_is_left_out_with_or_without_its_thinking(thinking: bool) -> None:
    last: dict[str, Any] = {"role": "assistant", "content": ""}
    if thinking:
        last["thinking_blocks"] = [AFTER]
    turn = [call("toolu_1", [OPENING]),
            {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}, last]
    ctx = ContextBuilder(model="claude-sonnet-4-5").build(
        BuildPlan.named("tool_heavy"),
        Request(user_input="Weather in Paris?", tools=[WEATHER], turn=turn))
    body = checked_anthropic(ctx.to_request("anthropic", model="claude-sonnet-4-5"))
    assert kinds(body) == [("user", ["text"]), ("assistant", ["thinking", "tool_use"]),
                           ("user", ["tool_result"])]
    assert body["messages"][1]["content"][0] == OPENING  # the loop's own, byte for byte
    assert AFTER["thinking"] not in json.dumps(body)
    for fmt, check in (("openai", check_chat), ("openai-responses", check_responses)):
        other = ctx.to_request(fmt, model="gpt-4o")
        SDK_TYPES[fmt].validate_python(other)
        check(other)
        assert AFTER["thinking"] not in json.dumps(other)
    if thinking:  # never silently: the report says the answer's reasoning was not sent
        [left_out] = [d for d in ctx.report.decisions if d.key == "tool_results.m2"]
        assert left_out.action == "compacted"
        assert "only while its tool loop is open" in left_out.reason


def test_a_thinking_only_reply_recorded_from_the_sdk_still_lets_the_step_be_retried() -> None:
    manager = ContextManager(background=False)
    manager.prepare("u", "s", "Weather in Paris?", tools=[WEATHER])
    manager.record("u", "s", assistant=call("toolu_1", [OPENING]),
                   tool_results=[{"tool_call_id": "toolu_1", "content": "sunny"}])
    only = anthropic.types.Message.model_validate({
        "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [AFTER]})
    manager.record("u", "s", assistant=only)
    prepared = manager.prepare("u", "s", tools=[WEATHER])
    body = checked_anthropic(prepared.to_request("anthropic", model="claude-sonnet-4-5"))
    assert kinds(body)[-1] == ("user", ["tool_result"])
    manager.close()


def test_prepared_context_gives_the_open_loops_reasoning_to_a_framework() -> None:
    manager = ContextManager(background=False)
    manager.prepare("u", "s", "Weather in Paris?", tools=[WEATHER])
    manager.record("u", "s", assistant=call("toolu_1", [OPENING]),
                   tool_results=[{"tool_call_id": "toolu_1", "content": "sunny"}])
    prepared = manager.prepare("u", "s", tools=[WEATHER])
    messages = prepared.to_messages("openai", reasoning=True)
    assert messages == prepared.context.to_messages("openai", reasoning=True)
    [opening] = [m for m in messages if m.get("tool_calls")]
    assert opening["thinking_blocks"] == [OPENING]
    assert "thinking_blocks" not in json.dumps(prepared.to_messages("openai"))
    manager.close()
