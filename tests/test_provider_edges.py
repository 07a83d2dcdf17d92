"""Requests the providers would refuse, made valid: long cache keys and empty call ids."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import TypeAdapter

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.errors import InvalidInputError

LONG_KEY = ("user:3f2b1c9e-8a7d-4e6f-9b0a-1c2d3e4f5a6b:"
            "session:9e8d7c6b-5a4f-3e2d-1c0b-a9f8e7d6c5b4")
PARAMS = {"openai": CompletionCreateParamsNonStreaming,
          "openai-responses": ResponseCreateParamsNonStreaming}


def _sdk_valid(fmt: str, body: dict[str, Any]) -> None:
    TypeAdapter(PARAMS[fmt]).validate_python(body)


@pytest.mark.parametrize("fmt", ["openai", "openai-responses"])
def test_a_cache_key_over_64_characters_is_sent_as_a_stable_short_one(fmt: str) -> None:
    builder = ContextBuilder(model="gpt-4o")

    def key_of(cache_key: str) -> str:
        ctx = builder.build(BuildPlan.named("chat"), Request(user_input="hi"),
                            cache_key=cache_key, cache=True)
        body = ctx.to_request(fmt)
        _sdk_valid(fmt, body)
        return str(body["prompt_cache_key"])

    sent = key_of(LONG_KEY)
    assert len(LONG_KEY) > 64 and len(sent) <= 64
    assert key_of(LONG_KEY) == sent  # the same conversation, the same cache line
    assert key_of(LONG_KEY[:-1] + "5") != sent  # another conversation sharing the start
    assert key_of("conversation-42") == "conversation-42"  # a key that fits is sent as given


@pytest.mark.parametrize("key", [12345, b"bytes", ["a"]])
def test_a_cache_key_that_is_not_a_string_is_refused(key: object) -> None:
    with pytest.raises(InvalidInputError, match="cache_key must be a string"):
        ContextBuilder().build(BuildPlan.named("chat"), Request(user_input="hi"),
                               cache_key=key)  # type: ignore[arg-type]


def test_an_empty_call_id_is_renamed_in_chat_completions_too() -> None:
    history = [{"role": "user", "content": "weather in Paris?"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "", "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
               {"role": "tool", "tool_call_id": "", "content": "18C"}]
    ctx = ContextBuilder().build(BuildPlan.named("tool_heavy"),
                                 Request(user_input="and London?", history=history))
    body = ctx.to_request("openai", model="gpt-4o")
    _sdk_valid("openai", body)
    calls = [m for m in body["messages"] if m.get("tool_calls")]
    results = [m for m in body["messages"] if m["role"] == "tool"]
    assert [c["id"] for m in calls for c in m["tool_calls"]] == ["call"]
    assert [m["tool_call_id"] for m in results] == ["call"]
    assert any("renamed: empty" in note for note in ctx.rendering_notes("openai"))
