"""The example agent after a failure mid-turn: ``run_turn(text=None)`` continues the stored turn
without storing the user's message again, and a tool whose result is recorded does not run
again. Replies come from a local chat-completions server through the official ``openai`` SDK
(no SDK retries, so one scripted failure is one failed model call)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextwright import agent as agent_module
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


def test_only_the_calls_without_a_recorded_result_run_when_the_turn_is_continued(
        open_agent: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two parallel refunds; the second fails the first time it runs. The first one's result
    # is recorded as soon as it ran, so continuing the turn runs only the second.
    runs: Counter[str] = Counter()
    real_run_tool = agent_module.run_tool

    def counting_tool(name: str, arguments: str, user_id: str, memos: Any) -> str:
        text = json.loads(arguments)["text"]
        runs[text] += 1
        if text == "refund B" and runs[text] == 1:
            raise ConnectionError("the payment service went away")
        return real_run_tool(name, arguments, user_id, memos)

    monkeypatch.setattr(agent_module, "run_tool", counting_tool)
    script = [calls(("c1", "save_memo", {"text": "refund A"}),
                    ("c2", "save_memo", {"text": "refund B"})), answer("Both refunded.")]
    seen: list[str] = []
    with FakeOpenAIServer(script) as server:
        agent = open_agent(server)
        with pytest.raises(ConnectionError):
            agent.run_turn("u", "s", "refund A and B", on_tool=lambda n, a, out: seen.append(a))
        assert roles(agent) == ["user", "assistant", "tool"]
        assert runs == {"refund A": 1, "refund B": 1}

        assert agent.run_turn("u", "s", None,
                              on_tool=lambda n, a, out: seen.append(a)) == "Both refunded."
        assert runs == {"refund A": 1, "refund B": 2}
        assert agent.memos.list("u") == ["refund A", "refund B"]
        assert len(server.requests) == 2  # no model call was spent on the failed tool
        last = server.requests[-1].body["messages"]
    assert sorted(m["tool_call_id"] for m in last if m["role"] == "tool") == ["c1", "c2"]
    assert roles(agent) == ["user", "assistant", "tool", "tool", "assistant"]
    assert [json.loads(a)["text"] for a in seen] == ["refund A", "refund B"]


def test_a_reply_with_more_calls_than_one_read_holds_runs_only_its_missing_ones(
        open_agent: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    runs: Counter[str] = Counter()
    real_run_tool = agent_module.run_tool

    def counting_tool(name: str, arguments: str, user_id: str, memos: Any) -> str:
        text = json.loads(arguments)["text"]
        runs[text] += 1
        if text == "m17" and runs[text] == 1:
            raise ConnectionError("the memo service went away")
        return real_run_tool(name, arguments, user_id, memos)

    monkeypatch.setattr(agent_module, "run_tool", counting_tool)
    many = calls(*((f"c{i}", "save_memo", {"text": f"m{i}"}) for i in range(20)))
    with FakeOpenAIServer([many, answer("Saved all.")]) as server:
        agent = open_agent(server)
        with pytest.raises(ConnectionError):
            agent.run_turn("u", "s", "save twenty memos")
        assert agent.run_turn("u", "s", None) == "Saved all."
        assert runs == {**{f"m{i}": 1 for i in range(20)}, "m17": 2}
        assert agent.memos.list("u") == [f"m{i}" for i in range(20)]


def test_a_call_that_cannot_run_is_recorded_with_the_reply_and_never_run_on_resume(
        open_agent: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its "not run" result goes with the reply, before any tool runs: a resume must not run it
    # with the "{}" it was given in place of its arguments.
    ran: list[str] = []
    real_run_tool = agent_module.run_tool

    def failing_once(name: str, arguments: str, user_id: str, memos: Any) -> str:
        ran.append(name)
        if len(ran) == 1:
            raise ConnectionError("the memo service went away")
        return real_run_tool(name, arguments, user_id, memos)

    monkeypatch.setattr(agent_module, "run_tool", failing_once)
    bad = completion({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {
            "name": "list_memos", "arguments": '{"a": 1, "a": 2}'}},
        {"id": "c2", "type": "function", "function": {
            "name": "save_memo", "arguments": '{"text": "milk"}'}}]})
    with FakeOpenAIServer([bad, answer("Saved.")]) as server:
        agent = open_agent(server)
        with pytest.raises(ConnectionError):
            agent.run_turn("u", "s", "remember milk")
        assert roles(agent) == ["user", "assistant", "tool"]
        outputs: list[str] = []
        assert agent.run_turn("u", "s", None, on_tool=lambda n, a, out: outputs.append(n)) == (
            "Saved.")
        assert outputs == ["save_memo"] and ran == ["save_memo", "save_memo"]
        assert agent.memos.list("u") == ["milk"]
        results = [m for m in stored(agent) if m["role"] == "tool"]
    assert "not run" in json.loads(results[0]["content"])["error"]


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
