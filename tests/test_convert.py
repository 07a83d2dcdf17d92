"""Messages in and out in the forms SDK users hold: OpenAI chat objects, Responses items,
Anthropic messages; ``record`` takes each, and round trips keep ids and tool pairs."""

from __future__ import annotations

import json
from typing import Any

import anthropic.types as anthropic_types
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.responses import Response

from contextwright import BuildPlan, ContextBuilder, ContextManager, Request
from contextwright.convert import chat_messages, to_langchain, to_llama_index
from contextwright.errors import InvalidInputError

CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "上海"}'}}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object",
                                          "properties": {"city": {"type": "string"}}}}}


def sdk_chat_message() -> ChatCompletionMessage:
    return ChatCompletionMessage.model_validate(
        {"role": "assistant", "content": None, "tool_calls": [CALL]})


def anthropic_message() -> anthropic_types.Message:
    return anthropic_types.Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                     "input": {"city": "上海"}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5}})


def test_openai_sdk_message_and_completion_become_chat_dicts() -> None:
    (message,) = chat_messages(sdk_chat_message())
    assert message == {"role": "assistant", "content": None, "tool_calls": [CALL]}
    completion = ChatCompletion.model_validate({
        "id": "c", "object": "chat.completion", "created": 0, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": None, "tool_calls": [CALL]}}]})
    assert chat_messages(completion) == [message]


def test_anthropic_message_and_tool_results_become_chat_dicts() -> None:
    (message,) = chat_messages(anthropic_message())
    assert message["role"] == "assistant" and message["content"] == "Let me check."
    assert message["tool_calls"][0]["id"] == "toolu_1"
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"city": "上海"}
    results = chat_messages({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "多云"},
        {"type": "text", "text": "and tomorrow?"}]})
    assert results == [{"role": "tool", "tool_call_id": "toolu_1", "content": "多云"},
                       {"role": "user", "content": "and tomorrow?"}]


