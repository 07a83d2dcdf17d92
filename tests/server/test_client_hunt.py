"""What the clients send: arguments the library takes in process go through the service too.

A document's score of any real type (numpy's, ``Fraction``) is a JSON number on the wire; what
JSON cannot carry (NaN, a ``Decimal``) and ids or text that are not valid Unicode are refused
with ``InvalidInputError``, as ``ContextManager`` refuses them, never a ``TypeError`` or
``UnicodeEncodeError`` from the encoder. ``record`` reads an SDK message object that makes
no chat message, or several, as the manager does. Retry settings no retry could run with are
refused when the client is made.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from server_helpers import KEYS, Running

from contextwright.client import AsyncClient, Client
from contextwright.core.request import Document, Request
from contextwright.errors import InvalidInputError
from contextwright.manager import ContextManager
from contextwright.server import Limits
from contextwright.session.memory import MemoryStore

SCORES: list[Any] = [np.float32(0.75), np.float64(0.5), np.int64(3), Fraction(1, 2)]


@pytest.fixture
def running(tmp_path: Path, serve_app: Callable[..., Running]) -> Running:
    return serve_app(f"sqlite:///{tmp_path / 's.db'}")


@pytest.mark.parametrize("score", SCORES, ids=lambda score: type(score).__name__)
def test_a_score_of_any_real_type_goes_through_the_clients(running: Running,
                                                           score: Any) -> None:
    document = Document(id="d1", text="Paris: 18 °C and clear.", score=score)
    with Client(running.url, api_key=KEYS["acme"]) as client:
        prepared = client.prepare("u", "s", "Weather in Paris?", documents=[document])
        as_dict = client.prepare("u", "t", "Weather in Paris?",
                                 documents=[{"id": "d1", "text": "Paris", "score": score}])
        built = client.build(Request(user_input="Weather in Paris?", documents=(document,)))
    assert "18 °C" in str(prepared.to_messages()) and as_dict.user_seq == 1
    assert "18 °C" in str(built.to_messages())

    async def from_a_loop() -> int | None:
        async with AsyncClient(running.url, api_key=KEYS["acme"]) as client:
            answer = await client.aprepare("u", "a", "Weather?", documents=[document])
            return answer.user_seq

    assert asyncio.run(from_a_loop()) == 1


@pytest.mark.parametrize("score", [float("nan"), np.float32("inf"), Decimal("0.5")],
                         ids=["nan", "numpy-inf", "decimal"])
def test_a_value_json_cannot_carry_is_invalid_input_and_nothing_is_sent(
        running: Running, score: Any) -> None:
    with Client(running.url, api_key=KEYS["acme"]) as client:
        with pytest.raises(InvalidInputError, match=r"not JSON data.*nothing was sent"):
            client.prepare("u", "s", "Weather?",
                           documents=[{"id": "d1", "text": "Paris", "score": score}])
        assert client.session("u", "s") is None


def test_text_with_a_lone_surrogate_is_refused_as_in_process(running: Running) -> None:
    in_process = ContextManager(MemoryStore())
    with pytest.raises(InvalidInputError, match="lone surrogate") as local:
        in_process.prepare("u", "s", "half an emoji \ud83d")
    with Client(running.url, api_key=KEYS["acme"]) as client:
        with pytest.raises(InvalidInputError, match="lone surrogate") as remote:
            client.prepare("u", "s", "half an emoji \ud83d")
        assert str(remote.value) == str(local.value)
        assert client.session("u", "s") is None


@pytest.mark.parametrize("ids", [("\udc80", "s"), ("u", "x\ud800")], ids=["user", "session"])
def test_an_id_with_a_lone_surrogate_is_invalid_input(running: Running,
                                                      ids: tuple[str, str]) -> None:
    with Client(running.url, api_key=KEYS["acme"]) as client:
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            client.prepare(*ids, "Hello")
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            client.session(*ids)
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            client.erase_user(ids[0] + "\ud800")


def test_text_goes_as_utf8_so_the_body_limit_counts_what_was_written(
        tmp_path: Path, serve_app: Callable[..., Running]) -> None:
    text = "東京の天気は？" * 150  # 1,050 characters: 3,150 bytes in UTF-8, 6,300 escaped
    running = serve_app(f"sqlite:///{tmp_path / 'small.db'}",
                        limits=Limits(max_body_bytes=4_500))
    with Client(running.url, api_key=KEYS["acme"]) as client:
        assert client.prepare("u", "s", text).user_seq == 1
        view = client.session("u", "s", last=1)
    assert view is not None and view.messages[0].message["content"] == text


def _server_tool_only_answer() -> Any:
    """An Anthropic answer holding only a server tool's call: no chat message carries it."""
    from anthropic.types import Message

    return Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-5-5",
        "stop_reason": "pause_turn", "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                     "input": {"query": "weather Paris"}}]})


