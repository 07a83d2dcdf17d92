"""Each integration keeps the provider's prompt cache warm, one conversation at a time.

A conversation's builds continue the layout of its own last build (its fingerprint kept in the
LangChain thread's state, on the Pydantic AI run's messages, in the Agents SDK run's context,
in the LlamaIndex memory), so an older tool result moving to a shorter tier does not rewrite
the start of the next request. Two conversations run interleaved through one integration
object: each must repeat its own previous request's start, which a fingerprint handed across
conversations would break (the build would find another history and cut afresh). ``cache=False``
turns it off.

The measure is the provider's: of each request, the tokens of the leading messages identical
to the same conversation's previous request, over all tokens sent.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from agents import Agent as AgentsAgent
from agents import RunConfig, Runner, function_tool
from agents.models.openai_responses import OpenAIResponsesModel
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from llama_index.core.llms import ChatMessage
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextwright import ContextBuilder, MemoryStore
from contextwright.integrations.langchain import ContextwrightMiddleware
from contextwright.integrations.llama_index import ContextwrightMemory
from contextwright.integrations.openai_agents import ContextwrightInputFilter
from contextwright.integrations.pydantic_ai import ContextwrightHistory, from_pydantic_ai
from integrations.scripted_openai import ScriptedOpenAI, Turn

SYSTEM = "You are an airline's support agent. Answer from the booking records. " * 12
TURNS = 8
CONVERSATIONS = ("A", "B")
TOKENIZER = ContextBuilder().tokenizer


def booking(code: str) -> str:
    """A booking record long enough that older ones are shortened under the budget."""
    return json.dumps({"booking_id": code, "status": "confirmed", "seat": "12C", "fare": "Y",
                       "history": [f"event {k} for {code}" for k in range(12)]})


def question(conversation: str, turn: int) -> str:
    return f"[{conversation}] Is KST{turn} confirmed?"


def repeated_share(requests: Sequence[Sequence[Any]]) -> float:
    """Tokens of each request's leading messages identical to the previous one's, over all."""
    rendered = [[json.dumps(message, sort_keys=True, default=str) for message in request]
                for request in requests]
    repeated = total = 0
    for before, now in itertools.pairwise(rendered):
        same = 0
        for old, new in zip(before, now, strict=False):
            if old != new:
                break
            same += 1
        repeated += sum(TOKENIZER.count(text) for text in now[:same])
        total += sum(TOKENIZER.count(text) for text in now)
    return repeated / total


def by_conversation(requests: Sequence[Sequence[Any]], text_of: Callable[[Any], str]
                    ) -> dict[str, list[Sequence[Any]]]:
    """The requests of each conversation, told apart by the tag its user messages carry."""
    split: dict[str, list[Sequence[Any]]] = {name: [] for name in CONVERSATIONS}
    for request in requests:
        tags = {name for name in CONVERSATIONS
                for message in request if f"[{name}]" in text_of(message)}
        assert len(tags) == 1, tags  # a request never mixes two conversations
        split[tags.pop()].append(request)
    return split


# --- LangChain ---------------------------------------------------------------------------------


@tool
def get_booking(booking_id: str) -> str:
    """Look up a booking."""
    return booking(booking_id)


def langchain_requests(middleware: ContextwrightMiddleware) -> dict[str, list[Sequence[Any]]]:
    script = [turn for i in range(TURNS) for _ in CONVERSATIONS for turn in (
        Turn(calls=(("get_booking", {"booking_id": f"KST{i}"}),)),
        Turn(text=f"KST{i} is confirmed, seat 12C."))]
    with ScriptedOpenAI(*script) as server:
        model = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test-key")
        agent = create_agent(model, tools=[get_booking], system_prompt=SYSTEM,
                             middleware=[middleware], checkpointer=InMemorySaver())
        for turn in range(TURNS):
            for name in CONVERSATIONS:  # interleaved: A1, B1, A2, B2...
                agent.invoke({"messages": [HumanMessage(question(name, turn))]},
                             {"configurable": {"thread_id": name}})
        assert server.errors == []
        bodies = [received.body["messages"] for received in server.received]
    return by_conversation(bodies, lambda message: str(message.get("content")))


def test_langchain_threads_each_keep_their_prefix() -> None:
    threads = langchain_requests(ContextwrightMiddleware(budget=2500))
    for name, requests in threads.items():
        assert len(requests) == 2 * TURNS
        assert repeated_share(requests) >= 0.85, name


def test_langchain_cache_off_cuts_every_call_afresh() -> None:
    threads = langchain_requests(ContextwrightMiddleware(budget=2500, cache=False))
    assert all(repeated_share(requests) < 0.85 for requests in threads.values())


class AnswersByRequest(ScriptedOpenAI):
    """Looks the booking up when the user has just asked, else answers: whatever the order in
    which concurrent conversations' requests arrive."""

    def __init__(self) -> None:
        super().__init__()
        self._one_at_a_time = threading.Lock()

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        with self._one_at_a_time:
            if last["role"] == "user":
                code = str(last["content"]).split("Is ")[1].split(" ")[0]
                self.turns = [Turn(calls=(("get_booking", {"booking_id": code}),))]
            else:
                self.turns = [Turn(text="Confirmed, seat 12C.")]
            return super().answer(path, headers, body)


