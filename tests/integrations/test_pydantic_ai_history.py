"""The Pydantic AI capability inside real agent runs, with no network.

The model is Pydantic AI's own ``FunctionModel`` (it sees exactly what a provider would be sent)
or ``OpenAIChatModel`` talking to the local fake OpenAI server, which rejects what the API would.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

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
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextwright import ContextBuilder
from contextwright.integrations.pydantic_ai import (
    ContextwrightHistory,
    from_pydantic_ai,
    report_from_messages,
    to_pydantic_ai,
)
from fakes.provider_server import ProviderServer


class Recorder:
    """A ``FunctionModel`` function: records each request, calls a tool once, then answers."""

    def __init__(self, *, call_tool: bool = False) -> None:
        self.requests: list[list[ModelMessage]] = []
        self.call_tool = call_tool

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(messages)
        if self.call_tool and len(self.requests) == 1:
            return ModelResponse(parts=[ToolCallPart("get_booking", {"code": "KST7"},
                                                     tool_call_id="call_a")])
        return ModelResponse(parts=[TextPart("All set.")])


def run(agent: Agent[None, str], prompt: str, **kwargs: Any) -> Any:
    """``agent.run`` in a loop of its own (``run_sync`` leaves its loop open for good)."""
    return asyncio.run(agent.run(prompt, **kwargs))


def agent_with(model: Any, history: ContextwrightHistory, instructions: str = SYSTEM
               ) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, instructions=instructions, capabilities=[history])

    @agent.tool_plain
    def get_booking(code: str) -> str:
        """Look up a booking by its code."""
        return json.dumps({"code": code, "status": "confirmed", "seat": "12C"})

    return agent


def test_model_sees_the_build_while_the_run_keeps_every_message() -> None:
    recorder = Recorder()
    history = to_pydantic_ai(long_conversation(400))
    result = run(agent_with(FunctionModel(recorder), ContextwrightHistory(budget=1500)),
        "Where is KST499?", message_history=history)
    sent = recorder.requests[0]
    assert len(sent) < len(history) / 4
    first = sent[0].parts[0]
    assert isinstance(first, SystemPromptPart) and DATA_NOTE in first.content
    assert from_pydantic_ai(sent)[-1] == {"role": "user", "content": "Where is KST499?"}
    assert len(result.all_messages()) == len(history) + 2
    report = report_from_messages(result.all_messages())
    assert report.cuts()
    instructions = ContextBuilder().tokenizer.count(SYSTEM)
    assert report.total_tokens + instructions <= 1500
    provider_accepts_chat(from_pydantic_ai(sent))


def test_this_turns_results_are_fenced_for_the_model_but_not_in_the_run() -> None:
    recorder = Recorder(call_tool=True)
    result = run(agent_with(FunctionModel(recorder), ContextwrightHistory()),
        "Is KST7 confirmed?", message_history=to_pydantic_ai(long_conversation(20)))
    sent = recorder.requests[1][-1].parts[-1]
    assert isinstance(sent, ToolReturnPart) and "<<data " in sent.content and "12C" in sent.content
    kept = [p for m in result.all_messages() if isinstance(m, ModelRequest) for p in m.parts
            if isinstance(p, ToolReturnPart) and p.tool_call_id == "call_a"]
    assert "<<data " not in kept[0].model_response_str()
    assert result.output == "All set."


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(with_turn=False))
def test_tool_pairs_stay_whole_under_any_budget(conversation: Conversation) -> None:
    recorder = Recorder()
    agent = agent_with(FunctionModel(recorder), ContextwrightHistory(budget=conversation.budget))
    result = run(agent, conversation.user,
                            message_history=to_pydantic_ai(conversation.history) or None)
    sent = from_pydantic_ai(recorder.requests[0])
    provider_accepts_chat(sent)
    kept = set(call_ids(sent))
    assert set(result_ids(sent)) == kept
    for message in conversation.history:
        ids = {call["id"] for call in message.get("tool_calls") or ()}
        assert ids <= kept or not ids & kept
    assert report_from_messages(result.all_messages()).total_tokens <= conversation.budget


def test_requests_reach_the_openai_api_valid_through_openai_chat_model() -> None:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    with ProviderServer() as server:
        model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=server.base_url,
                                                                  api_key="test-key"))
        result = run(agent_with(model, ContextwrightHistory(budget=1200)),
            "Is KST449 confirmed?", message_history=to_pydantic_ai(long_conversation(150)))
    assert [r.status for r in server.received] == [200], server.received[-1].error
    messages = server.received[0].body["messages"]
    assert any(DATA_NOTE in str(m.get("content")) for m in messages if m["role"] == "system")
    assert result.output == "ok"


def test_conversions_keep_pairs_and_text() -> None:
    chats = long_conversation(9)
    back = from_pydantic_ai(to_pydantic_ai(chats))
    assert call_ids(back) == call_ids(chats) and result_ids(back) == result_ids(chats)
    assert [m["content"] for m in back] == [m["content"] for m in chats]


def test_a_part_it_cannot_carry_is_refused_naming_its_position() -> None:
    import pytest
    from pydantic_ai.messages import AudioUrl, UserPromptPart

    from contextwright import InvalidInputError

    history = [*to_pydantic_ai(long_conversation(3)),
               ModelRequest(parts=[UserPromptPart(["listen", AudioUrl("https://example.com/a.wav")])])]
    agent = agent_with(FunctionModel(Recorder()), ContextwrightHistory())
    with pytest.raises(InvalidInputError, match=rf"messages\[{len(history) - 1}\]"):
        run(agent, "What is in the recording?", message_history=history)


def test_images_reach_the_model_and_the_run_keeps_them() -> None:
    import base64
    import struct
    import zlib

    from pydantic_ai.messages import BinaryContent, ImageUrl, UserPromptPart

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 3, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(b"\x00" * 15)) + chunk(b"IEND", b""))
    images = [ImageUrl("https://example.com/a.png"), BinaryContent(png, media_type="image/png")]
    history = [*to_pydantic_ai(long_conversation(3)),
               ModelRequest(parts=[UserPromptPart(["look", *images])]),
               ModelResponse(parts=[TextPart("Two pictures.")])]
    recorder = Recorder()
    run(agent_with(FunctionModel(recorder), ContextwrightHistory()), "Which is larger?",
        message_history=history)
    sent = [part.content for message in recorder.requests[0] for part in message.parts
            if isinstance(part, UserPromptPart) and not isinstance(part.content, str)]
    assert sent == [["look", *images]]
    chat = from_pydantic_ai([ModelRequest(parts=[UserPromptPart(["look", *images])])])[0]
    assert [p["type"] for p in chat["content"]] == ["text", "image_url", "image_url"]
    assert chat["content"][2]["image_url"]["url"] == (
        "data:image/png;base64," + base64.b64encode(png).decode())


def test_an_output_validators_retry_reaches_the_model() -> None:
    from pydantic_ai import ModelRetry

    answers = iter(["maybe", "KST7 is confirmed."])
    requests: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(messages)
        return ModelResponse(parts=[TextPart(next(answers))])

    agent: Agent[None, str] = Agent(FunctionModel(model), instructions=SYSTEM,
                                    capabilities=[ContextwrightHistory()])

    @agent.output_validator
    def must_name_the_booking(output: str) -> str:
        if "KST" not in output:
            raise ModelRetry("Name the booking code.")
        return output

    result = run(agent, "Is KST7 confirmed?")
    assert result.output == "KST7 is confirmed."
    kinds = [type(part).__name__ for m in result.all_messages() for part in m.parts]
    assert "RetryFeedbackPart" in kinds  # what this Pydantic AI makes of a ModelRetry
    assert from_pydantic_ai(requests[1])[-2:] == [
        {"role": "assistant", "content": "maybe"},
        {"role": "user", "content": "Validation feedback:\nName the booking code.\n\n"
                                    "Fix the errors and try again."}]
    # Validation errors go as their JSON; the framework's own "no output" request as it is.
    from pydantic_ai.messages import RetryFeedbackPart, RetryInfo

    errors = RetryFeedbackPart(content=[{"type": "int_parsing", "loc": ("seat",),
                                         "msg": "not a number", "input": "12C"}],
                               retry=RetryInfo(cause="validation_error"))
    nothing = RetryFeedbackPart(content="Please return text.", retry=RetryInfo(cause="no_output"))
    first, second = from_pydantic_ai([ModelRequest(parts=[errors, nothing])])
    assert '"msg": "not a number"' in first["content"] and first["role"] == "user"
    assert second == {"role": "user", "content": "Please return text."}


def _png() -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 3, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 15)) + chunk(b"IEND", b""))


def test_a_tools_image_reaches_the_model_in_its_return() -> None:
    from pydantic_ai.messages import BinaryContent

    png = _png()
    recorder = Recorder(call_tool=True)
    agent: Agent[None, str] = Agent(FunctionModel(recorder), instructions=SYSTEM,
                                    capabilities=[ContextwrightHistory()])

    @agent.tool_plain
    def get_booking(code: str) -> list[Any]:
        """The booking's boarding pass."""
        return [f"Boarding pass of {code}:", BinaryContent(png, media_type="image/png")]

    run(agent, "Show me my boarding pass.")
    (returned,) = [p for m in recorder.requests[1] for p in m.parts
                   if isinstance(p, ToolReturnPart)]
    text, image, end = returned.content
    assert "<<data " in text and "Boarding pass of KST7:" in text and "<<end " in end
    assert isinstance(image, BinaryContent) and image.data == png
    chat = from_pydantic_ai([ModelRequest(parts=[ToolReturnPart(
        "get_booking", ["pass:", BinaryContent(png, media_type="image/png")], "call_a")])])[0]
    assert [p["type"] for p in chat["content"]] == ["text", "image_url"]


