"""A LangChain tool's images reach the model where its API takes them, and are warned of where not.

``ChatOpenAI`` runs against the local scripted OpenAI server, which refuses what the API would:
the Responses API takes images in a ``function_call_output`` (with their ``detail``), Chat
Completions takes text only in a tool message. A tool returning a screenshot must reach a
Responses model as an image inside the tool's fence, and a Chat Completions model as the
build's placeholder with a warning in the report — never silently dropped.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.types import ModelRequest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from contextwright.integrations.langchain import ContextwrightMiddleware, report_from_state
from integrations.scripted_openai import ScriptedOpenAI, Turn

# A 2x2 PNG.
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEUlEQVR4nGP4z8AARGDiPwMAHfAD/aAzCYkAAAAAS"
       "UVORK5CYII=")
SCREEN_TEXT = "Screenshot of the booking page"


@tool
def screenshot() -> list[dict[str, Any]]:
    """Take a screenshot of the user's screen."""
    return [{"type": "text", "text": SCREEN_TEXT},
            {"type": "image", "base64": PNG, "mime_type": "image/png"}]


def run_screenshot_agent(*, responses: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """One agent turn that takes a screenshot; the final request's body and the state."""
    with ScriptedOpenAI(Turn(calls=(("screenshot", {}),)), Turn(text="A red square.")) as server:
        model = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test-key",
                           use_responses_api=responses)
        agent = create_agent(model, tools=[screenshot], system_prompt="You see screens.",
                             middleware=[ContextwrightMiddleware()])
        state = agent.invoke({"messages": [HumanMessage("What's on my screen?")]})
        assert server.errors == []
        return server.received[-1].body, state


def test_responses_model_gets_the_tool_image_inside_the_fence() -> None:
    body, state = run_screenshot_agent(responses=True)
    outputs = [item for item in body["input"] if item.get("type") == "function_call_output"]
    assert len(outputs) == 1
    parts = outputs[0]["output"]
    assert [part["type"] for part in parts] == ["input_text", "input_image", "input_text"]
    assert parts[0]["text"].startswith("<<data ") and SCREEN_TEXT in parts[0]["text"]
    assert parts[1]["image_url"] == f"data:image/png;base64,{PNG}"
    assert parts[1]["detail"] == "auto"
    assert parts[2]["text"].startswith("<<end ")
    assert not any("placeholder" in warning for warning in report_from_state(state).warnings)


def test_chat_completions_model_gets_a_placeholder_and_the_report_says_so() -> None:
    body, state = run_screenshot_agent(responses=False)
    tool_messages = [message for message in body["messages"] if message["role"] == "tool"]
    assert len(tool_messages) == 1
    assert "[image: image/png 2x2]" in tool_messages[0]["content"]
    warnings = report_from_state(state).warnings
    assert any("1 image(s) of tool results shown as placeholders" in warning
               for warning in warnings), warnings


@pytest.mark.parametrize("image", [
    {"type": "image", "base64": PNG, "mime_type": "image/png"},
    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
])
def test_a_model_that_renders_images_itself_is_handed_them(image: dict[str, Any]) -> None:
    """A model that is not OpenAI's (ChatAnthropic, say) gets LangChain's tool images."""
    messages = [HumanMessage("What's on my screen?"),
                AIMessage("", tool_calls=[{"name": "screenshot", "args": {}, "id": "call_1"}]),
                ToolMessage(content=[{"type": "text", "text": SCREEN_TEXT}, image],
                            tool_call_id="call_1")]
    request = ModelRequest(model=GenericFakeChatModel(messages=iter([])), messages=messages,
                           system_message=None, tools=[], state={}, runtime=None)
    shaped, context = ContextwrightMiddleware().shape(request)
    content = shaped.messages[-1].content
    assert isinstance(content, list)
    assert [part["type"] for part in content] == ["text", "image_url", "text"]
    assert context.report.warnings == ()
