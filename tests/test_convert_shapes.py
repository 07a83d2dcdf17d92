"""chat_messages on shapes users hold: dumped framework messages, flat Responses input lists,
and malformed blocks, which get a typed error naming their place."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.convert import chat_messages
from contextwright.errors import InvalidInputError

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object",
                                          "properties": {"city": {"type": "string"}}}}}


def test_dumped_llama_index_messages_keep_their_text() -> None:
    from llama_index.core.llms import ChatMessage

    history = [ChatMessage(role="user", content="What is the refund window?"),
               ChatMessage(role="assistant", content="15 days.")]
    dumped = [message.model_dump() for message in history]
    stored = json.loads(json.dumps([message.model_dump(mode="json") for message in history]))
    expected = [{"role": "user", "content": "What is the refund window?"},
                {"role": "assistant", "content": "15 days."}]
    assert chat_messages(dumped) == expected
    assert chat_messages(stored) == expected  # read back from a JSON store
    ctx = ContextBuilder().build(BuildPlan.named("chat"),
                                 Request(user_input="and exchanges?",
                                         history=chat_messages(stored)))
    assert [m["content"] for m in ctx.to_messages("openai")[-3:]] == [
        "What is the refund window?", "15 days.", "and exchanges?"]


def test_a_responses_text_after_its_calls_in_a_flat_input_list_joins_them() -> None:
    # ``input += response.output`` where the output held the call before the text.
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city": "Paris"}', "status": "completed"},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}]},
    ]
    messages = chat_messages(items)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["content"] == "Let me look." and messages[1]["id"] == "msg_1"
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_1"]
    assert messages[3]["content"] == "It is sunny."  # after the output: a message of its own
    ctx = ContextBuilder().build(BuildPlan.named("tool_heavy"), Request(
        user_input="And Rome?", history=messages, tools=[WEATHER]))
    assert "sunny" in json.dumps(ctx.to_request("anthropic"))


def test_an_assistant_text_between_two_calls_of_one_response_joins_them_in_order() -> None:
    items = [{"type": "message", "role": "assistant",
              "content": [{"type": "output_text", "text": "First."}]},
             {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
             {"type": "message", "role": "assistant",
              "content": [{"type": "output_text", "text": "Second."}]},
             {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"}]
    (message,) = chat_messages(items)
    assert message["content"] == "First.\n\nSecond."
    assert [c["id"] for c in message["tool_calls"]] == ["a", "b"]


TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}


@pytest.mark.parametrize(("items", "message"), [
    ([{"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}],
     r"messages\[0\]\.content\[0\] has no id"),
    ([{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]}],
     r"messages\[0\]\.content\[0\] has no name"),
    ([{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}],
     r"messages\[0\]\.content\[0\] has no tool_use_id"),
    ([{"role": "assistant", "content": ["hi", TOOL_USE]}],
     r"messages\[0\]\.content\[0\] must be an object, not str"),
    ([{"role": "user", "content": [
        "hi", {"type": "tool_result", "tool_use_id": "t", "content": "x"}]}],
     r"messages\[0\]\.content\[0\] must be an object"),
    ([{"role": "assistant", "content": [{"type": "text", "text": None}, TOOL_USE]}],
     r"messages\[0\]\.content\[0\]\.text must be a string"),
    ([{"role": "system", "content": [TOOL_USE]}], r"messages\[0\]\.role must be user or "
                                                  "assistant"),
    ([{"type": "function_call", "name": "f", "arguments": "{}"}],
     r"messages\[0\] has no call_id"),
    ([{"type": "function_call", "call_id": "c", "arguments": "{}"}],
     r"messages\[0\] has no name"),
    ([{"type": "function_call_output", "output": "x"}], r"messages\[0\] has no call_id"),
    ([{"choices": ["x"]}], r"messages\[0\]\.choices\[0\] must be an object"),
    ([{"type": "ai", "additional_kwargs": {}, "content": "x",
       "tool_calls": [{"name": "f", "args": {}}]}], r"messages\[0\]\.tool_calls\[0\] has no id"),
    ([{"role": "user", "blocks": ["hi"], "additional_kwargs": {}}],
     r"messages\[0\]\.blocks\[0\] must be an object"),
])
def test_malformed_blocks_get_a_typed_error_naming_their_place(items: list[Any],
                                                               message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        chat_messages(items)


def test_a_role_less_anthropic_message_is_still_the_assistants() -> None:
    (message,) = chat_messages({"content": [{"type": "text", "text": "Checking."}, TOOL_USE]})
    assert message["role"] == "assistant" and message["tool_calls"][0]["id"] == "toolu_1"


def test_an_audio_answer_keeps_its_transcript_as_its_words() -> None:
    from openai.types.chat import ChatCompletionMessage
    from openai.types.chat.chat_completion_audio import ChatCompletionAudio

    answer = ChatCompletionMessage(role="assistant", content=None, audio=ChatCompletionAudio(
        id="audio_1", data="AAAA", expires_at=0, transcript="The answer is 42."))
    assert chat_messages([answer]) == [{"role": "assistant", "content": "The answer is 42."}]
    dumped = answer.model_dump()
    assert chat_messages([dumped])[0]["content"] == "The answer is 42."


@pytest.mark.parametrize("message", [
    {"role": "assistant", "content": None, "audio": {"id": "audio_1"}},
    {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
    {"role": "assistant", "content": "Calling f.",
     "function_call": {"name": "f", "arguments": "{}"}},
])
def test_an_answer_no_chat_message_carries_is_refused_not_read_as_empty(
        message: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError, match=r"messages\[0\] (is an audio answer|holds a "
                                                r"legacy function_call)"):
        chat_messages([message])


def test_streamed_langchain_messages_are_read_like_the_messages_themselves() -> None:
    from langchain_core.messages import AIMessageChunk, HumanMessageChunk, ToolMessageChunk

    streamed = (AIMessageChunk(content="Let me ", tool_call_chunks=[
        {"name": "get_weather", "args": '{"ci', "id": "call_1", "index": 0}])
        + AIMessageChunk(content="check.", tool_call_chunks=[
            {"name": None, "args": 'ty": "Paris"}', "id": None, "index": 0}]))
    messages = chat_messages([HumanMessageChunk(content="Weather in Paris?"), streamed,
                              ToolMessageChunk(content="sunny", tool_call_id="call_1")])
    assert messages == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}]


CITED = [{"type": "text", "text": "According to the policy, ", "citations": None},
         {"type": "text", "text": "refunds take 15 days", "citations": [
             {"type": "char_location", "cited_text": "Refunds take 15 days.",
              "document_index": 0, "document_title": "policy", "start_char_index": 0,
              "end_char_index": 21}]},
         {"type": "text", "text": ".", "citations": None}]
SERVER_SEARCH = [{"type": "text", "text": "I'll search."},
                 {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                  "input": {"query": "refunds"}},
                 {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}]


def test_an_answer_split_around_its_citations_reads_as_the_model_wrote_it() -> None:
    import anthropic.types
    from langchain_core.messages import AIMessage

    sdk = anthropic.types.Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1}, "content": CITED})
    answer = "According to the policy, refunds take 15 days."
    for given in (sdk, {"role": "assistant", "content": CITED}, AIMessage(content=CITED),
                  {"role": "assistant", "content": [*CITED, TOOL_USE]}):
        assert chat_messages([given])[0]["content"] == answer
    for given in ({"role": "assistant", "content": [*SERVER_SEARCH, *CITED]},
                  AIMessage(content=[*SERVER_SEARCH, *CITED])):  # a block between: a new line
        assert chat_messages([given])[0]["content"] == f"I'll search.\n{answer}"
    responses = {"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "Refunds take "},
        {"type": "output_text", "text": "15 days."}]}
    assert chat_messages([responses])[0]["content"] == "Refunds take 15 days."
    user = {"role": "user", "content": [{"type": "text", "text": "Hello"},
                                        {"type": "text", "text": "world"}]}
    assert chat_messages([user])[0]["content"] == "Hello\nworld"  # the user's parts: lines
