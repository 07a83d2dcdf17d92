"""An assistant's reasoning (``thinking_blocks``) in LlamaIndex messages: ``ThinkingBlock``s
with the signature in ``additional_information``, as llama-index-llms-anthropic makes and sends
them back, so a tool loop opened with reasoning can be continued and converted again."""

from __future__ import annotations

import json
from typing import Any

from llama_index.core.base.llms.types import TextBlock, ThinkingBlock
from llama_index.core.llms import ChatMessage

from contextwright import BuildPlan, ContextBuilder, Request, chat_messages
from contextwright.convert import to_llama_index

SIGNED = {"type": "thinking", "thinking": "The user wants Paris; call the tool.",
          "signature": "EqQBCkYIAxgCIkA..."}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a..."}
LOOP: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "Let me look.", "thinking_blocks": [SIGNED, REDACTED],
     "tool_calls": [{"id": "toolu_01", "type": "function", "function": {
         "name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
    {"role": "tool", "tool_call_id": "toolu_01", "content": "18 C, sunny"},
]


def test_thinking_blocks_become_llama_index_thinking_blocks_with_their_signature() -> None:
    assistant = to_llama_index(LOOP)[1]
    thinking = [b for b in assistant.blocks if isinstance(b, ThinkingBlock)]
    assert [b.content for b in thinking] == [SIGNED["thinking"], None]
    # llama-index-llms-anthropic sends a block back with additional_information["signature"]
    assert thinking[0].additional_information == {"type": "thinking",
                                                  "signature": SIGNED["signature"]}
    assert thinking[1].additional_information == REDACTED
    assert assistant.blocks[:2] == thinking  # reasoning first, as the model wrote it
    assert assistant.content == "Let me look."


def test_thinking_blocks_round_trip_through_llama_index() -> None:
    assert chat_messages(to_llama_index(LOOP)) == chat_messages(LOOP)


def test_unsigned_thinking_round_trips_too() -> None:
    unsigned = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello",
                 "thinking_blocks": [{"type": "thinking", "thinking": "greet back"}]}]
    assert chat_messages(to_llama_index(unsigned)) == chat_messages(unsigned)


def test_a_thinking_block_as_llama_index_anthropic_makes_it_is_read() -> None:
    reply = ChatMessage(role="assistant", blocks=[
        ThinkingBlock(content=SIGNED["thinking"],
                      additional_information={"signature": SIGNED["signature"],
                                              "type": "thinking"}),
        TextBlock(text="Let me look.")],
        additional_kwargs={"tool_calls": LOOP[1]["tool_calls"]})
    (read,) = chat_messages([reply])
    assert read["thinking_blocks"] == [SIGNED]
    context = ContextBuilder(model="claude-sonnet-4-5").build(
        BuildPlan.named("tool_heavy"),
        Request(user_input="Weather in Paris?", turn=[read, LOOP[2]]))
    sent = context.to_request("anthropic")["messages"][1]["content"]
    assert sent[0] == SIGNED  # the open loop's reasoning goes back with its signature


def test_another_providers_reasoning_is_left_out_as_before() -> None:
    # llama-index-llms-openai and Ollama keep a reasoning summary with no Anthropic signature:
    # no provider takes it back, so it is not carried (Responses reasoning items are not either).
    reply = ChatMessage(role="assistant", blocks=[
        ThinkingBlock(content="summary of reasoning", num_tokens=12,
                      additional_information={"id": "rs_1", "type": "reasoning"}),
        TextBlock(text="It is sunny.")])
    assert chat_messages([reply]) == [{"role": "assistant", "content": "It is sunny."}]
