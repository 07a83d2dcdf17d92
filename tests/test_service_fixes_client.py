"""The client against a real service: idempotency keys on errors, and what it sends."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import httpx
import pytest

from contextwright.client import Client
from contextwright.core.request import Request
from contextwright.errors import OutcomeUnknown, StoreUnavailable
from contextwright.server import BackgroundServer, Limits, ServerConfig, create_app, hash_key

API_KEY = "acme-key-1"


def _serve(tmp_path: Path, limits: Limits | None = None) -> BackgroundServer:
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[tenants.acme]\nkeys = ["{hash_key(API_KEY)}"]\n', "utf-8")
    config = ServerConfig(store=f"sqlite:///{tmp_path / 'sessions.db'}", keys=str(keys),
                          limits=limits or Limits(), keys_check_every=0.0)
    return BackgroundServer(create_app(config)).start()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BackgroundServer]:
    running = _serve(tmp_path)
    yield running
    running.stop()


class LostAnswers(httpx.BaseTransport):
    """Delivers every request to the service, then loses the answer of each write."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()

    def close(self) -> None:
        self.inner.close()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        response.read()
        response.close()
        if request.url.path.endswith(("/prepare", "/record")):
            raise httpx.ReadTimeout("answer lost", request=request)
        return response


def _texts(url: str, user: str, session: str) -> list[str]:
    with Client(url, api_key=API_KEY) as client:
        view = client.session(user, session, last=50)
    assert view is not None
    return [str(entry.message.get("content")) for entry in view.messages]


def test_a_lost_answer_hands_over_the_key_and_a_retry_with_it_stores_the_message_once(
        server: BackgroundServer) -> None:
    with Client(server.url, api_key=API_KEY, transport=LostAnswers(), retries=1,
                backoff=0.01) as flaky, pytest.raises(OutcomeUnknown) as lost:
        flaky.prepare("nora", "trip", "Book me a table for two at 8pm.")
    key = getattr(lost.value, "idempotency_key", None)
    assert isinstance(key, str) and key
    assert key in str(lost.value)
    with Client(server.url, api_key=API_KEY) as client:
        client.prepare("nora", "trip", "Book me a table for two at 8pm.", idempotency_key=key)
    assert _texts(server.url, "nora", "trip") == ["Book me a table for two at 8pm."]


def test_a_lost_record_answer_hands_over_the_key_and_a_retry_with_it_stores_once(
        server: BackgroundServer) -> None:
    with Client(server.url, api_key=API_KEY) as client:
        client.prepare("nora", "trip", "Hello")
    with Client(server.url, api_key=API_KEY, transport=LostAnswers(),
                retries=0) as flaky, pytest.raises(OutcomeUnknown) as lost:
        flaky.record("nora", "trip", assistant="Hi Nora.")
    key = getattr(lost.value, "idempotency_key", None)
    assert isinstance(key, str)
    with Client(server.url, api_key=API_KEY) as client:
        client.record("nora", "trip", assistant="Hi Nora.", idempotency_key=key)
    assert _texts(server.url, "nora", "trip") == ["Hello", "Hi Nora."]


def test_a_key_the_caller_gave_is_the_one_on_the_error(server: BackgroundServer) -> None:
    with Client(server.url, api_key=API_KEY, transport=LostAnswers(),
                retries=0) as flaky, pytest.raises(OutcomeUnknown) as lost:
        flaky.prepare("nora", "trip", "Hello", idempotency_key="my-key-1")
    assert getattr(lost.value, "idempotency_key", None) == "my-key-1"


def test_a_service_that_cannot_be_reached_is_store_unavailable_not_an_unknown_outcome() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with Client(f"http://127.0.0.1:{port}", api_key=API_KEY, retries=1, backoff=0.01) as client:
        with pytest.raises(StoreUnavailable) as refused:
            client.prepare("nora", "trip", "Hello")
    assert not isinstance(refused.value, OutcomeUnknown)
    assert isinstance(getattr(refused.value, "idempotency_key", None), str)


def test_a_write_that_timed_out_on_the_service_is_an_unknown_outcome_with_its_key(
        tmp_path: Path) -> None:
    slow = _serve(tmp_path, Limits(build_timeout=0.01))
    # About 110 KB: a prepare of it takes far longer than the build timeout on any machine.
    text = "Here is my log: " + " ".join(f"line{i} value={i * 7}" for i in range(8000))
    try:
        with Client(slow.url, api_key=API_KEY, retries=0) as client:
            with pytest.raises(OutcomeUnknown) as timed_out:
                client.prepare("nora", "trip", text)
            key = getattr(timed_out.value, "idempotency_key", None)
            assert isinstance(key, str) and key in str(timed_out.value)
    finally:
        slow.stop()


def test_build_sends_a_request_whose_env_is_a_read_only_mapping(
        server: BackgroundServer) -> None:
    request = Request(user_input="What time is it?", env=MappingProxyType({"tz": "UTC"}))
    with Client(server.url, api_key=API_KEY) as client:
        context = client.build(request, format="text")
    assert context.text is not None and "UTC" in context.text


def test_a_remote_context_takes_the_arguments_of_a_local_one(server: BackgroundServer) -> None:
    with Client(server.url, api_key=API_KEY) as client:
        context = client.prepare("nora", "trip", "Hello")
    messages = context.to_messages("openai", reasoning=False)
    assert messages == context.to_request("openai")["messages"]
    with pytest.raises(ValueError, match="reasoning=True"):
        context.to_messages("openai", reasoning=True)
