"""Pydantic AI runs whose responses hold files the model generated.

A ``FilePart`` (an image the provider's image generation or code interpreter made) is in the
run's messages of an ordinary agent; every later request of the conversation must still be
built, and what the build leaves out is reported.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryImage,
    FilePart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from scripted_openai import ScriptedOpenAI, Turn

from contextwright.integrations.pydantic_ai import ContextwrightHistory, report_from_messages

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAQAAAADCAAAAAC0ObT9AAAAC0lEQVR4nGNgwA8AAA8AAWfCvNgAAAAASUVORK5CYI"
       "I=")


def run(agent: Agent[None, str], prompt: str, **kwargs: Any) -> Any:
    return asyncio.run(agent.run(prompt, **kwargs))


def test_an_image_the_model_generated_is_left_out_and_reported() -> None:
    from pydantic_ai.capabilities.image_generation import ImageGeneration
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    generated = {"type": "image_generation_call", "id": "ig_1", "status": "completed",
                 "output_format": "png", "result": PNG}
    with ScriptedOpenAI(Turn(items=(generated,), text="Here is your boarding pass."),
                        Turn(text="It is valid for KST418.")) as server:
        model = OpenAIResponsesModel("gpt-4o", provider=OpenAIProvider(
            base_url=server.base_url, api_key="test-key"))
        agent: Agent[None, str] = Agent(model, instructions="Support agent.",
                                        capabilities=[ImageGeneration(), ContextwrightHistory()])
        first = run(agent, "Draw my boarding pass.")
        result = run(agent, "Is it valid?", message_history=first.all_messages())
    assert server.errors == [] and result.output == "It is valid for KST418."
    parts = [part for message in result.all_messages() for part in message.parts]
    assert sum(isinstance(part, FilePart) for part in parts) == 1  # the run keeps it
    sent = server.received[-1].body["input"]
    assert "Here is your boarding pass." in str(sent) and PNG not in str(sent)
    warnings = report_from_messages(result.all_messages()).warnings
    assert any("left out 1 file(s) the model generated (image/png)" in w for w in warnings), \
        warnings


def test_a_response_of_a_generated_file_alone_sends_no_empty_answer() -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart("Done.")])

    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Draw a plane.")]),
        ModelResponse(parts=[FilePart(content=BinaryImage(data=b"\x89PNG",
                                                          media_type="image/png"))]),
    ]
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[ContextwrightHistory()])
    run(agent, "Thanks.", message_history=history)
    assert [type(message).__name__ for message in seen[0]] == ["ModelRequest"]
    prompts = [part.content for part in seen[0][0].parts if isinstance(part, UserPromptPart)]
    assert prompts == ["Draw a plane.", "Thanks."]