def test_a_tools_image_reaches_the_openai_api_valid() -> None:
    from pydantic_ai.messages import BinaryContent, UserPromptPart
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    history = [ModelRequest(parts=[UserPromptPart("Show me my boarding pass.")]),
               ModelResponse(parts=[ToolCallPart("get_booking", {"code": "KST7"},
                                                 tool_call_id="call_a")]),
               ModelRequest(parts=[ToolReturnPart("get_booking", [
                   "Boarding pass:", BinaryContent(_png(), media_type="image/png")], "call_a")]),
               ModelResponse(parts=[TextPart("Here it is.")])]
    with ProviderServer() as server:
        model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=server.base_url,
                                                                  api_key="test-key"))
        run(agent_with(model, ContextwrightHistory()), "Which seat is on it?",
            message_history=history)
    assert [r.status for r in server.received] == [200], server.received[-1].error
    assert "image_url" in json.dumps(server.received[0].body["messages"])


def test_a_tools_document_is_refused_naming_it() -> None:
    import pytest
    from pydantic_ai.messages import DocumentUrl

    from contextwright import InvalidInputError

    history = [ModelRequest(parts=[ToolReturnPart("get_booking", [
        "Receipt:", DocumentUrl("https://example.com/receipt.pdf")], "call_a")])]
    with pytest.raises(InvalidInputError, match=r"messages\[0\]\.parts\[0\]\.content\[1\]"):
        from_pydantic_ai(history)