def test_record_reads_an_sdk_message_that_makes_no_chat_message_as_in_process(
        running: Running) -> None:
    messages = [_server_tool_only_answer(), {"role": "assistant", "content": "Sunny, 18 °C."}]
    in_process = ContextManager(MemoryStore())
    in_process.prepare("u", "s", "Weather in Paris?")
    expected = in_process.record("u", "s", messages=messages)
    with Client(running.url, api_key=KEYS["acme"]) as client:
        client.prepare("u", "s", "Weather in Paris?")
        assert client.record("u", "s", messages=messages) == expected == [2]
        view = client.session("u", "s", last=1)
    assert view is not None and view.messages[0].message["content"] == "Sunny, 18 °C."


def _left_out_events(records: list[logging.LogRecord]) -> list[tuple[str, dict[str, Any]]]:
    """(logger, event fields) of each ``record_left_out`` event logged."""
    return [(record.name, record.contextwright) for record in records  # type: ignore[attr-defined]
            if getattr(record, "contextwright", {}).get("event") == "record_left_out"]


def test_what_a_recorded_sdk_message_leaves_out_is_logged_as_in_process(
        running: Running, caplog: pytest.LogCaptureFixture) -> None:
    messages = [_server_tool_only_answer(), {"role": "assistant", "content": "Sunny, 18 °C."}]
    in_process = ContextManager(MemoryStore())
    in_process.prepare("u", "s", "Weather in Paris?")
    with caplog.at_level(logging.WARNING):
        in_process.record("u", "s", messages=messages)
    [(_, expected)] = _left_out_events(caplog.records)
    caplog.clear()
    with Client(running.url, api_key=KEYS["acme"]) as client, caplog.at_level(logging.WARNING):
        client.prepare("u", "s", "Weather in Paris?")
        client.record("u", "s", messages=messages)
    [(name, said)] = _left_out_events(caplog.records)
    assert name == "contextwright.client"
    assert said == {**expected, "user_id": "u"} and said["left_out"] == {"server_tool_use": 1}


@pytest.mark.parametrize("setting", [{"backoff": -0.5}, {"max_retry_wait": -1.0},
                                     {"retries": -1}, {"backoff": float("nan")},
                                     {"retries": 1.5}],
                         ids=["backoff", "max_retry_wait", "retries", "nan", "fraction"])
def test_retry_settings_no_retry_could_use_are_refused_when_the_client_is_made(
        setting: dict[str, Any]) -> None:
    name = next(iter(setting))
    with pytest.raises(InvalidInputError, match=name):
        Client("http://127.0.0.1:9", api_key="k", **setting)
    with pytest.raises(InvalidInputError, match=name):
        AsyncClient("http://127.0.0.1:9", api_key="k", **setting)


@pytest.mark.parametrize("key", ["s3cré", "s3cret\u2019", "s3cret\nX-Other: 1", "", " s3cret"],
                         ids=["accent", "typographic-quote", "line-break", "empty", "space"])
def test_an_api_key_no_header_can_carry_is_refused_without_showing_it(key: str) -> None:
    for make in (Client, AsyncClient):
        with pytest.raises(InvalidInputError, match="api_key") as raised:
            make("http://127.0.0.1:9", api_key=key)
        assert "s3cr" not in str(raised.value)


def test_a_key_made_by_new_key_is_taken(running: Running) -> None:
    with Client(running.url, api_key=KEYS["acme"]) as client:
        assert client.prepare("u", "s", "Hello").user_seq == 1
