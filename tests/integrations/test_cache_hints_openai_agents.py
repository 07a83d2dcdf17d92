"""The Agents SDK's ``prompt_cache_key`` for a ``ContextwrightSession``: one per (user, session).

The SDK sends OpenAI a ``prompt_cache_key`` of its own, derived from the session's
``session_id`` (an input filter has no say in the call's settings). The model here is the SDK's
``OpenAIResponsesModel`` talking to the local fake server; the SDK only sends the key to
OpenAI's own endpoint, so the model is told it is talking to it.
"""

from __future__ import annotations

import asyncio

from agents import Agent, RunConfig, Runner
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI
from scripted_openai import ScriptedOpenAI, Turn

from contextwright import MemoryStore
from contextwright.integrations.openai_agents import (
    ContextwrightInputFilter,
    ContextwrightSession,
)


class AsIfOnOpenAI(OpenAIResponsesModel):
    """The SDK's Responses model, sending what it sends to api.openai.com."""

    def _supports_default_prompt_cache_key(self) -> bool:
        return True


def test_two_users_sessions_of_the_same_id_get_different_cache_keys() -> None:
    store = MemoryStore()
    with ScriptedOpenAI(*[Turn(text="ok") for _ in range(3)]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
        agent = Agent(name="support", instructions="Answer briefly.",
                      model=AsIfOnOpenAI(model="gpt-4o", openai_client=client))
        config = RunConfig(call_model_input_filter=ContextwrightInputFilter(),
                           tracing_disabled=True)
        for user in ("alice", "bob", "alice"):
            session = ContextwrightSession(store, user_id=user, session_id="chat-1")
            asyncio.run(Runner.run(agent, "Is KST7 confirmed?", session=session,
                                   run_config=config))
    assert server.errors == []
    alice, bob, alice_again = (r.body.get("prompt_cache_key") for r in server.received)
    assert alice is not None and alice == alice_again  # one session, one cache line
    assert bob is not None and bob != alice
    assert "alice" not in str(alice) and "chat-1" not in str(alice)