def test_langchain_concurrent_threads_each_keep_their_prefix() -> None:
    """Both threads' turns run at once (``ainvoke``), through one middleware."""
    with AnswersByRequest() as server:
        model = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test-key")
        agent = create_agent(model, tools=[get_booking], system_prompt=SYSTEM,
                             middleware=[ContextwrightMiddleware(budget=2500)],
                             checkpointer=InMemorySaver())

        async def run() -> None:
            for turn in range(TURNS):
                await asyncio.gather(*(
                    agent.ainvoke({"messages": [HumanMessage(question(name, turn))]},
                                  {"configurable": {"thread_id": name}})
                    for name in CONVERSATIONS))

        asyncio.run(run())
        assert server.errors == []
        bodies = [received.body["messages"] for received in server.received]
    threads = by_conversation(bodies, lambda message: str(message.get("content")))
    for name, requests in threads.items():
        assert len(requests) == 2 * TURNS
        assert repeated_share(requests) >= 0.85, name


# --- Pydantic AI -------------------------------------------------------------------------------


def pydantic_ai_requests(capability: ContextwrightHistory) -> dict[str, list[Sequence[Any]]]:
    requests: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(list(messages))
        last = from_pydantic_ai(messages)[-1]
        if last["role"] == "user":  # a new question: look the booking up
            code = str(last["content"]).split("Is ")[1].split(" ")[0]
            return ModelResponse(parts=[ToolCallPart("get_booking", {"booking_id": code},
                                                     tool_call_id=f"call_{len(requests)}")])
        return ModelResponse(parts=[TextPart("Confirmed, seat 12C.")])

    agent = Agent(FunctionModel(model), instructions=SYSTEM, capabilities=[capability])

    @agent.tool_plain
    def get_booking(booking_id: str) -> str:
        """Look up a booking."""
        return booking(booking_id)

    history: dict[str, list[ModelMessage]] = {name: [] for name in CONVERSATIONS}
    for turn in range(TURNS):
        for name in CONVERSATIONS:
            result = asyncio.run(agent.run(question(name, turn), message_history=history[name]))
            history[name] = result.all_messages()
    chats = [from_pydantic_ai(request) for request in requests]
    return by_conversation(chats, lambda message: str(message.get("content")))


def test_pydantic_ai_conversations_each_keep_their_prefix() -> None:
    conversations = pydantic_ai_requests(ContextwrightHistory(budget=2500))
    for name, requests in conversations.items():
        assert len(requests) == 2 * TURNS
        assert repeated_share(requests) >= 0.85, name


def test_pydantic_ai_cache_off_cuts_every_request_afresh() -> None:
    conversations = pydantic_ai_requests(ContextwrightHistory(budget=2500, cache=False))
    assert all(repeated_share(requests) < 0.85 for requests in conversations.values())


def test_pydantic_ai_keeps_one_fingerprint_per_conversation() -> None:
    """Only the newest request carries the fingerprint: a saved history does not grow by one
    per call."""
    capability = ContextwrightHistory(budget=2500)
    agent = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("Yes.")])),
                  instructions=SYSTEM, capabilities=[capability])
    messages: list[ModelMessage] = []
    for turn in range(4):
        messages = asyncio.run(agent.run(question("A", turn),
                                         message_history=messages)).all_messages()
    holders = [message for message in messages
               if "contextwright_fingerprint" in (getattr(message, "metadata", None) or {})]
    assert len(holders) == 1


# --- OpenAI Agents SDK -------------------------------------------------------------------------


@function_tool
def look_up(booking_id: str) -> str:
    """Look up a booking."""
    return booking(booking_id)