def test_native_tool_parts_are_left_out_and_the_run_keeps_them() -> None:
    from pydantic_ai.capabilities.web_search import WebSearch
    from pydantic_ai.messages import NativeToolCallPart, NativeToolReturnPart
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from scripted_openai import ScriptedOpenAI, Turn

    with ScriptedOpenAI(Turn(web_search="KST418 status", text="KST418 left on time."),
                        Turn(web_search="KST418", calls=(("get_gate", {"flight": "KST418"}),)),
                        Turn(text="Gate B12.")) as server:
        model = OpenAIResponsesModel("gpt-4o", provider=OpenAIProvider(
            base_url=server.base_url, api_key="test-key"))
        agent: Agent[None, str] = Agent(model, instructions=SYSTEM,
                                        capabilities=[WebSearch(), ContextwrightHistory()])

        @agent.tool_plain
        def get_gate(flight: str) -> str:
            """The gate of a flight."""
            return "B12"

        first = run(agent, "Did KST418 leave on time?")
        # The next run, and within it the request after a search and a call in one response.
        result = run(agent, "And its gate?", message_history=first.all_messages())
    assert server.errors == [] and result.output == "Gate B12."
    parts = [part for message in result.all_messages() for part in message.parts]
    assert sum(isinstance(p, NativeToolCallPart | NativeToolReturnPart) for p in parts) == 4
    last = server.received[-1].body["input"]
    assert not [item for item in last if item.get("type") == "web_search_call"]
    assert "KST418 left on time." in json.dumps(last)
    warnings = report_from_messages(result.all_messages()).warnings
    assert any("4 part(s) of the provider's native tools (web_search)" in w for w in warnings)