def test_responses_items_and_response_become_chat_dicts() -> None:
    items = [{"type": "message", "role": "user", "content": [
                 {"type": "input_text", "text": "weather?"}]},
             {"type": "function_call", "call_id": "fc_1", "name": "get_weather",
              "arguments": "{}"},
             {"type": "function_call_output", "call_id": "fc_1", "output": "sunny"}]
    assert chat_messages(items) == [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "fc_1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "fc_1", "content": "sunny"}]
    response = Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-4o",
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "output": [
            {"type": "message", "id": "m1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}]}]})
    assert chat_messages(response)[0]["content"] == "Sunny."


def test_developer_role_is_taken_as_system_and_plain_dicts_keep_their_fields() -> None:
    assert chat_messages({"role": "developer", "content": "be brief"}) == [
        {"role": "system", "content": "be brief"}]
    given = {"role": "user", "content": "hi", "id": "m7", "timestamp": "2026-01-01T00:00:00Z",
             "custom": 1}
    assert chat_messages(given) == [given]


@pytest.mark.parametrize(("part", "named"), [
    ({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}, "input_audio"),
    ({"type": "input_image", "file_id": "file-123", "detail": "auto"}, "file_id"),
    ({"type": "image", "source": {"type": "file", "file_id": "file_1"}}, "'file' image source"),
])
def test_a_part_that_cannot_be_carried_is_refused_by_name(part: dict[str, Any],
                                                          named: str) -> None:
    with pytest.raises(InvalidInputError, match=named):
        chat_messages({"role": "user", "content": [part]})


def test_record_takes_the_sdk_objects_as_they_come_back() -> None:
    manager = ContextManager()
    manager.prepare("u", "openai", "Weather in Shanghai?", tools=[WEATHER])
    manager.record("u", "openai", assistant=sdk_chat_message(),
                   tool_results=[{"tool_call_id": "call_1", "content": "多云"}])
    body = manager.prepare("u", "openai", None, tools=[WEATHER]).to_request("openai")
    assert any(m.get("tool_call_id") == "call_1" for m in body["messages"])

    manager.prepare("u", "anthropic", "Weather in Shanghai?", tools=[WEATHER])
    manager.record("u", "anthropic", assistant=anthropic_message(), tool_results=[
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "多云"}]}])
    body = manager.prepare("u", "anthropic", None, tools=[WEATHER]).to_request("anthropic")
    blocks = [b for m in body["messages"] for b in m["content"]]
    assert [b["id"] for b in blocks if b["type"] == "tool_use"] == ["toolu_1"]
    assert [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"] == ["toolu_1"]


def test_round_trip_openai_anthropic_responses_keeps_every_message_id_and_pair() -> None:
    history = [
        {"role": "user", "content": "Weather in Shanghai?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            CALL, {**CALL, "id": "call_2", "function": {"name": "get_weather",
                                                         "arguments": '{"city": "北京"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "多云"},
        {"role": "tool", "tool_call_id": "call_2", "content": "晴"},
        {"role": "assistant", "content": "Cloudy in Shanghai, sunny in Beijing."},
    ]
    ctx = ContextBuilder().build(BuildPlan.named("tool_heavy"),
                                 Request(user_input="Thanks!", history=history, tools=[WEATHER]))
    expected = [m for m in ctx.to_messages("openai") if m["role"] != "system"]
    from_anthropic = chat_messages(ctx.to_request("anthropic")["messages"])
    from_responses = chat_messages(ctx.to_request("openai-responses")["input"])
    for back in (from_anthropic, from_responses):
        assert _pairs(back) == _pairs(expected)
        assert [m["role"] for m in back if m["role"] != "tool"] == [
            m["role"] for m in expected if m["role"] != "tool"]


def _pairs(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    calls = [(c["id"], c["function"]["arguments"]) for m in messages
             for c in m.get("tool_calls") or ()]
    results = [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]
    return calls + results


def test_an_anthropic_message_dumped_to_a_dict_is_still_read_as_anthropic() -> None:
    (message,) = chat_messages([anthropic_message().model_dump()])
    assert message["tool_calls"][0]["id"] == "toolu_1"


def test_langchain_and_llama_index_round_trips_keep_every_message_id_and_pair() -> None:
    from langchain_core.messages import AIMessage, BaseMessage
    from llama_index.core.llms import ChatMessage

    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "Weather in Shanghai?", "id": "m1"},
        {"role": "assistant", "content": None, "tool_calls": [CALL], "id": "m2"},
        {"role": "tool", "tool_call_id": "call_1", "content": "多云", "id": "m3"},
        {"role": "assistant", "content": "Cloudy.", "id": "m4"},
    ]
    lc = to_langchain(history)
    assert all(isinstance(m, BaseMessage) for m in lc)
    assert isinstance(lc[2], AIMessage) and lc[2].tool_calls[0]["args"] == {"city": "上海"}
    li = to_llama_index(history)
    assert all(isinstance(m, ChatMessage) for m in li)
    for back in (chat_messages(lc), chat_messages(li), chat_messages(to_langchain(
            chat_messages(to_llama_index(history))))):
        assert [m["role"] for m in back] == [m["role"] for m in history]
        assert [m.get("id") for m in back[1:]] == ["m1", "m2", "m3", "m4"]
        assert _pairs(back) == _pairs(history)
        assert [m["content"] or None for m in back] == [m["content"] for m in history]


def test_a_langchain_conversation_builds_and_renders_for_anthropic() -> None:
    lc = to_langchain([
        {"role": "user", "content": "Weather in Shanghai?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "多云"}])
    ctx = ContextBuilder().build(BuildPlan.named("tool_heavy"), Request(
        user_input="and tomorrow?", history=chat_messages(lc), tools=[WEATHER]))
    blocks = [b for m in ctx.to_request("anthropic")["messages"] for b in m["content"]]
    assert [b["id"] for b in blocks if b["type"] == "tool_use"] == ["call_1"]


def test_responses_sdk_items_keep_parallel_calls_in_one_message() -> None:
    response = Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-4o",
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "output": [
            {"type": "function_call", "id": "fc1", "call_id": "a", "name": "get_weather",
             "arguments": '{"city": "Paris"}', "status": "completed"},
            {"type": "function_call", "id": "fc2", "call_id": "b", "name": "get_weather",
             "arguments": '{"city": "Rome"}', "status": "completed"}]})
    (message,) = chat_messages(list(response.output))
    assert [c["id"] for c in message["tool_calls"]] == ["a", "b"]


def test_a_response_whose_text_follows_its_call_is_one_assistant_message() -> None:
    # The output's order is the model's: a call, then its words. As two chat messages, the
    # call's result would not follow its call and ``record`` would refuse the reply.
    response = Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-4o",
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "output": [
            {"type": "function_call", "id": "fc_1", "call_id": "call_C", "name": "get_weather",
             "arguments": '{"city":"Oslo"}', "status": "completed"},
            {"type": "message", "id": "m1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Checking Oslo.", "annotations": []}]}]})
    (message,) = chat_messages(response)
    assert message["content"] == "Checking Oslo."
    assert [c["id"] for c in message["tool_calls"]] == ["call_C"]
    manager = ContextManager()
    manager.prepare("u", "s", "Weather in Oslo?", tools=[WEATHER])
    manager.record("u", "s", assistant=response, tool_results=[
        {"type": "function_call_output", "call_id": "call_C", "output": "2C"}])
    body = manager.prepare("u", "s", None, tools=[WEATHER]).to_request("openai")
    assert [m.get("tool_call_id") for m in body["messages"] if m["role"] == "tool"] == [
        "call_C"]


