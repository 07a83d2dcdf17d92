"""A misconfigured integration fails when it is made, with a contextwright error.

A store given as its URL or as ``None``, a model's name given as the builder, a plan that is
neither a plan, a name nor a function: each is refused by the constructor of every integration,
not at the first write or model call with a plain Python error. And a prompt the budget cannot
hold is the same ``BudgetError`` in every integration.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from llama_index.core.llms import ChatMessage
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from contextwright import BuildPlan, ContextBuilder, MemoryStore
from contextwright.errors import BudgetError, ConfigurationError, PlanError
from contextwright.integrations.langchain import ContextwrightMiddleware
from contextwright.integrations.llama_index import ContextwrightMemory
from contextwright.integrations.openai_agents import ContextwrightInputFilter, ContextwrightSession
from contextwright.integrations.pydantic_ai import ContextwrightHistory

LONG_PROMPT = "You are an airline's support agent; be precise and polite. " * 40

SHAPED: dict[str, Callable[..., Any]] = {
    "langchain": ContextwrightMiddleware,
    "openai_agents": ContextwrightInputFilter,
    "pydantic_ai": ContextwrightHistory,
    "llama_index": lambda **kw: ContextwrightMemory(MemoryStore(), user_id="u", session_id="s",
                                                    **kw),
}
"""Each integration's constructor, taking ``builder=``, ``plan=`` and ``budget=``."""


@pytest.mark.parametrize("store", ["sqlite:///agents.db", None, object()])
def test_session_and_memory_refuse_what_is_not_a_store(store: object) -> None:
    with pytest.raises(ConfigurationError, match="takes a store"):
        ContextwrightSession(store, user_id="u", session_id="s")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="takes a store"):
        ContextwrightMemory(store, user_id="u", session_id="s")  # type: ignore[arg-type]


def test_a_store_url_points_to_open_store() -> None:
    with pytest.raises(ConfigurationError, match="open_store"):
        ContextwrightMemory("redis://127.0.0.1:6379/0",  # type: ignore[arg-type]
                            user_id="u", session_id="s")


@pytest.mark.parametrize("integration", sorted(SHAPED))
def test_a_model_name_as_builder_is_refused(integration: str) -> None:
    with pytest.raises(ConfigurationError, match=r"ContextBuilder\(model='gpt-4o'\)"):
        SHAPED[integration](builder="gpt-4o")


@pytest.mark.parametrize("integration", sorted(SHAPED))
def test_a_plan_of_the_wrong_kind_is_refused(integration: str) -> None:
    with pytest.raises(ConfigurationError, match="plan must be"):
        SHAPED[integration](plan=42)


@pytest.mark.parametrize("integration", sorted(SHAPED))
def test_an_unknown_plan_name_is_refused_when_made(integration: str) -> None:
    with pytest.raises(PlanError, match="no_such_plan"):
        SHAPED[integration](plan="no_such_plan")


def test_a_plan_function_may_name_a_shipped_plan() -> None:
    memory = ContextwrightMemory(MemoryStore(), user_id="u", session_id="s",
                                 plan=lambda request: "tool_heavy")
    memory.put(ChatMessage(role="user", content="Is KST7 confirmed?"))
    memory.get()
    assert memory.report.plan == BuildPlan.named("tool_heavy").name


def test_a_plan_function_returning_something_else_is_a_plan_error() -> None:
    memory = ContextwrightMemory(MemoryStore(), user_id="u", session_id="s",
                                 plan=lambda request: 42)
    memory.put(ChatMessage(role="user", content="Is KST7 confirmed?"))
    with pytest.raises(PlanError, match="returned a int"):
        memory.get()


def test_an_over_budget_prompt_is_a_budget_error_in_langchain() -> None:
    agent = create_agent(GenericFakeChatModel(messages=iter([AIMessage("Yes.")])),
                         system_prompt=LONG_PROMPT,
                         middleware=[ContextwrightMiddleware(budget=50)])
    with pytest.raises(BudgetError):
        agent.invoke({"messages": [HumanMessage("Is KST7 confirmed?")]})


def test_over_budget_instructions_are_a_budget_error_in_pydantic_ai() -> None:
    agent = Agent(TestModel(), instructions=LONG_PROMPT,
                  capabilities=[ContextwrightHistory(budget=50)])
    with pytest.raises(BudgetError) as raised:
        asyncio.run(agent.run("Is KST7 confirmed?"))
    assert raised.value.report.available == 50


def test_an_over_budget_prompt_is_a_budget_error_in_llama_index() -> None:
    memory = ContextwrightMemory(MemoryStore(), user_id="u", session_id="s", system=LONG_PROMPT,
                                 budget=50)
    memory.put(ChatMessage(role="user", content="Is KST7 confirmed?"))
    with pytest.raises(BudgetError):
        memory.get()


def test_a_builder_given_is_kept() -> None:
    builder = ContextBuilder(model="gpt-4o")
    assert ContextwrightMiddleware(builder=builder).shaper.builder is builder
