"""Sessions over HTTP behave as ``ContextManager`` in process: same contexts, same guarantees."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx
import pytest
from server_helpers import KEYS, Running

from contextwright import ContextManager, MemoryStore
from contextwright.client import AsyncClient, Client
from contextwright.errors import SessionGone
from contextwright.session import SessionKey, open_store

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
CALL = {"role": "assistant", "content": None, "tool_calls": [{
    "id": "call_1", "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 18, "sky": "clear"}'}


def _agent_turns(manager: ContextManager | Client) -> list[dict[str, object]]:
    """One tool-using turn and a follow-up; the provider requests each prepare returned."""
    requests = []
    first = manager.prepare("nora_vance_5172", "trip", "What is the weather in Paris?",
                            tools=[WEATHER_TOOL])
    requests.append(first.to_request("openai"))
    manager.record("nora_vance_5172", "trip", assistant=CALL)
    manager.record("nora_vance_5172", "trip", tool_results=[RESULT])
    after_tool = manager.prepare("nora_vance_5172", "trip", None, tools=[WEATHER_TOOL])
    requests.append(after_tool.to_request("openai"))
    manager.record("nora_vance_5172", "trip", assistant="18 °C and clear in Paris.")
    follow = manager.prepare("nora_vance_5172", "trip", "And should I take an umbrella?",
                             tools=[WEATHER_TOOL])
    requests.append(follow.to_request("openai"))
    return requests


def test_the_service_builds_what_the_manager_builds_in_process(
        store_url: str, serve_app: Callable[..., Running]) -> None:
    running = serve_app(store_url)
    with Client(running.url, api_key=KEYS["acme"]) as client:
        remote = _agent_turns(client)
    local_manager = ContextManager(MemoryStore(), background=False)
    local = _agent_turns(local_manager)
    # prompt_cache_key hashes the stored ids, which the service scopes by tenant.
    remote_keys = {r.pop("prompt_cache_key") for r in remote}
    local_keys = {r.pop("prompt_cache_key") for r in local}
    assert len(remote_keys) == len(local_keys) == 1 and remote_keys != local_keys
    assert remote == local
    assert remote[1]["messages"][-1]["role"] == "tool"  # the turn continued after the result


def test_session_state_messages_and_erase(store_url: str,
                                          serve_app: Callable[..., Running]) -> None:
    running = serve_app(store_url)
    with Client(running.url, api_key=KEYS["acme"]) as client:
        prepared = client.prepare("u", "s", "Hello there")
        assert prepared.user_seq == 1 and prepared.mode is not None
        assert prepared.route is not None and prepared.switch is not None
        assert client.record("u", "s", assistant="Hi!") == [2]
        view = client.session("u", "s", last=1)
        assert view is not None and view.message_count == 2
        assert [entry.message["content"] for entry in view.messages] == ["Hi!"]
        assert client.state("u", "s").mode == prepared.mode
        client.prepare("u", "other", "Second session")
        assert client.erase_session("u", "s") is True
        assert client.erase_session("u", "s") is False
        assert client.session("u", "s") is None
        assert client.state("u", "s").mode is None
        assert client.erase_user("u") == 1
        assert client.session("u", "other") is None


def test_a_retried_write_is_stored_once(store_url: str,
                                        serve_app: Callable[..., Running]) -> None:
    running = serve_app(store_url)
    headers = {"Authorization": f"Bearer {KEYS['acme']}"}
    with httpx.Client(base_url=running.url, headers=headers) as http:
        for _ in range(3):
            answer = http.post("/v1/sessions/u/s/prepare", json={"text": "hi"},
                               headers={"Idempotency-Key": "msg-1"})
            assert answer.status_code == 200 and answer.json()["user_seq"] == 1
        seqs = [http.post("/v1/sessions/u/s/record",
                          json={"assistant": "hello", "idempotency_key": "answer-1"}
                          ).json()["seqs"] for _ in range(3)]
        assert seqs == [[2], [2], [2]]
        conflicting = http.post("/v1/sessions/u/s/record",
                                json={"assistant": "x", "idempotency_key": "a"},
                                headers={"Idempotency-Key": "b"})
        assert conflicting.status_code == 400
        assert http.get("/v1/sessions/u/s").json()["message_count"] == 2


def test_the_async_client_matches_the_sync_one(redis_url: str,
                                               serve_app: Callable[..., Running]) -> None:
    running = serve_app(redis_url)

    async def conversation() -> tuple[list[int], int]:
        async with AsyncClient(running.url, api_key=KEYS["acme"]) as client:
            contexts = await asyncio.gather(*(
                client.aprepare("u", f"s{i}", f"question {i}") for i in range(8)))
            seqs = await asyncio.gather(*(
                client.arecord("u", f"s{i}", assistant=f"answer {i}") for i in range(8)))
            view = await client.session("u", "s3")
            assert view is not None
            return [c.user_seq or 0 for c in contexts] + [s[0] for s in seqs], view.message_count

    seqs, count = asyncio.run(conversation())
    assert seqs == [1] * 8 + [2] * 8 and count == 2


def test_renderings_are_the_ones_asked_for(serve_app: Callable[..., Running],
                                           tmp_path: object) -> None:
    running = serve_app("sqlite:///" + str(tmp_path) + "/s.db")
    with Client(running.url, api_key=KEYS["acme"]) as client:
        anthropic = client.prepare("u", "s", "Hello", format="anthropic",
                                   model="claude-sonnet-4-5", max_tokens=300)
        body = anthropic.to_request("anthropic")
        assert body["model"] == "claude-sonnet-4-5" and body["max_tokens"] == 300
        with pytest.raises(ValueError, match="format='openai'"):
            anthropic.to_request("openai")
        text = client.prepare("u", "s", None, format="text")
        assert "Hello" in text.to_text()
        built = client.build({"user_input": "Summarise the note", "notes": ["the note"]},
                             plan="simple_qa", format="openai-responses")
        assert built.report.plan == "simple_qa+notes"  # a source for the notes was added
        assert "the note" in str(built.to_messages())
        assert built.to_messages()[-1]["role"] == "user"


def test_stored_ids_are_scoped_by_tenant(tmp_path: object,
                                         serve_app: Callable[..., Running]) -> None:
    url = "sqlite:///" + str(tmp_path) + "/s.db"
    running = serve_app(url)
    with Client(running.url, api_key=KEYS["acme"]) as client:
        client.prepare("u", "s", "hi")
    store = open_store(url)
    try:
        assert [info.key for info in store.list_sessions()] == [
            SessionKey(user_id="acme/u", session_id="s")]
    finally:
        store.close()


def test_the_report_json_is_the_reports_to_dict() -> None:
    from contextwright.server.service import report_json

    manager = ContextManager(MemoryStore(), background=False)
    manager.prepare("u", "s", "What is the weather in Paris?", tools=[WEATHER_TOOL])
    manager.record("u", "s", assistant=CALL)
    manager.record("u", "s", tool_results=[RESULT])
    report = manager.prepare("u", "s", None, tools=[WEATHER_TOOL]).report
    assert report.decisions
    assert report_json(report) == json.loads(json.dumps(report.to_dict()))


def test_record_takes_the_openai_sdks_message_objects(tmp_path: object,
                                                      serve_app: Callable[..., Running]) -> None:
    from openai.types.chat import ChatCompletionMessage

    running = serve_app("sqlite:///" + str(tmp_path) + "/s.db")
    answer = ChatCompletionMessage.model_validate({**CALL, "content": None})
    with Client(running.url, api_key=KEYS["acme"]) as client:
        client.prepare("u", "s", "What is the weather in Paris?", tools=[WEATHER_TOOL])
        assert client.record("u", "s", assistant=answer) == [2]
        assert client.record("u", "s", tool_results=[RESULT]) == [3]
        view = client.session("u", "s")
        assert view is not None
        assert view.messages[1].message["tool_calls"][0]["id"] == "call_1"


def test_the_clients_have_the_managers_method_names_and_arguments() -> None:
    import inspect

    for name in ("prepare", "record", "state", "erase_session", "erase_user"):
        manager = inspect.signature(getattr(ContextManager, name)).parameters
        for client in (Client, AsyncClient):
            method = getattr(client, name)
            assert set(manager) <= set(inspect.signature(method).parameters), (client, name)
            assert inspect.iscoroutinefunction(method) == (client is AsyncClient)
    for name in ("aprepare", "arecord"):
        assert inspect.iscoroutinefunction(getattr(AsyncClient, name))


def test_ids_with_any_characters_but_a_slash_round_trip(tmp_path: object,
                                                        serve_app: Callable[..., Running]
                                                        ) -> None:
    running = serve_app("sqlite:///" + str(tmp_path) + "/s.db")
    user, session = "nora vance?#%20用户", "trip 1 & 2 ; é"
    with Client(running.url, api_key=KEYS["acme"]) as client:
        client.prepare(user, session, "hi")
        view = client.session(user, session)
        assert view is not None and view.message_count == 1
        assert client.session(user + "x", session) is None


def test_images_go_through_the_service_as_in_process(serve_app: Callable[..., Running],
                                                     tmp_path: object) -> None:
    from contextwright import Request
    from contextwright.core.images import ImagePart

    image = ImagePart(url="https://example.invalid/map.png", width=800, height=600)
    running = serve_app(f"sqlite:///{tmp_path}/images.db")
    with Client(running.url, api_key=KEYS["acme"]) as client:
        remote = client.prepare("nora", "trip", "Where is this?", images=[image])
        built = client.build(Request(user_input="And this?", images=[image]), plan="simple_qa")
    local = ContextManager(MemoryStore(), background=False).prepare(
        "nora", "trip", "Where is this?", images=[image])
    for body in (remote.to_request("openai"), local.to_request("openai")):
        parts = body["messages"][-1]["content"]
        assert parts[1] == {"type": "image_url", "image_url": {"url": image.url}}
    assert remote.report.total_tokens == local.report.total_tokens
    assert built.to_request("openai")["messages"][-1]["content"][1]["type"] == "image_url"


@pytest.mark.parametrize("bad", ["%FF", "%FE", "%C0", "%C0%AE", "%ED%A0%80"])
def test_ids_that_are_not_utf8_are_400_and_reach_no_session(
        bad: str, tmp_path: object, serve_app: Callable[..., Running]) -> None:
    running = serve_app(f"sqlite:///{tmp_path}/s.db")
    with httpx.Client(base_url=running.url,
                      headers={"Authorization": f"Bearer {KEYS['acme']}"}) as http:
        answers = [http.post(f"/v1/sessions/nora/{bad}/prepare", json={"text": "my PIN"}),
                   http.post(f"/v1/sessions/{bad}/s/record", json={"assistant": "ok"}),
                   http.get(f"/v1/sessions/nora/{bad}"),
                   http.delete(f"/v1/sessions/nora/{bad}"),
                   http.delete(f"/v1/users/{bad}")]
        for answer in answers:
            assert answer.status_code == 400, answer.text
            assert answer.json()["type"] == "urn:contextwright:problem:invalid-input"
            assert "UTF-8" in answer.json()["detail"]
        # Nothing was stored under the replacement character the bytes would decode to...
        assert http.get("/v1/sessions/nora/%EF%BF%BD").status_code == 404
        # ...which, sent as UTF-8, is an id like any other.
        assert http.post("/v1/sessions/nora/%EF%BF%BD/prepare",
                         json={"text": "hi"}).status_code == 200


@pytest.mark.parametrize("dots", [".", "..", "...", ".%"])
def test_dot_ids_reach_their_own_session_through_the_clients(
        dots: str, tmp_path: object, serve_app: Callable[..., Running]) -> None:
    running = serve_app(f"sqlite:///{tmp_path}/s.db")
    with Client(running.url, api_key=KEYS["acme"], retries=0) as client:
        assert client.prepare(dots, dots, "hi").user_seq == 1
        client.record(dots, dots, assistant="hello")
        client.prepare("other", "s", "elsewhere")
        view = client.session(dots, dots)
        assert view is not None and view.message_count == 2
        assert client.session(dots, "s") is None and client.session("other", dots) is None
        assert client.erase_session(dots, dots) and client.session(dots, dots) is None
        client.prepare(dots, "kept", "hi")
        assert client.erase_user(dots) == 1
    stored = open_store(f"sqlite:///{tmp_path}/s.db")
    try:
        assert {info.key.user_id for info in stored.list_sessions()} == {"acme/other"}
    finally:
        stored.close()

    async def through_the_async_client() -> None:
        async with AsyncClient(running.url, api_key=KEYS["acme"], retries=0) as client:
            assert (await client.prepare(dots, "async", "hi")).user_seq == 1
            view = await client.session(dots, "async")
            assert view is not None and view.message_count == 1

    asyncio.run(through_the_async_client())


def test_a_tool_loops_reasoning_goes_through_the_service_and_back(
        tmp_path: object, serve_app: Callable[..., Running]) -> None:
    # Anthropic refuses the loop's next call without the thinking block it opened with: the
    # service stores it with the answer and sends it back in the continued request.
    from anthropic.types import Message

    thinking = {"type": "thinking", "thinking": "Paris first.", "signature": "c2lnbmF0dXJl"}
    reply = Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-5-5",
        "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [thinking, {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                               "input": {"city": "Paris"}}]})
    running = serve_app("sqlite:///" + str(tmp_path) + "/s.db")
    with Client(running.url, api_key=KEYS["acme"]) as client:
        client.prepare("u", "s", "What is the weather in Paris?", tools=[WEATHER_TOOL])
        client.record("u", "s", assistant=reply, tool_results=[
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": "18 °C, clear"}]}])
        body = client.prepare("u", "s", None, tools=[WEATHER_TOOL], format="anthropic",
                              model="claude-sonnet-5-5").to_request("anthropic")
    calling = [m for m in body["messages"] if m["role"] == "assistant"]
    assert calling[0]["content"][0] == thinking


def test_an_answer_to_an_erased_session_is_refused_through_the_service(
        store_url: str, serve_app: Callable[..., Running]) -> None:
    # The user erased the conversation and began again while the model answered the old one:
    # the answer names its prepare (its epoch), and the service refuses to file it into the
    # new conversation, whichever worker took the record.
    running = serve_app(store_url)
    with Client(running.url, api_key=KEYS["acme"]) as client:
        old = client.prepare("u", "s", "My card number is on file, please cancel order 7")
        assert old.epoch
        client.erase_session("u", "s")
        client.prepare("u", "s", "Hello again")
        with pytest.raises(SessionGone):
            client.record("u", "s", assistant="Order 7 is cancelled.", context=old)
        view = client.session("u", "s")
        assert view is not None
        assert [e.message["content"] for e in view.messages] == ["Hello again"]
        current = client.prepare("u", "s", None)
        assert client.record("u", "s", assistant="Hi!", context=current) == [2]
