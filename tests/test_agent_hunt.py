"""The example agent's loop against endpoints that misbehave: a 200 whose body is not a
completion, a base URL it cannot use, calls with arguments of the wrong type. Replies come from
a local chat-completions server through the official ``openai`` SDK."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextwright.agent import make_agent, run_tool
from contextwright.errors import LLMError
from contextwright.session.store import SessionKey
from fakes.openai_server import FakeOpenAIServer, Reply


def completion(message: dict[str, Any]) -> Reply:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}
    return Reply(raw_body=json.dumps(body).encode())


def answer(text: str) -> Reply:
    return completion({"role": "assistant", "content": text})


def stored_roles(agent: Any) -> list[str]:
    return [m.message["role"] for m in agent.manager.store.read(
        SessionKey(user_id="u", session_id="s"))]


@pytest.mark.parametrize("body", [
    b'{"choices": "nope"}',
    b'{"choices": [{"index": 0}]}',
    b'{"choices": [{"index": 0, "message": null}]}',
    b'{"choices": [{"index": 0, "message": "hello"}]}',
    b"[1, 2]",
    b"<html>502 Bad Gateway</html>",
], ids=["choices-text", "no-message", "null-message", "text-message", "list", "html"])
def test_a_reply_that_is_not_a_completion_is_an_llm_error(tmp_path: Path, body: bytes) -> None:
    # An endpoint (or a proxy before it) answering 200 with the wrong shape is a bad reply, not
    # an unreachable server and not a crash of the loop; the question stays recorded.
    with FakeOpenAIServer([Reply(raw_body=body), answer("Hello.")]) as server:
        agent = make_agent(server.base_url, "m", tmp_path / "a.db")
        with pytest.raises(LLMError) as caught:
            agent.run_turn("u", "s", "hi")
        assert caught.value.kind == "response"
        assert stored_roles(agent) == ["user"]
        agent.close()


@pytest.mark.parametrize("base_url", ["127.0.0.1:11434/v1", "ftp://127.0.0.1/v1",
                                      "http://127.0.0.1:99999/v1", "http://127.0.0.1:11434/v1\n"],
                         ids=["no-scheme", "ftp", "port", "line-break"])
def test_a_base_url_the_agent_cannot_use_is_refused_when_it_is_made(
        tmp_path: Path, base_url: str) -> None:
    # A typo in --base-url is the caller's mistake, said at once: not a question stored and then
    # an "unreachable endpoint" after the SDK's retries.
    with pytest.raises(LLMError) as caught:
        make_agent(base_url, "m", tmp_path / "a.db")
    assert caught.value.kind == "config"
    assert not (tmp_path / "a.db").exists()


@pytest.mark.parametrize("text", [None, ["milk", "eggs"], {"item": "milk"}, True])
def test_a_memo_that_is_not_text_is_refused_not_saved_as_its_python_repr(
        tmp_path: Path, text: Any) -> None:
    # {"text": null} once saved the memo "None", and a list its Python repr.
    with FakeOpenAIServer() as server:
        agent = make_agent(server.base_url, "m", tmp_path / "a.db")
        result = json.loads(run_tool("save_memo", json.dumps({"text": text}), "u", agent.memos))
        assert "text" in result["error"]
        assert agent.memos.list("u") == []
        agent.close()


@pytest.mark.parametrize("city", [None, ["Paris"], 7])
def test_a_city_that_is_not_text_is_named_as_such(tmp_path: Path, city: Any) -> None:
    with FakeOpenAIServer() as server:
        agent = make_agent(server.base_url, "m", tmp_path / "a.db")
        result = json.loads(run_tool("get_weather", json.dumps({"city": city}), "u", agent.memos))
        assert result == {"error": "city must be a string"}
        agent.close()


def test_closing_an_agent_closes_the_client_make_agent_made(tmp_path: Path) -> None:
    # The HTTP connection pool make_agent opened is the agent's to close, with its store.
    with FakeOpenAIServer([answer("Hello.")]) as server:
        agent = make_agent(server.base_url, "m", tmp_path / "a.db")
        assert agent.run_turn("u", "s", "hi") == "Hello."
        agent.close()
        assert agent.client.is_closed()


def test_closing_an_agent_leaves_a_client_it_was_given_open(tmp_path: Path) -> None:
    from openai import OpenAI

    from contextwright.agent import Agent

    with FakeOpenAIServer([answer("Hello.")]) as server:
        client = OpenAI(base_url=server.base_url, api_key="none")
        agent = Agent(client=client, model="m", path=tmp_path / "a.db")
        agent.close()
        assert not client.is_closed()
        client.close()
