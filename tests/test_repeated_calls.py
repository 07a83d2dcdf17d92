"""A call made again with the same arguments (a poll, a retry) is another call, even when the
server numbers calls per reply and so reuses the call id: every call and result is shown, in
every rendering, each checked against the official SDK types and the API's documented rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import TypeAdapter

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.agent import make_agent
from fakes.openai_server import FakeOpenAIServer, Reply
from fakes.provider_server import check_chat, check_messages, check_responses

POLL = {"type": "function", "function": {"name": "poll_job", "parameters": {
    "type": "object", "properties": {"job": {"type": "string"}}}}}
SDK_TYPES: dict[str, TypeAdapter[Any]] = {
    "openai": TypeAdapter(CompletionCreateParamsNonStreaming),
    "openai-responses": TypeAdapter(ResponseCreateParamsNonStreaming),
    "anthropic": TypeAdapter(MessageCreateParamsNonStreaming),
}
CHECKS = {"openai": check_chat, "openai-responses": check_responses,
          "anthropic": lambda body: check_messages({**body, "max_tokens": 1024})}
MODELS = {"openai": "gpt-4o", "openai-responses": "gpt-4o", "anthropic": "claude-sonnet-4-5"}


def poll(call_id: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": "poll_job", "arguments": '{"job": "j1"}'}}]},
            {"role": "tool", "tool_call_id": call_id, "content": "status: pending"}]


def results_shown(body: dict[str, Any], fmt: str) -> int:
    if fmt == "openai":
        return sum(1 for m in body["messages"] if m["role"] == "tool")
    if fmt == "openai-responses":
        return sum(1 for i in body["input"] if i.get("type") == "function_call_output")
    return sum(1 for m in body["messages"] for b in m["content"] if b["type"] == "tool_result")


@pytest.mark.parametrize("where", ["turn", "history"])
@pytest.mark.parametrize("fmt", ["openai", "openai-responses", "anthropic"])
def test_polls_with_a_reused_call_id_are_all_shown(where: str, fmt: str) -> None:
    polls = [m for _ in range(3) for m in poll("call_0")]
    request = (Request(user_input="Start j1 and wait for it", tools=[POLL], turn=polls)
               if where == "turn" else
               Request(user_input="Is it done now?", tools=[POLL], history=[
                   {"role": "user", "content": "Start j1 and wait for it"}, *polls,
                   {"role": "assistant", "content": "Still pending."}]))
    ctx = ContextBuilder().build(BuildPlan.named("tool_heavy"), request)
    assert not [d for d in ctx.report.decisions if d.action == "deduplicated"]
    body = ctx.to_request(fmt, model=MODELS[fmt])
    SDK_TYPES[fmt].validate_python(body)
    CHECKS[fmt](body)
    assert results_shown(body, fmt) == 3


def test_a_copy_of_the_question_and_a_message_sent_twice_are_still_one() -> None:
    history = [{"role": "user", "content": "Start j1"}, *poll("call_0"),
               {"role": "assistant", "content": "Pending."},
               {"role": "assistant", "content": "Pending."},
               {"role": "user", "content": "Is it done?"}]
    ctx = ContextBuilder().build(BuildPlan.named("tool_heavy"),
                                 Request(user_input="Is it done?", tools=[POLL], history=history))
    contents = [m["content"] for m in ctx.to_messages()]
    assert contents.count("Pending.") == 1 and contents.count("Is it done?") == 1
    assert sum(1 for m in ctx.to_messages() if m["role"] == "tool") == 1


def test_the_agent_shows_every_poll_of_a_server_that_numbers_calls_per_reply(
        tmp_path: Path) -> None:
    def listed() -> Reply:
        body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": None, "tool_calls": [{
                        "id": "call_0", "type": "function",
                        "function": {"name": "list_memos", "arguments": "{}"}}]}}]}
        return Reply(raw_body=json.dumps(body).encode())

    done = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "You have no memos."}}]}
    with FakeOpenAIServer([listed(), listed(), listed(),
                           Reply(raw_body=json.dumps(done).encode())]) as server:
        agent = make_agent(server.base_url, "m", tmp_path / "a.db")
        assert agent.run_turn("u", "s", "check my memos three times") == "You have no memos."
        agent.close()
        last = server.requests[-1].body["messages"]
    assert sum(1 for m in last if m["role"] == "tool") == 3
