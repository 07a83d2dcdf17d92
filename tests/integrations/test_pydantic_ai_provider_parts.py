"""The Pydantic AI capability with prompt items and parts beyond plain text, in real runs.

``TextContent`` and ``CachePoint`` in a prompt, items it cannot carry named by what they are,
Claude's signed thinking as ``BedrockConverseModel`` records it, and parts changed in place.
The model is Pydantic AI's ``FunctionModel``, answering as each provider's model records.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    CachePoint,
    DocumentUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextwright import InvalidInputError
from contextwright.integrations._core import ConversionMemo
from contextwright.integrations.pydantic_ai import (
    ContextwrightHistory,
    from_pydantic_ai,
    report_from_messages,
)
from contextwright.integrations.pydantic_ai import _fingerprint as pydantic_ai_fingerprint


def run(agent: Agent[None, str], prompt: Any) -> Any:
    """``agent.run`` in a loop of its own (``run_sync`` leaves its loop open for good)."""
    return asyncio.run(agent.run(prompt))


def test_text_content_is_sent_as_its_text_and_a_cache_point_is_reported() -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart("Refunds within 24 hours.")])

    agent: Agent[None, str] = Agent(FunctionModel(model), instructions="Support agent.",
                                    capabilities=[ContextwrightHistory(budget=2000)])
    result = run(agent, ["Our refund policy: refunds within 24 hours.", CachePoint(),
                         TextContent("Summarise it.", metadata={"ticket": 4411})])
    assert result.output == "Refunds within 24 hours."
    prompts = [part.content for message in seen[0] for part in message.parts
               if isinstance(part, UserPromptPart)]
    assert prompts == ["Our refund policy: refunds within 24 hours.\nSummarise it."]
    assert "4411" not in str(seen[0])  # metadata is the application's, never the model's
    (warning,) = report_from_messages(result.all_messages()).warnings
    assert "left out 1 CachePoint(s)" in warning
    kept = result.all_messages()[0].parts[-1]
    assert isinstance(kept, UserPromptPart) and CachePoint() in kept.content  # the run keeps it


@pytest.mark.parametrize(("item", "named"), [
    (AudioUrl("https://example.com/a.mp3"), r"an AudioUrl \(audio\)"),
    (DocumentUrl("https://example.com/r.pdf"), r"a DocumentUrl \(a document\)"),
    (BinaryContent(b"%PDF-1.4", media_type="application/pdf"),
     r"a BinaryContent \(application/pdf\)"),
])
def test_an_item_it_cannot_carry_is_refused_by_what_it_is(item: object, named: str) -> None:
    prompt = ModelRequest(parts=[UserPromptPart(["Read this.", CachePoint(), item])])
    with pytest.raises(InvalidInputError,
                       match=rf"messages\[0\]\.parts\[0\]\.content\[2\] is {named}"):
        from_pydantic_ai([prompt])


def thinking_loop(provider: str, *, canonical: str | None = None,
                  redacted: bool = False) -> list[ModelMessage]:
    """The second request of a tool loop the model opened with signed thinking."""
    seen: list[list[ModelMessage]] = []
    thinking = (ThinkingPart("", id="redacted_content", signature="ErcBCkgIBx",
                             provider_name=provider) if redacted else
                ThinkingPart("I should look the booking up.", signature="EqQBCkYIBxgCKkB",
                             provider_name=provider))

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        if len(seen) == 1:
            return ModelResponse(parts=[thinking, ToolCallPart("lookup", {"code": "KST7"},
                                                               tool_call_id="toolu_01")],
                                 provider_name=provider, canonical_system=canonical)
        return ModelResponse(parts=[TextPart("Confirmed.")], provider_name=provider)

    agent: Agent[None, str] = Agent(FunctionModel(model),
                                    capabilities=[ContextwrightHistory()])

    @agent.tool_plain
    def lookup(code: str) -> str:
        """Look a booking up."""
        return "confirmed"

    run(agent, "Is KST7 confirmed?")
    return seen[1]


def sent_thinking(messages: list[ModelMessage]) -> list[ThinkingPart]:
    return [part for message in messages if isinstance(message, ModelResponse)
            for part in message.parts if isinstance(part, ThinkingPart)]


@pytest.mark.parametrize("canonical", ["anthropic", None])
def test_claudes_thinking_on_bedrock_goes_back_while_its_loop_is_open(
        canonical: str | None) -> None:
    # Claude on BedrockConverseModel: provider "bedrock", verified by Anthropic's keys.
    (thinking,) = sent_thinking(thinking_loop("bedrock", canonical=canonical))
    assert (thinking.content, thinking.signature) == ("I should look the booking up.",
                                                      "EqQBCkYIBxgCKkB")
    (redacted,) = sent_thinking(thinking_loop("bedrock", canonical=canonical, redacted=True))
    assert redacted.content == "" and redacted.signature == "ErcBCkgIBx"
    assert redacted.id in ("redacted_thinking", "redacted_content")


def test_another_models_encrypted_reasoning_on_bedrock_is_not_sent_as_claudes() -> None:
    # Bedrock stamps "bedrock" on a model whose reasoning Anthropic's keys cannot verify.
    assert sent_thinking(thinking_loop("bedrock", canonical="bedrock")) == []


def test_a_part_changed_in_place_is_converted_again() -> None:
    memo = ConversionMemo(from_pydantic_ai, pydantic_ai_fingerprint)
    prompt = UserPromptPart(["Book seat 12C"])
    call = ToolCallPart("book", {"seat": "12C"}, tool_call_id="call_1")
    request, response = ModelRequest(parts=[prompt]), ModelResponse(parts=[call])
    assert memo([request])[0]["content"] == "Book seat 12C"
    assert isinstance(prompt.content, list)
    prompt.content.append("and add a bag")
    assert memo([request])[0]["content"] == "Book seat 12C\nand add a bag"
    prompt.content = "Book seat 14A"
    assert memo([request])[0]["content"] == "Book seat 14A"
    assert memo([response])[0]["tool_calls"][0]["function"]["arguments"] == '{"seat":"12C"}'
    assert isinstance(call.args, dict)
    call.args["seat"] = "14A"
    assert memo([response])[0]["tool_calls"][0]["function"]["arguments"] == '{"seat":"14A"}'
