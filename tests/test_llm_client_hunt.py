"""``OpenAIChatClient`` on inputs a caller can get wrong and replies a server can get wrong:
every failure is one ``LLMError`` whose ``kind`` names the right side. Replies come from a local
chat-completions server through the official ``openai`` SDK."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import openai  # loaded before any test hides an HTTP library from later imports
import pytest

from contextwright.errors import LLMError
from contextwright.llm import OpenAIChatClient
from fakes.openai_server import FakeOpenAIServer, Reply, text

MESSAGES = [{"role": "user", "content": "Hello"}]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.mark.parametrize("base_url", [
    "http://127.0.0.1:8000/v1\n", " http://127.0.0.1:8000/v1", "http://127.0.0.1\t:8000/v1",
    "http://127.0.0.1:8000/v1\x7f", "http://local host:8000/v1",
    "http://127.0.0.1:8000/" + "v" * 70_000,
], ids=["trailing-newline", "leading-space", "tab", "delete", "space-in-host", "too-long"])
def test_a_base_url_the_http_library_refuses_is_a_config_error(base_url: str) -> None:
    # A URL read from a file or an environment variable keeps its line break: that is the
    # caller's mistake, named as such, before anything is sent.
    with pytest.raises(LLMError) as caught:
        OpenAIChatClient(base_url)
    assert caught.value.kind == "config"


def test_the_client_needs_only_what_the_openai_package_brings(
        monkeypatch: pytest.MonkeyPatch, server: FakeOpenAIServer) -> None:
    # Newer openai SDKs are built on another HTTP library than ``httpx``; an install with only
    # the ``llm`` extra has no ``httpx`` then, and the client still works.
    assert openai.OpenAI is not None
    monkeypatch.setitem(sys.modules, "httpx", None)  # ``import httpx`` now fails
    server.script(text("Hi there"))
    with OpenAIChatClient(server.base_url, max_retries=0, timeout=5) as client:
        assert client.complete(MESSAGES, model="m") == "Hi there"


def test_a_message_that_is_not_valid_unicode_is_the_requests_fault(
        server: FakeOpenAIServer) -> None:
    # Text read with errors="surrogateescape" keeps lone surrogates, which UTF-8 cannot carry:
    # nothing is sent, and the error says the request is at fault, not the server's reply.
    messages = [{"role": "user", "content": "caf\udce9 au lait"}]
    with OpenAIChatClient(server.base_url, max_retries=0, timeout=5) as client, \
            pytest.raises(LLMError, match="not valid Unicode") as caught:
        client.complete(messages, model="m")
    assert caught.value.kind == "request"
    assert server.requests == []


def test_a_reply_nested_past_the_json_readers_depth_is_a_response_error(
        server: FakeOpenAIServer) -> None:
    server.script(Reply(raw_body=b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"))
    with OpenAIChatClient(server.base_url, max_retries=0, timeout=5) as client, \
            pytest.raises(LLMError) as caught:
        client.complete(MESSAGES, model="m")
    assert caught.value.kind == "response"


def test_a_call_on_a_closed_client_is_a_config_error(server: FakeOpenAIServer) -> None:
    # A summariser handed a client its ``with`` block has since closed fails each summary:
    # the error says why, as an LLMError the summariser reports, not a bare RuntimeError.
    with OpenAIChatClient(server.base_url, max_retries=0, timeout=5) as client:
        pass
    with pytest.raises(LLMError, match="closed") as caught:
        client.complete(MESSAGES, model="m")
    assert caught.value.kind == "config"
    assert server.requests == []
