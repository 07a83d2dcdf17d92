"""Bodies a client may send by mistake: each is a 400 or 413 problem that echoes nothing of it.

JSON with a list or an object where a string belongs, numbers JSON has no word for, a
``tool_choice`` the request cannot honour, more messages than ``max_messages`` counted across
every list, and a media type in other letter case (which is still JSON).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_helpers import KEYS, Running

from contextwright import errors
from contextwright.server import Limits, ServerConfig
from contextwright.server.service import Service
from contextwright.server.tenants import Tenant

AUTH = {"Authorization": f"Bearer {KEYS['acme']}"}
URL = "https://example.com/a.png"
SECRET = "PAYLOAD-SECRET-4410"


def _tool(name: str, maximum: str = "10") -> bytes:
    return (b'{"type":"function","function":{"name":"' + name.encode() + b'","description":'
            b'"d","parameters":{"type":"object","properties":{"a":{"type":"number",'
            b'"maximum":' + maximum.encode() + b"}}}}}")


def _problem(answer: httpx.Response, status: int, slug: str) -> str:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    body = answer.json()
    assert body["type"] == f"urn:contextwright:problem:{slug}"
    assert SECRET not in answer.text and "Traceback" not in answer.text
    return str(body["detail"])


@pytest.fixture
def running(tmp_path: Path, serve_app: Callable[..., Running]) -> Running:
    return serve_app(f"sqlite:///{tmp_path / 's.db'}")


@pytest.fixture
def http(running: Running) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=running.url, headers=AUTH, timeout=60) as client:
        yield client


@pytest.mark.parametrize("detail", [[], {}, ["low"], {"low": 1}, 1, True])
def test_an_image_detail_that_is_not_a_string_is_400_naming_the_image(
        http: httpx.Client, detail: Any) -> None:
    image = {"type": "image_url", "image_url": {"url": URL, "detail": detail}}
    prepared = http.post("/v1/sessions/u/s/prepare", json={"text": SECRET, "images": [image]})
    built = http.post("/v1/build", json={"user_input": SECRET, "images": [image]})
    responses = http.post("/v1/build", json={"user_input": "x", "images": [
        {"type": "input_image", "image_url": URL, "detail": detail}]})
    for answer in (prepared, built, responses):
        message = _problem(answer, 400, "invalid-input")
        assert "images[0]" in message and "detail" in message
    assert http.get("/v1/sessions/u/s").status_code == 404  # refused before anything is stored


@pytest.mark.parametrize("body", [
    {"messages": [{"role": "user", "content": SECRET, "type": []}]},
    {"assistant": {"content": SECRET, "type": {}}},
    {"messages": [{"role": "user", "content": [{"type": {}, "text": SECRET}]}]},
    {"messages": [{"role": "user", "content": [{"type": ["text"], "text": SECRET}]}]},
])
def test_a_message_or_part_type_that_is_not_a_string_is_400_and_stores_nothing(
        http: httpx.Client, body: dict[str, Any]) -> None:
    message = _problem(http.post("/v1/sessions/u/s/record", json=body), 400, "invalid-input")
    assert ".type must be a string" in message
    assert http.get("/v1/sessions/u/s").status_code == 404


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
def test_numbers_json_cannot_carry_are_400_and_store_nothing(
        http: httpx.Client, number: str) -> None:
    body = b'{"text":"hello","tools":[' + _tool("f", number) + b"]}"
    headers = {"Content-Type": "application/json"}
    prepared = http.post("/v1/sessions/u/s/prepare", content=body, headers=headers)
    built = http.post("/v1/build", headers=headers,
                      content=b'{"user_input":"x","tools":[' + _tool("f", number) + b"]}")
    for answer in (prepared, built):
        assert "the body is not valid JSON" in _problem(answer, 400, "invalid-input")
    assert http.get("/v1/sessions/u/s").status_code == 404


def test_an_integer_too_long_to_read_is_400(http: httpx.Client) -> None:
    body = b'{"user_input":"x","budget":' + b"7" * 5000 + b"}"
    answer = http.post("/v1/build", content=body, headers={"Content-Type": "application/json"})
    assert "too many digits" in _problem(answer, 400, "invalid-input")


def test_a_prepare_whose_answer_json_cannot_carry_says_its_stored_seq(
        keys_file: Path) -> None:
    # Bodies read over HTTP cannot hold NaN any more; data given to the service another way
    # still reaches the answer after the message is stored, and the refusal must say so.
    service = Service(ServerConfig(store="memory://", keys=str(keys_file)))
    tool = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": {"a": {"type": "number", "maximum": float("nan")}}}}}
    try:
        with pytest.raises(errors.InvalidInputError, match="JSON cannot carry") as raised:
            service.prepare(Tenant(name="acme"), "u", "s", {"text": "hi", "tools": [tool]}, None)
        assert raised.value.stored_seq == 1
        again = service.prepare(Tenant(name="acme"), "u", "s", {"text": None}, None)
        assert b'"user_seq":1' in again
    finally:
        service.close()


@pytest.mark.parametrize("choice", [
    {"type": "function", "function": {"name": SECRET}},
    {"type": "function", "function": {"name": SECRET}, "x": SECRET},
    {"name": SECRET},
    SECRET,
])
def test_a_refused_tool_choice_is_not_echoed(http: httpx.Client, choice: Any) -> None:
    without_tools = http.post("/v1/sessions/u/s/prepare",
                              json={"text": "hi", "tool_choice": choice})
    assert "needs tools" in _problem(without_tools, 400, "invalid-input")
    assert without_tools.json()["stored_seq"] == 1
    tool = {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}
    other = http.post("/v1/build", json={"user_input": "x", "tools": [tool],
                                         "tool_choice": choice})
    assert "not among the request's tools" in _problem(other, 400, "invalid-input")


@pytest.mark.parametrize("choice", [{"type": "function", "x": SECRET}, {"function": SECRET}])
def test_a_tool_choice_naming_no_tool_is_refused_without_its_value(
        http: httpx.Client, choice: Any) -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    answer = http.post("/v1/build", json={"user_input": "x", "tools": [tool],
                                          "tool_choice": choice})
    assert "must be auto, none, required or name a tool" in _problem(answer, 400,
                                                                      "invalid-input")


@pytest.mark.parametrize("choice", [
    "f", {"name": "f"}, {"type": "function", "function": {"name": "f"}, "extra": 1}])
def test_a_named_tool_is_rendered_in_each_formats_own_form(
        http: httpx.Client, choice: Any) -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    expected = {"openai": {"type": "function", "function": {"name": "f"}},
                "openai-responses": {"type": "function", "name": "f"},
                "anthropic": {"type": "tool", "name": "f"}}
    for fmt, rendered in expected.items():
        answer = http.post("/v1/build", json={"user_input": "x", "tools": [tool],
                                              "tool_choice": choice, "format": fmt})
        assert answer.status_code == 200, answer.text
        assert answer.json()["request"]["tool_choice"] == rendered


@pytest.mark.parametrize("media", [
    "Application/JSON", "APPLICATION/JSON; charset=utf-8", "application/problem+JSON",
    "application/vnd.acme+Json"])
def test_a_json_media_type_in_any_letter_case_is_json(http: httpx.Client, media: str) -> None:
    answer = http.post("/v1/build", content=b'{"user_input":"x"}',
                       headers={"Content-Type": media})
    assert answer.status_code == 200, answer.text
    refused = http.post("/v1/build", content=b'{"user_input":"x"}',
                        headers={"Content-Type": "Text/Plain"})
    _problem(refused, 415, "unsupported-media-type")


def _messages(count: int) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
            for i in range(count)]


def test_the_message_limit_counts_every_assistant_message_of_a_record(
        tmp_path: Path, serve_app: Callable[..., Running]) -> None:
    running = serve_app(f"sqlite:///{tmp_path / 's.db'}", limits=Limits(max_messages=5))
    answers = [{"role": "assistant", "content": f"a{i}"} for i in range(6)]
    with httpx.Client(base_url=running.url, headers=AUTH) as http:
        listed = http.post("/v1/sessions/u/s/record", json={"assistant": answers})
        mixed = http.post("/v1/sessions/u/s/record", json={
            "assistant": answers[:3], "messages": [{"role": "user", "content": "q"}] * 3})
        assert _problem(listed, 413, "payload-too-large")
        assert mixed.status_code == 413
        assert http.get("/v1/sessions/u/s").status_code == 404  # nothing stored
        fits = http.post("/v1/sessions/u/s/record", json={"assistant": answers[:5]})
        assert fits.status_code == 200 and fits.json()["seqs"] == [1, 2, 3, 4, 5]
        one = http.post("/v1/sessions/u/t/record", json={
            "assistant": "a", "messages": [{"role": "user", "content": "q"}] * 4})
        assert one.status_code == 200


@pytest.mark.parametrize("fields", [
    {"history": _messages(3), "turn": _messages(3)},
    {"images": [{"type": "image_url", "image_url": {"url": URL}}] * 6},
    {"examples": [{"input": "i", "output": "o"}] * 6},
    {"notes": ["n"] * 6},
], ids=["history+turn", "images", "examples", "notes"])
def test_a_build_over_the_message_limit_is_413_whatever_list_holds_them(
        tmp_path: Path, serve_app: Callable[..., Running], fields: dict[str, Any]) -> None:
    running = serve_app(f"sqlite:///{tmp_path / 's.db'}", limits=Limits(max_messages=5))
    with httpx.Client(base_url=running.url, headers=AUTH) as http:
        over = http.post("/v1/build", json={"user_input": "x", **fields})
        fits = http.post("/v1/build", json={"user_input": "x", "history": _messages(2),
                                            "turn": [], "notes": ["n"] * 5})
    _problem(over, 413, "payload-too-large")
    assert over.json()["max_messages"] == 5
    assert fits.status_code == 200, fits.text


def test_a_405_names_the_allowed_methods(http: httpx.Client) -> None:
    answer = http.put("/v1/sessions/u/s")
    _problem(answer, 405, "method-not-allowed")
    assert set(answer.headers["allow"].replace(" ", "").split(",")) == {"GET", "DELETE"}
    build = http.get("/v1/build")
    assert build.status_code == 405 and build.headers["allow"] == "POST"