def agents_requests(input_filter: ContextwrightInputFilter) -> dict[str, list[Sequence[Any]]]:
    """The Responses requests of two conversations run interleaved, each run with its context."""
    script = [turn for i in range(TURNS) for _ in CONVERSATIONS for turn in (
        Turn(calls=(("look_up", {"booking_id": f"KST{i}"}),)),
        Turn(text=f"KST{i} is confirmed, seat 12C."))]
    config = RunConfig(call_model_input_filter=input_filter, tracing_disabled=True)
    with ScriptedOpenAI(*script) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test-key")
        agent = AgentsAgent(name="support", instructions=SYSTEM, tools=[look_up],
                            model=OpenAIResponsesModel(model="gpt-4o", openai_client=client))

        async def run() -> None:
            contexts: dict[str, dict[str, Any]] = {name: {} for name in CONVERSATIONS}
            items: dict[str, list[Any]] = {name: [] for name in CONVERSATIONS}
            for turn in range(TURNS):
                for name in CONVERSATIONS:
                    given = [*items[name], {"role": "user", "content": question(name, turn)}]
                    result = await Runner.run(agent, given, run_config=config,
                                              context=contexts[name])
                    items[name] = result.to_input_list()
            await client.close()

        asyncio.run(run())
        assert server.errors == []
        bodies = [received.body["input"] for received in server.received]
    return by_conversation(bodies, lambda item: json.dumps(item.get("content")))


def test_agents_sdk_runs_each_keep_their_prefix() -> None:
    conversations = agents_requests(ContextwrightInputFilter(budget=2500))
    for name, requests in conversations.items():
        assert len(requests) == 2 * TURNS
        assert repeated_share(requests) >= 0.85, name


def test_agents_sdk_cache_off_cuts_every_call_afresh() -> None:
    conversations = agents_requests(ContextwrightInputFilter(budget=2500, cache=False))
    assert all(repeated_share(requests) < 0.85 for requests in conversations.values())


# --- LlamaIndex --------------------------------------------------------------------------------


def llama_index_requests(cache: bool) -> dict[str, list[Sequence[Any]]]:
    store = MemoryStore()
    off = {} if cache else {"cache": False}  # on by default
    memories = {name: ContextwrightMemory(store, user_id="u", session_id=name, system=SYSTEM,
                                          budget=2500, **off) for name in CONVERSATIONS}
    requests: dict[str, list[Sequence[Any]]] = {name: [] for name in CONVERSATIONS}
    for turn in range(TURNS):
        for name, memory in memories.items():
            call = {"id": f"call_{name}{turn}", "type": "function",
                    "function": {"name": "get_booking",
                                 "arguments": json.dumps({"booking_id": f"KST{turn}"})}}
            memory.put(ChatMessage(role="user", content=question(name, turn)))
            memory.put(ChatMessage(role="assistant", content="",
                                   additional_kwargs={"tool_calls": [call]}))
            memory.put(ChatMessage(role="tool", content=booking(f"KST{turn}"),
                                   additional_kwargs={"tool_call_id": call["id"],
                                                      "name": "get_booking"}))
            requests[name].append([message.model_dump(mode="json")
                                   for message in memory.get()])
            memory.put(ChatMessage(role="assistant", content=f"KST{turn} is confirmed."))
    return requests


def test_llama_index_memories_each_keep_their_prefix() -> None:
    """One ``get()`` a turn: each request adds a whole turn, so less of it can repeat."""
    for name, requests in llama_index_requests(cache=True).items():
        assert repeated_share(requests) >= 0.75, name


def test_llama_index_cache_off_cuts_every_get_afresh() -> None:
    assert all(repeated_share(requests) < 0.75
               for requests in llama_index_requests(cache=False).values())


def test_llama_index_a_reset_session_starts_a_new_cache_line() -> None:
    memory = ContextwrightMemory(MemoryStore(), user_id="u", session_id="s", system=SYSTEM)
    memory.put(ChatMessage(role="user", content=question("A", 0)))
    memory.get()
    assert memory.report.to_dict()["cache"]["previous"] is False
    memory.put(ChatMessage(role="assistant", content="Yes."))
    memory.put(ChatMessage(role="user", content=question("A", 1)))
    memory.get()
    assert memory.report.to_dict()["cache"]["previous"] is True
    memory.reset()
    memory.put(ChatMessage(role="user", content=question("A", 2)))
    memory.get()
    assert memory.report.to_dict()["cache"]["previous"] is False
