"""The example agent after a failure mid-turn: ``run_turn(text=None)`` continues the stored turn
without storing the user's message again, and a tool whose result is recorded does not run
again. Replies come from a local chat-completions server through the official ``openai`` SDK
(no SDK retries, so one scripted failure is one failed model call)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextwright.agent import Agent
from contextwright.errors import InvalidInputError, LLMError
from contextwright.session.store import SessionKey
from fakes.openai_server import FakeOpenAIServer, Reply, error


def completion(message: dict[str, Any]) -> Reply:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}
    return Reply(raw_body=json.dumps(body).encode())


def calls(*made: tuple[str, str, dict[str, Any]]) -> Reply:
    return completion({"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments)}}
        for call_id, name, arguments in made]})


def answer(text: str) -> Reply:
    return completion({"role": "assistant", "content": text})


@pytest.fixture
def open_agent(tmp_path: Path) -> Iterator[Any]:
    """Makes agents on a server's URL whose client does not retry; closes them after."""
    from openai import OpenAI

    made: list[Agent] = []

    def make(server: FakeOpenAIServer) -> Agent:
        client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
        made.append(Agent(client=client, model="m", path=tmp_path / "a.db", owns_client=True))
        return made[-1]

    yield make
    for agent in made:
        agent.close()


def stored(agent: Agent) -> list[dict[str, Any]]:
    return [m.message for m in agent.manager.store.read(SessionKey(user_id="u", session_id="s"))]


def roles(agent: Agent) -> list[str]:
    return [m["role"] for m in stored(agent)]


def test_a_turn_whose_model_call_failed_is_continued_without_storing_the_question_again(
        open_agent: Any) -> None:
    script = [calls(("c1", "save_memo", {"text": "milk"})), error(503), answer("Saved.")]
    with FakeOpenAIServer(script) as server:
        agent = open_agent(server)
        with pytest.raises(LLMError) as caught:
            agent.run_turn("u", "s", "remember milk")
        assert caught.value.kind == "status"
        assert roles(agent) == ["user", "assistant", "tool"]

        assert agent.run_turn("u", "s", None) == "Saved."
        assert roles(agent) == ["user", "assistant", "tool", "assistant"]
        assert agent.memos.list("u") == ["milk"]  # the recorded call did not run again
        resumed = server.requests[-1].body["messages"]
    assert [m["content"] for m in stored(agent) if m["role"] == "user"] == ["remember milk"]
    assert [m["tool_call_id"] for m in resumed if m["role"] == "tool"] == ["c1"]


def test_a_turn_whose_first_model_call_failed_is_continued(open_agent: Any) -> None:
    with FakeOpenAIServer([error(503), answer("Hello.")]) as server:
        agent = open_agent(server)
        with pytest.raises(LLMError):
            agent.run_turn("u", "s", "hi")
        assert agent.run_turn("u", "s", None) == "Hello."
        assert roles(agent) == ["user", "assistant"]


@pytest.mark.parametrize("script", [[], [answer("Hello.")]], ids=["empty", "answered"])
def test_continuing_a_session_with_no_pending_turn_is_refused(
        open_agent: Any, script: list[Reply]) -> None:
    with FakeOpenAIServer(script) as server:
        agent = open_agent(server)
        if script:
            assert agent.run_turn("u", "s", "hi") == "Hello."
        with pytest.raises(InvalidInputError, match="no turn to continue"):
            agent.run_turn("u", "s", None)
        assert len(server.requests) == len(script)
