"""The LlamaIndex memory inside a real ``FunctionAgent`` workflow, with no network.

The model is LlamaIndex's own ``MockFunctionCallingLLM`` with a response function that records
what it was sent; the memory runs on every contextwright store.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from conversations import (
    DATA_NOTE,
    SYSTEM,
    Conversation,
    call_ids,
    conversations,
    long_conversation,
    provider_accepts_chat,
    result_ids,
)
from hypothesis import HealthCheck, given, settings
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM, MockLLM
from llama_index.core.tools import FunctionTool

from contextwright import InvalidInputError, MemoryStore, Store, chat_messages
from contextwright.convert import to_llama_index
from contextwright.integrations.llama_index import ContextwrightMemory

# The workflow engine under FunctionAgent lists the agent's members, which reads pydantic
# attributes pydantic deprecates; the warning is about LlamaIndex's code, not ours.
pytestmark = pytest.mark.filterwarnings(
    "ignore::pydantic.warnings.PydanticDeprecationWarning")


def get_booking(code: str = "KST7") -> str:
    """Look up a booking by its code."""
    return json.dumps({"code": code, "status": "confirmed", "seat": "12C"})


class Recorder:
    """A response function: records each request, calls the tool once if asked, then answers."""

    def __init__(self, *, call_tool: bool = False) -> None:
        self.requests: list[list[ChatMessage]] = []
        self.call_tool = call_tool

    def __call__(self, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.requests.append(list(messages))
        if self.call_tool and len(self.requests) == 1:
            return ChatMessage(role="assistant", blocks=[ToolCallBlock(
                tool_call_id="call_a", tool_name="get_booking", tool_kwargs={"code": "KST7"})])
        return ChatMessage(role="assistant", content="All set.")


def run(memory: ContextwrightMemory, recorder: Recorder, text: str) -> str:
    async def main() -> str:  # the workflow starts its tasks in the running loop
        agent = FunctionAgent(tools=[FunctionTool.from_defaults(get_booking)],
                              llm=MockFunctionCallingLLM(response_generator=recorder))
        return str(await agent.run(text, memory=memory))

    return asyncio.run(main())


def test_agent_sees_the_build_and_the_store_keeps_the_whole_session(store: Store) -> None:
    memory = ContextwrightMemory(store, user_id="u1", session_id="s1", system=SYSTEM,
                                 budget=1500)
    memory.put_messages(to_llama_index(long_conversation(400)))
    recorder = Recorder(call_tool=True)
    assert run(memory, recorder, "Is KST7 confirmed?") == "All set."
    first, second = recorder.requests
    assert len(first) < 150 and first[0].role == "system" and SYSTEM in str(first[0].content)
    assert first[-1].content == "Is KST7 confirmed?"
    assert DATA_NOTE in str(first[0].content)
    assert second[-1].role == "tool" and "12C" in str(second[-1].content)
    stored = memory.get_all()
    assert len(stored) == len(long_conversation(400)) + 4
    assert call_ids(chat_messages(stored))[-1] == "call_a"
    assert memory.report.total_tokens <= 1500
    provider_accepts_chat(chat_messages(first))


def test_sessions_of_two_users_never_see_each_other(store: Store) -> None:
    alice = ContextwrightMemory(store, user_id="alice", session_id="same")
    bob = ContextwrightMemory(store, user_id="bob", session_id="same")
    alice.put(ChatMessage(role="user", content="alice's secret"))
    bob.set([ChatMessage(role="user", content="bob's question")])
    bob.reset()
    assert [m.content for m in alice.get_all()] == ["alice's secret"] and bob.get_all() == []


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(with_turn=False))
def test_tool_pairs_stay_whole_under_any_budget(conversation: Conversation) -> None:
    memory = ContextwrightMemory(MemoryStore(), user_id="u", session_id="s", system=SYSTEM,
                                 budget=conversation.budget)
    memory.put_messages(to_llama_index(conversation.history))
    recorder = Recorder()
    run(memory, recorder, conversation.user)
    sent = chat_messages(recorder.requests[0])
    provider_accepts_chat(sent)
    kept = set(call_ids(sent))
    assert set(result_ids(sent)) == kept
    for message in conversation.history:
        ids = {call["id"] for call in message.get("tool_calls") or ()}
        assert ids <= kept or not ids & kept
    assert memory.report.total_tokens <= conversation.budget


def test_get_with_input_builds_for_it_and_leaves_it_to_the_caller() -> None:
    # A chat engine sends the input after what ``get`` returns: returned too, it went twice.
    memory = ContextwrightMemory(MemoryStore(), user_id="u", session_id="s", budget=600)
    memory.put_messages(to_llama_index(long_conversation(100)))
    built = memory.get(input="Where is KST150?")
    assert "Where is KST150?" not in [m.content for m in built] and len(built) < 100
    assert memory.report.total_tokens <= 600  # the history was budgeted with the input
    assert len(memory.get_all()) == len(long_conversation(100))  # input is not stored
    # An agent stores its message first: then it is the newest message, and returned.
    memory.put(ChatMessage(role="user", content="Where is KST150?"))
    assert memory.get(input="Where is KST150?")[-1].content == "Where is KST150?"


def test_a_context_chat_engine_sends_the_question_once() -> None:
    from llama_index.core.chat_engine import ContextChatEngine
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    class OneNode(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return [NodeWithScore(node=TextNode(text="Order 42 shipped."), score=1.0)]

    prompts: list[str] = []

    class Recording(MockLLM):
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            prompts.append(prompt)
            return super().complete(prompt, formatted=formatted, **kwargs)

    memory = ContextwrightMemory(MemoryStore(), user_id="u", session_id="s")
    engine = ContextChatEngine.from_defaults(retriever=OneNode(), llm=Recording(max_tokens=5),
                                             memory=memory)
    engine.chat("Where is order 42?")
    engine.chat("And when does it arrive?")
    assert prompts[-1].count("And when does it arrive?") == 1
    assert prompts[-1].count("Where is order 42?") == 1


def test_report_before_any_build_is_an_error_and_ids_are_required() -> None:
    memory = ContextwrightMemory(MemoryStore(), user_id="u", session_id="s")
    with pytest.raises(InvalidInputError, match="no build yet"):
        _ = memory.report
    with pytest.raises(InvalidInputError, match="user_id"):
        ContextwrightMemory(MemoryStore(), user_id="", session_id="s")


def test_a_second_memory_on_the_session_sees_its_appends_and_its_erasure(store: Store) -> None:
    first = ContextwrightMemory(store, user_id="u", session_id="shared")
    second = ContextwrightMemory(store, user_id="u", session_id="shared")
    first.put(ChatMessage(role="user", content="a"))
    assert [m.content for m in first.get()][-1] == "a"
    second.put_messages([ChatMessage(role="assistant", content="b"),
                         ChatMessage(role="user", content="c")])
    assert [m.content for m in first.get_all()] == ["a", "b", "c"]
    second.reset()
    second.put(ChatMessage(role="user", content="d"))
    assert [m.content for m in first.get_all()] == ["d"]


def test_an_async_store_is_refused_rather_than_losing_writes() -> None:
    from contextwright.errors import StoreUsageError
    from contextwright.session import AsyncMemoryStore

    with pytest.raises(StoreUsageError, match="sync store"):
        ContextwrightMemory(AsyncMemoryStore(), user_id="u", session_id="s")