def test_refusals_errors_and_text_parts_are_kept() -> None:
    refusal = ChatCompletionMessage.model_validate(
        {"role": "assistant", "content": None, "refusal": "I can't help with that."})
    assert chat_messages(refusal)[0]["content"] == "I can't help with that."
    (result,) = chat_messages({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "timeout", "is_error": True}]})
    assert result["content"] == "(tool error) timeout"
    parts = chat_messages({"role": "user", "content": [{"type": "text", "text": "Hello"},
                                                       {"type": "text", "text": "world"}]})
    assert parts[0]["content"] == "Hello\nworld"


def test_langchain_anthropic_style_content_and_error_status() -> None:
    from langchain_core.messages import AIMessage, ToolMessage

    ai = AIMessage(content=[{"type": "text", "text": "Checking."},
                            {"type": "tool_use", "id": "t1", "name": "get_weather",
                             "input": {"city": "Rome"}}],
                   tool_calls=[{"name": "get_weather", "args": {"city": "Rome"}, "id": "t1"}])
    (message,) = chat_messages(ai)
    assert message["content"] == "Checking." and message["tool_calls"][0]["id"] == "t1"
    failed = ToolMessage(content="no such city", tool_call_id="t1", status="error")
    assert chat_messages(failed)[0]["content"] == "(tool error) no such city"
    (back,) = to_langchain(chat_messages(failed))  # the status comes back
    assert back.status == "error" and back.content == "(tool error) no such city"
    fine = ToolMessage(content="sunny", tool_call_id="t1")
    assert to_langchain(chat_messages(fine))[0].status == "success"
    with pytest.raises(InvalidInputError, match="assitant"):
        to_langchain([{"role": "assitant", "content": "typo"}])
    assert to_langchain([{"role": "tool", "tool_call_id": "t1", "content": "x",
                          "name": "get_weather"}])[0].name == "get_weather"


def test_a_responses_refusal_keeps_its_words() -> None:
    response = Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-4o",
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "output": [
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "refusal", "refusal": "I can't help with that."}]}]})
    assert chat_messages(response) == [
        {"role": "assistant", "content": "I can't help with that.", "id": "msg_1"}]


