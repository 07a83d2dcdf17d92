"""The Pydantic AI capability asks the provider to cache the build's stable prefix.

Real agent runs, through Pydantic AI's own Anthropic and OpenAI models, against the local fake
servers (which refuse what the APIs refuse, more than four breakpoints among it): the request
body the provider receives is what is checked.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from conversations import SYSTEM, long_conversation
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage

from contextwright.integrations.pydantic_ai import ContextwrightHistory, to_pydantic_ai
from fakes.provider_server import ProviderServer
from fakes.scripted_anthropic import ScriptedAnthropic


def agent_with(model: Any, history: ContextwrightHistory) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, instructions=SYSTEM, capabilities=[history])

    @agent.tool_plain
    def get_booking(code: str) -> str:
        """Look up a booking by its code."""
        return json.dumps({"code": code, "status": "confirmed", "seat": "12C"})

    return agent


def run(agent: Agent[None, str], prompt: str, **kwargs: Any) -> Any:
    return asyncio.run(agent.run(prompt, **kwargs))


def anthropic_model(server: ScriptedAnthropic) -> Any:
    from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
    from pydantic_ai.providers.anthropic import AnthropicProvider

    # A small max_tokens: with the model's largest, the SDK streams, which the server does not.
    return AnthropicModel("claude-sonnet-5-5", provider=AnthropicProvider(
        base_url=server.origin, api_key="test-key"),
        settings=AnthropicModelSettings(max_tokens=4096))


def openai_model(server: ProviderServer) -> Any:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=server.base_url,
                                                             api_key="test-key"))


def marked_blocks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every block of an Anthropic request with ``cache_control``, with where it is."""
    system = body.get("system")
    blocks = [("system", b) for b in system] if isinstance(system, list) else []
    blocks += [("tools", tool) for tool in body.get("tools", ())]
    blocks += [(f"messages.{i}", b) for i, m in enumerate(body["messages"])
               if isinstance(m["content"], list) for b in m["content"]]
    return [(where, block) for where, block in blocks if "cache_control" in block]


def history_with_lookup() -> list[ModelMessage]:
    return to_pydantic_ai(long_conversation(12))


def test_anthropic_requests_carry_breakpoints_at_the_stable_parts_ends() -> None:
    script = [[{"type": "tool_use", "id": "toolu_1", "name": "get_booking",
                "input": {"code": "KST7"}}],
              [{"type": "text", "text": "KST7 is confirmed."}],
              [{"type": "text", "text": "Seat 12C."}]]
    with ScriptedAnthropic(script) as server:
        agent = agent_with(anthropic_model(server), ContextwrightHistory())
        first = run(agent, "Is KST7 confirmed?", message_history=history_with_lookup())
        run(agent, "Which seat?", message_history=first.all_messages())
    assert [r.status for r in server.received] == [200, 200, 200], server.received[-1].error
    for received in server.received:
        body = received.body
        marks = marked_blocks(body)
        assert 2 <= len(marks) <= 4
        assert all(block["cache_control"]["type"] == "ephemeral" for _, block in marks)
        # The system prompt's end (it covers the tools before it), never the tools again.
        assert "cache_control" in body["system"][-1]
        assert not any(where == "tools" for where, _ in marks)
        # History's end: the last block of the turn before the user's new question.
        messages = body["messages"]
        question = max(i for i, m in enumerate(messages) if m["role"] == "user" and any(
            b.get("type") == "text" for b in m["content"]))
        assert messages[question - 1]["content"][-1].get("cache_control") is not None
    # The tool loop's call repeats the first call's prefix, with its breakpoint at history's
    # end: it reads what the first call wrote there.
    first_body, loop_body = server.received[0].body, server.received[1].body
    end = len(first_body["messages"]) - 2
    assert loop_body["messages"][end] == first_body["messages"][end]
    assert "cache_control" in loop_body["messages"][end]["content"][-1]


def test_an_openai_model_gets_one_prompt_cache_key_per_conversation() -> None:
    with ProviderServer() as server:
        agent = agent_with(openai_model(server), ContextwrightHistory())
        first = run(agent, "Is KST7 confirmed?", message_history=history_with_lookup())
        run(agent, "Which seat?", message_history=first.all_messages())
        run(agent, "Is KST7 confirmed?", message_history=history_with_lookup())
    assert [r.status for r in server.received] == [200, 200, 200], server.received[-1].error
    keys = [received.body.get("prompt_cache_key") for received in server.received]
    assert keys[0] is not None and keys[0] == keys[1]  # one conversation, one cache line
    assert keys[2] is not None and keys[2] != keys[0]  # the same words, another conversation
    assert all(len(str(key)) <= 64 for key in keys)
    assert first.conversation_id not in str(keys)  # a keyed hash: the id itself is not sent


def test_cache_settings_the_run_gives_are_left_as_they_are() -> None:
    from pydantic_ai.models.anthropic import AnthropicModelSettings

    with ProviderServer() as openai_server, ScriptedAnthropic([]) as anthropic_server:
        run(agent_with(openai_model(openai_server), ContextwrightHistory()), "Is KST7 fine?",
            model_settings={"openai_prompt_cache_key": "tenant-a"})
        run(agent_with(anthropic_model(anthropic_server), ContextwrightHistory()),
            "Is KST7 fine?", message_history=history_with_lookup(),
            model_settings=AnthropicModelSettings(anthropic_cache_instructions=False))
    assert openai_server.received[0].body["prompt_cache_key"] == "tenant-a"
    assert anthropic_server.received[0].status == 200
    assert marked_blocks(anthropic_server.received[0].body) == []


def test_cache_off_sends_no_hints() -> None:
    with ProviderServer() as openai_server, ScriptedAnthropic([]) as anthropic_server:
        run(agent_with(openai_model(openai_server), ContextwrightHistory(cache=False)),
            "Is KST7 confirmed?", message_history=history_with_lookup())
        run(agent_with(anthropic_model(anthropic_server), ContextwrightHistory(cache=False)),
            "Is KST7 confirmed?", message_history=history_with_lookup())
    assert openai_server.received[0].status == 200
    assert "prompt_cache_key" not in openai_server.received[0].body
    assert anthropic_server.received[0].status == 200
    assert marked_blocks(anthropic_server.received[0].body) == []
