"""Pydantic AI conversations compacted by the framework: the summary is what is left of them.

A compaction (a capability's ``compact_history`` on a run's ``compact=``, the provider's own)
replaces the earlier conversation with a ``CompactionPart``; every later request of the
conversation must still be built, and the summary must reach the model.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.compaction import CompactionRequest, CompactionResult
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextwright import InvalidInputError
from contextwright.integrations.pydantic_ai import ContextwrightHistory, from_pydantic_ai

SUMMARY = "The user asked about bookings KST1 and KST2; both are confirmed, seat 12C."


class Summarize(AbstractCapability[Any]):
    """Compacts the history to a summary and the request being answered."""

    async def compact_history(self, ctx: Any, request: CompactionRequest) -> CompactionResult:
        first = request.messages[0]
        standing = [part for part in first.parts if isinstance(part, SystemPromptPart)]
        part = CompactionPart(content=SUMMARY)
        return CompactionResult(messages=[ModelRequest(parts=[*standing, part]),
                                          request.messages[-1]], part=part, handler="summary",
                                kept_from=1)


def sent_text(messages: list[ModelMessage]) -> str:
    return "\n".join(str(getattr(part, "content", "")) for message in messages
                     for part in message.parts)


def test_a_compacted_conversation_goes_on_with_its_summary() -> None:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Confirmed.")])

    compacting: Agent[None, str] = Agent(FunctionModel(answer), instructions="Support agent.",
                                         capabilities=[Summarize()])
    result = asyncio.run(compacting.run("Is KST1 confirmed?"))
    result = asyncio.run(compacting.run("And KST2?", message_history=result.all_messages(),
                                        compact=True))
    compacted = result.all_messages()
    assert any(isinstance(part, CompactionPart) for message in compacted
               for part in message.parts)

    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart("Seat 12C.")])

    agent: Agent[None, str] = Agent(FunctionModel(model), instructions="Support agent.",
                                    capabilities=[ContextwrightHistory()])
    result = asyncio.run(agent.run("Which seat?", message_history=compacted))
    assert result.output == "Seat 12C."
    sent = sent_text(seen[-1])
    assert SUMMARY in sent and "Summary of the earlier conversation" in sent
    assert sent.index(SUMMARY) < sent.index("And KST2?") < sent.index("Which seat?")


def test_a_providers_summary_is_carried_and_an_encrypted_one_refused() -> None:
    readable = [ModelResponse(parts=[CompactionPart(content=SUMMARY, provider_name="anthropic")]),
                ModelRequest(parts=[UserPromptPart("Which seat?")])]
    chats = from_pydantic_ai(readable)
    assert [chat["role"] for chat in chats] == ["user", "user"]
    assert SUMMARY in chats[0]["content"]
    encrypted = [ModelResponse(parts=[CompactionPart(
        content=None, provider_name="openai", provider_details={"encrypted_content": "gAAA"})]),
        ModelRequest(parts=[UserPromptPart("Which seat?")])]
    with pytest.raises(InvalidInputError, match=r"messages\[0\]\.parts\[0\] is a CompactionPart "
                                                r"without a summary"):
        from_pydantic_ai(encrypted)