def test_a_tools_retry_reaches_the_model_whole() -> None:
    from pydantic_ai import ModelRetry

    calls = iter([{"code": "KST"}, {}, {"code": "KST7"}])  # unknown, then invalid, then right
    requests: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(messages)
        arguments = next(calls, None)
        if arguments is None:
            return ModelResponse(parts=[TextPart("KST7 is confirmed.")])
        return ModelResponse(parts=[ToolCallPart("get_booking", arguments,
                                                 tool_call_id=f"call_{len(requests)}")])

    agent: Agent[None, str] = Agent(FunctionModel(model), instructions=SYSTEM,
                                    capabilities=[ContextwrightHistory()])

    @agent.tool_plain(retries=3)
    def get_booking(code: str) -> str:
        """Look up a booking by its code."""
        if code != "KST7":
            raise ModelRetry(f"No booking {code!r}; codes are like 'KST7'.")
        return "confirmed"

    assert run(agent, "Is my booking confirmed?").output == "KST7 is confirmed."
    unknown, invalid, _ = [part.content for message in requests[-1] for part in message.parts
                           if isinstance(part, ToolReturnPart)]
    # The framework's feedback, as written: not compacted to "Tool result (...): error: ...".
    assert "(tool error) No booking 'KST'; codes are like 'KST7'." in unknown
    assert '"loc":["code"]' in invalid and '"msg":"Field required"' in invalid
    assert "Tool result (get_booking)" not in unknown + invalid


def test_a_tools_failure_reaches_the_model_whole_and_marked() -> None:
    from pydantic_ai.exceptions import ToolFailed

    failure = ("No booking 'KST9' exists: it was cancelled on 2024-05-02 at the passenger's "
               "request (ref CX-9912), and its fare of 412.50 EUR was refunded to the card "
               "ending 4242. Offer to search for a new flight instead of looking it up again.")
    recorder = Recorder(call_tool=True)
    agent: Agent[None, str] = Agent(FunctionModel(recorder), instructions=SYSTEM,
                                    capabilities=[ContextwrightHistory()])

    @agent.tool_plain
    def get_booking(code: str) -> str:
        """Look up a booking by its code."""
        raise ToolFailed(failure.replace("KST9", code))

    result = run(agent, "Is KST7 confirmed?")
    (kept,) = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert kept.outcome == "failed"  # what this Pydantic AI makes of a ToolFailed
    (sent,) = [p.content for m in recorder.requests[1] for p in m.parts
               if isinstance(p, ToolReturnPart)]
    # The error as the tool wrote it, marked: not compacted to "Tool result (...): error: ...".
    assert f"(tool error) {failure.replace('KST9', 'KST7')}" in sent
    assert "Tool result (get_booking)" not in sent
    chat = from_pydantic_ai([ModelRequest(parts=[kept])])[0]
    assert chat["content"] == f"(tool error) {kept.content}"


def test_an_anthropic_tool_loop_with_thinking_goes_through() -> None:
    # With extended thinking on, the Messages API refuses the loop's next request without the
    # thinking block it opened with; the local server enforces that rule.
    from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
    from pydantic_ai.providers.anthropic import AnthropicProvider

    from fakes.scripted_anthropic import ScriptedAnthropic

    thinking = {"type": "thinking", "thinking": "Look KST7 up first.", "signature": "EqQBsig"}
    script = [[thinking, {"type": "tool_use", "id": "toolu_1", "name": "get_booking",
                          "input": {"code": "KST7"}}],
              [{"type": "text", "text": "Seat 12C."}]]
    with ScriptedAnthropic(script) as server:
        model = AnthropicModel("claude-sonnet-5-5", provider=AnthropicProvider(
            base_url=server.origin, api_key="test-key"))
        settings = AnthropicModelSettings(max_tokens=4096,
                                          anthropic_thinking={"type": "adaptive"})
        result = run(agent_with(model, ContextwrightHistory()), "Is KST7 confirmed?",
                     model_settings=settings)
    assert [r.status for r in server.received] == [200, 200], server.received[-1].error
    assistant = [m for m in server.received[1].body["messages"] if m["role"] == "assistant"]
    assert assistant[-1]["content"][0] == thinking
    assert result.output == "Seat 12C."