@pytest.mark.parametrize(("item", "named"), [
    ({"type": "text", "text": "The capital of France is Paris."}, "'text' item, not a message"),
    ({"type": "tool_use", "id": "t1", "name": "f", "input": {}}, "'tool_use' item"),
    ({"type": "web_search_call", "id": "ws_1", "status": "completed"}, "'web_search_call'"),
    ({"type": "message", "content": [{"type": "output_text", "text": "Hi"}]}, "without a role"),
    ({}, "not a message"),
    ({"id": "m1", "name": "bot"}, "not a message"),
])
def test_an_item_that_is_not_a_message_is_refused_by_name(item: dict[str, Any],
                                                          named: str) -> None:
    with pytest.raises(InvalidInputError, match=rf"messages\[1\] is .*{named}"):
        chat_messages([{"role": "user", "content": "Hi"}, item])


def test_record_refuses_bare_content_blocks_and_stores_nothing() -> None:
    from contextwright.session import SessionKey

    manager = ContextManager(background=False)
    manager.prepare("u", "s", "What is the capital of France?")
    blocks = [{"type": "text", "text": "The capital of France is Paris."}]
    with pytest.raises(InvalidInputError, match=r"assistant\[0\] is a 'text' item"):
        manager.record("u", "s", assistant=blocks)
    stored = manager.store.read(SessionKey(user_id="u", session_id="s"))
    assert [m.message["role"] for m in stored] == ["user"]
    # A message whose role the caller implies is still read.
    manager.record("u", "s", assistant={"content": "Paris."})
    assert manager.store.read(SessionKey(user_id="u", session_id="s"))[-1].message[
        "content"] == "Paris."


def test_the_agents_sdks_placeholder_id_is_not_kept() -> None:
    from agents.models.fake_id import FAKE_RESPONSES_ID

    from contextwright.convert import PLACEHOLDER_ID

    assert PLACEHOLDER_ID == FAKE_RESPONSES_ID
    answers = [{"id": FAKE_RESPONSES_ID, "type": "message", "role": "assistant",
                "status": "completed", "content": [
                    {"type": "output_text", "text": f"Answer {n}.", "annotations": []}]}
               for n in range(2)]
    plain = {"id": FAKE_RESPONSES_ID, "role": "assistant", "content": "Answer 2."}
    chats = chat_messages([answers[0], {"role": "user", "content": "And?"}, answers[1], plain])
    assert all("id" not in chat for chat in chats)
    ctx = ContextBuilder().build(BuildPlan.named("chat"), Request(
        user_input="Go on.", history=chats))
    assert [m.content for m in ctx.messages if m.role == "assistant"] == [
        "Answer 0.", "Answer 1.", "Answer 2."]


def test_langchain_call_and_reasoning_blocks_are_read_from_tool_calls_or_left_out() -> None:
    from langchain_core.messages import AIMessage

    responses_api = AIMessage(content=[
        {"type": "reasoning", "id": "rs_1", "summary": [
            {"type": "summary_text", "text": "Look it up."}]},
        {"type": "text", "text": "Checking.", "annotations": [], "id": "msg_1"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city":"Rome"}', "id": "fc_1"}],
        tool_calls=[{"name": "get_weather", "args": {"city": "Rome"}, "id": "call_1"}])
    (message,) = chat_messages(responses_api)
    assert message["content"] == "Checking."
    assert message["tool_calls"] == [{"id": "call_1", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city":"Rome"}'}}]  # the model's own text
    standard = AIMessage(content=[
        {"type": "reasoning", "reasoning": "Look it up."},
        {"type": "tool_call", "id": "call_2", "name": "get_weather", "args": {"city": "Oslo"}}],
        tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "call_2"}])
    assert chat_messages(standard)[0]["content"] == ""
    thinking = AIMessage(content=[{"type": "thinking", "thinking": "Hm.", "signature": "s"},
                                  {"type": "redacted_thinking", "data": "d"},
                                  {"type": "text", "text": "Rome is sunny."}])
    assert chat_messages(thinking)[0]["content"] == "Rome is sunny."
    lost = AIMessage(content=[{"type": "function_call", "call_id": "call_9", "name": "f",
                               "arguments": "{}"}])
    with pytest.raises(InvalidInputError,
                       match=r"content\[0\] is a 'function_call' block whose call is not"):
        chat_messages(lost)
