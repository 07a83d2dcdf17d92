"""A build's report read back from a framework's state is the report the build made.

The LangChain middleware keeps the report's dict in the agent's state and Pydantic AI's
capability keeps it on the run's newest request; ``report_from_state`` and
``report_from_messages`` give it back, its cache report included, as a ``CacheReport``.
"""

from __future__ import annotations

import asyncio

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextwright.core.cache import CacheReport
from contextwright.integrations.langchain import ContextwrightMiddleware, report_from_state
from contextwright.integrations.pydantic_ai import ContextwrightHistory, report_from_messages


def test_langchain_report_from_state_has_its_cache_report() -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage("Yes."), AIMessage("Seat 12C."),
                                                AIMessage("You are welcome.")]))
    agent = create_agent(model, system_prompt="You are an airline's support agent.",
                         middleware=[ContextwrightMiddleware()], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t-1"}}
    agent.invoke({"messages": [HumanMessage("Is KST7 confirmed?")]}, thread)
    agent.invoke({"messages": [HumanMessage("Which seat?")]}, thread)
    state = agent.invoke({"messages": [HumanMessage("Thanks.")]}, thread)
    report = report_from_state(state)
    assert isinstance(report.cache, CacheReport)
    assert report.cache.previous and 0 < report.cache.hit_share <= 1
    assert report.to_dict() == state["contextwright_report"]


def test_pydantic_ai_report_from_saved_messages_has_its_cache_report() -> None:
    def model(messages: list[object], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Confirmed.")])

    agent: Agent[None, str] = Agent(FunctionModel(model), instructions="Support agent.",
                                    capabilities=[ContextwrightHistory()])
    first = asyncio.run(agent.run("Is KST7 confirmed?"))
    saved = ModelMessagesTypeAdapter.validate_json(
        ModelMessagesTypeAdapter.dump_json(first.all_messages()))  # a run resumed elsewhere
    result = asyncio.run(agent.run("Which seat?", message_history=saved))
    report = report_from_messages(result.all_messages())
    assert isinstance(report.cache, CacheReport) and report.cache.previous
    assert report.to_dict()["cache"] == report.cache.to_dict()
