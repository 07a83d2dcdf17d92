"""The example agent's loop against servers that reuse call ids or refuse: every call gets an id
of its own before any tool runs, no tool runs for a reply the session would not store, and a
refusal's words are the answer. Replies come from a local chat-completions server through the
official ``openai`` SDK."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextwright.agent import make_agent
from contextwright.errors import InvalidInputError
from contextwright.session.store import SessionKey
from fakes.openai_server import FakeOpenAIServer, Reply


def completion(message: dict[str, Any]) -> Reply:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}
    return Reply(raw_body=json.dumps(body).encode())


def calls(*made: tuple[str, str, dict[str, Any]], **extra: Any) -> Reply:
    return completion({"role": "assistant", "content": None, **extra, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments)}}
        for call_id, name, arguments in made]})


def answer(text: str) -> Reply:
    return completion({"role": "assistant", "content": text})


@pytest.mark.parametrize("shared", ["call_0", ""])
def test_parallel_calls_sharing_an_id_each_get_their_own_and_run_once(
        tmp_path: Path, shared: str) -> None:
    # Some OpenAI-compatible servers give every parallel call one id ("" or "call_0"): each
    # call is run once, recorded with an id of its own, and its result answers that id.
    reply = calls((shared, "save_memo", {"text": "milk"}), (shared, "save_memo", {"text": "eggs"}))
    with FakeOpenAIServer([reply, answer("Saved both.")]) as server:
        agent = make_agent(server.base_url, "m", tmp_path / "a.db")
        assert agent.run_turn("u", "s", "remember milk and eggs") == "Saved both."
        assert agent.memos.list("u") == ["milk", "eggs"]
        stored = [m.message for m in agent.manager.store.read(SessionKey(user_id="u",
                                                                          session_id="s"))]
        agent.close()
        second = server.requests[1].body["messages"]
    call_ids = [c["id"] for m in stored if m.get("tool_calls") for c in m["tool_calls"]]
    result_ids = [m["tool_call_id"] for m in stored if m["role"] == "tool"]
    assert len(set(call_ids)) == 2 and all(call_ids) and result_ids == call_ids
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]
    sent = [m for m in second if m["role"] == "tool"]
    assert len(sent) == 2 and len({m["tool_call_id"] for m in sent}) == 2


def test_a_reply_the_session_cannot_store_runs_no_tool(tmp_path: Path) -> None:
    # Each call alone is fine, but the reply's text is not valid Unicode (half an emoji): the
    # session would refuse it, so no tool may run for it, nor again on a retry.
    bad = calls(("c1", "save_memo", {"text": "milk"}), content="On it \ud83d")
    with FakeOpenAIServer([bad, bad]) as server:
        agent = make_agent(server.base_url, "m", tmp_path / "a.db")
        for _ in range(2):
            with pytest.raises(InvalidInputError, match="not valid Unicode"):
                agent.run_turn("u", "s", "remember milk")
        assert agent.memos.list("u") == []
        agent.close()


def test_new_ids_never_take_an_id_the_reply_already_has() -> None:
    from contextwright.agent import unique_call_ids

    made = [{"id": i, "type": "function", "function": {"name": "list_memos", "arguments": "{}"}}
            for i in ("call_2_1", "", "call_2_1", "x")]
    unique_call_ids(made, 2)
    ids = [c["id"] for c in made]
    assert ids[0] == "call_2_1" and ids[3] == "x"
    assert len(set(ids)) == 4 and all(ids)


def test_a_refusal_is_the_turns_answer(tmp_path: Path) -> None:
    refusal = completion({"role": "assistant", "content": None,
                          "refusal": "I can't help with that."})
    with FakeOpenAIServer([refusal]) as server:
        agent = make_agent(server.base_url, "m", tmp_path / "a.db")
        assert agent.run_turn("u", "s", "do something bad") == "I can't help with that."
        stored = agent.manager.store.read(SessionKey(user_id="u", session_id="s"))
        assert stored[-1].message["content"] == "I can't help with that."
        agent.close()
