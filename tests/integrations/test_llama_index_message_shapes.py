"""LlamaIndex messages in the shapes its LLM integrations and users make them.

Several text blocks, a ``CachePoint`` block (LlamaIndex's way to cache a long prompt with
Anthropic), and the calls of llama-index-llms-anthropic, which keeps them in
``additional_kwargs["tool_calls"]`` as Anthropic ``tool_use`` blocks.
"""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import CacheControl, CachePoint, TextBlock
from llama_index.core.llms import ChatMessage

from contextwright import InvalidInputError, MemoryStore, chat_messages
from contextwright.integrations.llama_index import ContextwrightMemory


def memory() -> ContextwrightMemory:
    return ContextwrightMemory(MemoryStore(), user_id="U1", session_id="S1")


def test_text_blocks_are_joined_as_llama_index_joins_them() -> None:
    message = ChatMessage(role="user", blocks=[TextBlock(text="Order 1234 is late."),
                                               TextBlock(text="Please refund it.")])
    assert message.content == "Order 1234 is late.\nPlease refund it."
    assert chat_messages([message]) == [{"role": "user", "content": message.content}]


def test_a_cache_point_is_left_out_and_every_later_build_says_so() -> None:
    policy = ChatMessage(role="user", blocks=[
        TextBlock(text="Here is our fare policy: refunds within 24 hours."),
        CachePoint(cache_control=CacheControl(type="ephemeral"))])
    left_out: dict[str, int] = {}
    assert chat_messages([policy], left_out=left_out) == [
        {"role": "user", "content": "Here is our fare policy: refunds within 24 hours."}]
    assert left_out == {"cache": 1}
    stored = memory()
    stored.put(policy)
    stored.put(ChatMessage(role="assistant", content="Noted."))
    stored.put(ChatMessage(role="user", content="Can I get a refund?"))
    built = stored.get()
    assert "refunds within 24 hours" in str(built)
    (warning,) = stored.report.warnings
    assert "put() left out 1 block(s) of the stored messages (cache)" in warning
    stored.reset()
    stored.put(ChatMessage(role="user", content="Hello"))
    stored.get()
    assert stored.report.warnings == ()


def test_calls_kept_the_way_llama_indexs_anthropic_model_keeps_them_are_read() -> None:
    stored = memory()
    stored.put(ChatMessage(role="user", content="Weather in Paris?"))
    stored.put(ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [
        {"id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"},
         "type": "tool_use"}]}))
    stored.put(ChatMessage(role="tool", content="18 C, sunny",
                           additional_kwargs={"tool_call_id": "toolu_01"}))
    calls = [call for message in stored.get()
             for call in message.additional_kwargs.get("tool_calls") or ()]
    assert calls == [{"id": "toolu_01", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Paris"}'}}]


@pytest.mark.parametrize("call", [{"id": "toolu_01"}, {"name": "f", "input": {}},
                                  {"id": "c1", "function": "f"}, "get_weather"])
def test_a_call_of_no_known_shape_is_refused_naming_its_place(call: object) -> None:
    message = ChatMessage(role="assistant", content="",
                          additional_kwargs={"tool_calls": [call]})
    with pytest.raises(InvalidInputError,
                       match=r"messages\[1\]\.additional_kwargs\.tool_calls\[0\]"):
        chat_messages([ChatMessage(role="user", content="Hi"), message])
    with pytest.raises(InvalidInputError, match=r"messages\[0\]\.tool_calls\[0\] is not a"):
        chat_messages([{"role": "assistant", "content": [], "tool_calls": [call]}])
