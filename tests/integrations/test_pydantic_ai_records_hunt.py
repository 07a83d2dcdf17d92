"""Pydantic AI runs with the records it keeps in a run's messages.

``ModelSettingsDeltaPart`` records the thinking effort in effect (any agent whose settings name
an effort level has one); it is no content the model reads, and every later request of the
conversation must still be built.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextwright.integrations.pydantic_ai import ContextwrightHistory


def run(agent: Agent[None, str], prompt: str, **kwargs: Any) -> Any:
    return asyncio.run(agent.run(prompt, **kwargs))


def test_a_thinking_effort_does_not_break_the_next_request() -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        if len(seen) % 2:
            return ModelResponse(parts=[ToolCallPart("lookup", {"code": "KST7"})])
        return ModelResponse(parts=[TextPart("KST7 is confirmed.")])

    agent: Agent[None, str] = Agent(FunctionModel(model), instructions="Support agent.",
                                    model_settings={"thinking": "high"},
                                    capabilities=[ContextwrightHistory()])

    @agent.tool_plain
    def lookup(code: str) -> str:
        """Look a booking up."""
        return "confirmed"

    result = run(agent, "Is KST7 confirmed?")  # its second request follows a recorded effort
    for question in ("And KST8?", "And KST9?"):
        result = run(agent, question, message_history=result.all_messages())
    assert result.output == "KST7 is confirmed." and len(seen) == 6
    # The effort is recorded once, as a run without the capability records it: each request
    # is built with the effort in effect, so Pydantic AI sees no change to record.
    deltas = [part for message in result.all_messages() for part in message.parts
              if type(part).__name__ == "ModelSettingsDeltaPart"]
    assert len(deltas) == 1
