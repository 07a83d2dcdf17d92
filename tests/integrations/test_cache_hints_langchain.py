"""The LangChain middleware asks the provider to cache the build's stable prefix.

Real agents, with ``ChatOpenAI`` and ``ChatAnthropic`` talking to the local fake servers (which
refuse what the APIs refuse, more than four breakpoints among it): the request body the
provider receives is what is checked. ``ChatAnthropic`` needs ``langchain-anthropic``, which
only these tests use.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from conversations import SYSTEM, long_conversation
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from contextwright.integrations.langchain import ContextwrightMiddleware, to_langchain
from fakes.provider_server import ProviderServer
from fakes.scripted_anthropic import ScriptedAnthropic


@tool
def get_booking(code: str) -> str:
    """Look up a booking by its code."""
    return json.dumps({"code": code, "status": "confirmed", "seat": "12C"})


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def openai_agent(server: ProviderServer, middleware: ContextwrightMiddleware,
                 **model: Any) -> Any:
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test-key",
                      max_retries=0, **model)
    return create_agent(chat, [get_booking], system_prompt=SYSTEM, middleware=[middleware],
                        checkpointer=InMemorySaver())


def opening(question: str) -> dict[str, Any]:
    return {"messages": [*to_langchain(long_conversation(12)), HumanMessage(question)]}


@pytest.mark.parametrize("responses", [False, True], ids=["chat", "responses"])
def test_chat_openai_sends_one_prompt_cache_key_per_thread(responses: bool) -> None:
    with ProviderServer() as server:
        agent = openai_agent(server, ContextwrightMiddleware(), use_responses_api=responses)
        agent.invoke(opening("Is KST7 confirmed?"), thread("t-1"))
        # An async agent's call (the build on a worker thread) reads the same thread.
        asyncio.run(agent.ainvoke({"messages": [HumanMessage("Which seat?")]}, thread("t-1")))
        agent.invoke(opening("Is KST7 confirmed?"), thread("t-2"))
    assert [r.status for r in server.received] == [200] * 3, server.received[-1].error
    keys = [received.body.get("prompt_cache_key") for received in server.received]
    assert keys[0] is not None and keys[0] == keys[1]  # one thread, one cache line
    assert keys[2] is not None and keys[2] != keys[0]  # the same words, another thread
    assert all(len(str(key)) <= 64 and "t-1" not in str(key) for key in keys)


def test_no_thread_no_key_and_the_agents_own_key_wins() -> None:
    from langchain_openai import ChatOpenAI

    with ProviderServer() as server:
        chat = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test-key",
                          max_retries=0)
        agent = create_agent(chat, [get_booking], middleware=[ContextwrightMiddleware()])
        agent.invoke(opening("Is KST7 confirmed?"))  # no checkpointer, no thread: no key
        openai_agent(server, ContextwrightMiddleware(),
                     model_kwargs={"prompt_cache_key": "tenant-a"}).invoke(
            opening("Is KST7 confirmed?"), thread("t-1"))
    assert [r.status for r in server.received] == [200, 200], server.received[-1].error
    assert "prompt_cache_key" not in server.received[0].body
    assert server.received[1].body["prompt_cache_key"] == "tenant-a"


def test_cache_off_sends_no_prompt_cache_key() -> None:
    with ProviderServer() as server:
        openai_agent(server, ContextwrightMiddleware(cache=False)).invoke(
            opening("Is KST7 confirmed?"), thread("t-1"))
    assert server.received[0].status == 200
    assert "prompt_cache_key" not in server.received[0].body


# --- ChatAnthropic ---------------------------------------------------------------------------


def anthropic_agent(server: ScriptedAnthropic, middleware: ContextwrightMiddleware,
                    system: str | SystemMessage = SYSTEM) -> Any:
    anthropic = pytest.importorskip("langchain_anthropic")
    chat = anthropic.ChatAnthropic(model="claude-sonnet-5-5", base_url=server.origin,
                                   api_key="test-key", max_tokens=1024, max_retries=0)
    return create_agent(chat, [get_booking], system_prompt=system, middleware=[middleware],
                        checkpointer=InMemorySaver())


def marked_blocks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every block of an Anthropic request with ``cache_control``, with where it is."""
    system = body.get("system")
    blocks = [("system", b) for b in system] if isinstance(system, list) else []
    blocks += [("tools", t) for t in body.get("tools", ())]
    blocks += [(f"messages.{i}", b) for i, m in enumerate(body["messages"])
               if isinstance(m["content"], list) for b in m["content"]]
    return [(where, block) for where, block in blocks if "cache_control" in block]


def question_index(messages: list[dict[str, Any]]) -> int:
    """The user's last own question (not a message of tool results)."""
    return max(i for i, m in enumerate(messages) if m["role"] == "user" and (
        isinstance(m["content"], str) or any(b["type"] == "text" for b in m["content"])))


def test_chat_anthropic_gets_breakpoints_at_the_stable_parts_ends() -> None:
    script = [[{"type": "tool_use", "id": "toolu_1", "name": "get_booking",
                "input": {"code": "KST7"}}],
              [{"type": "text", "text": "KST7 is confirmed."}],
              [{"type": "text", "text": "Seat 12C."}]]
    with ScriptedAnthropic(script) as server:
        agent = anthropic_agent(server, ContextwrightMiddleware())
        agent.invoke(opening("Is KST7 confirmed?"), thread("t-1"))
        agent.invoke({"messages": [HumanMessage("Which seat?")]}, thread("t-1"))
    assert [r.status for r in server.received] == [200] * 3, server.received[-1].error
    for received in server.received:
        body, marks = received.body, marked_blocks(received.body)
        assert 2 <= len(marks) <= 4
        assert all(block["cache_control"]["type"] == "ephemeral" for _, block in marks)
        assert "cache_control" in body["system"][-1]  # the system prompt's end
        messages = body["messages"]
        # History's end: the last block of the turn before the user's question.
        assert "cache_control" in messages[question_index(messages) - 1]["content"][-1]
    # The tool loop's call repeats the first call's prefix with its breakpoint at history's
    # end, so it reads what the first call wrote there.
    first, loop = server.received[0].body["messages"], server.received[1].body["messages"]
    end = question_index(first) - 1
    assert loop[end] == first[end]


def test_breakpoints_the_system_prompt_carries_count_toward_the_four() -> None:
    given = SystemMessage(content=[
        {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}])
    with ScriptedAnthropic([]) as server:
        agent = anthropic_agent(server, ContextwrightMiddleware(), system=given)
        agent.invoke(opening("Is KST7 confirmed?"), thread("t-1"))
    assert server.received[0].status == 200, server.received[0].error
    marks = marked_blocks(server.received[0].body)
    assert [block["text"] for where, block in marks if where == "system"][:2] == [
        SYSTEM, "Be kind."]
    assert len(marks) == 4


def test_chat_anthropic_with_cache_off_gets_no_breakpoints() -> None:
    with ScriptedAnthropic([]) as server:
        anthropic_agent(server, ContextwrightMiddleware(cache=False)).invoke(
            opening("Is KST7 confirmed?"), thread("t-1"))
    assert server.received[0].status == 200, server.received[0].error
    assert marked_blocks(server.received[0].body) == []
