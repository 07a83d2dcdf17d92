"""OpenAIChatClient against a local fake chat-completions server (the HTTP boundary, no network)."""

from __future__ import annotations

import ast
import json
import pathlib
from collections.abc import Iterator

import pytest

from contextwright.errors import ContextwrightError, LLMError
from contextwright.llm import ChatClient, OpenAIChatClient
from fakes.openai_server import FakeOpenAIServer, Reply, error, text

MESSAGES = [{"role": "system", "content": "You summarise."},
            {"role": "user", "content": "订单号 20241001 的物流状态"}]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def client_for(server: FakeOpenAIServer, **kwargs: float) -> OpenAIChatClient:
    options = {"timeout": 5.0, "max_retries": 0, **kwargs}
    return OpenAIChatClient(server.base_url, "sk-test", timeout=options["timeout"],
                            max_retries=int(options["max_retries"]))


def test_client_returns_reply_text_and_sends_openai_request(server: FakeOpenAIServer) -> None:
    server.script(text('{"need": "物流"}'))
    with client_for(server) as client:
        reply = client.complete(MESSAGES, model="qwen2.5", temperature=0.0, max_tokens=64,
                                response_format={"type": "json_object"})
    assert reply == '{"need": "物流"}'
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["model"] == "qwen2.5"
    assert request.body["messages"] == MESSAGES
    assert request.body["temperature"] == 0.0
    assert request.body["max_tokens"] == 64
    assert request.body["response_format"] == {"type": "json_object"}


def test_optional_parameters_are_not_sent_when_unset(server: FakeOpenAIServer) -> None:
    server.script(text("ok"))
    with client_for(server) as client:
        client.complete(MESSAGES, model="m")
    body = server.requests[0].body
    assert "max_tokens" not in body
    assert "response_format" not in body


def test_client_follows_the_chat_client_protocol(server: FakeOpenAIServer) -> None:
    with client_for(server) as client:
        assert isinstance(client, ChatClient)


def test_http_error_becomes_llm_error_with_status(server: FakeOpenAIServer) -> None:
    server.script(error(401))
    with client_for(server) as client, pytest.raises(LLMError) as caught:
        client.complete(MESSAGES, model="m")
    assert caught.value.kind == "status"
    assert caught.value.status_code == 401
    assert "scripted failure" not in str(caught.value)  # the server's text is not echoed
    assert isinstance(caught.value, ContextwrightError)


def test_server_error_is_retried_then_succeeds(server: FakeOpenAIServer) -> None:
    server.script(error(503), text("second time lucky"))
    with client_for(server, max_retries=1) as client:
        assert client.complete(MESSAGES, model="m") == "second time lucky"
    assert len(server.requests) == 2


def test_retries_are_bounded(server: FakeOpenAIServer) -> None:
    server.script(error(500), error(500), error(500), text("too late"))
    with client_for(server, max_retries=2) as client, pytest.raises(LLMError) as caught:
        client.complete(MESSAGES, model="m")
    assert caught.value.status_code == 500
    assert len(server.requests) == 3


def test_timeout_becomes_llm_error(server: FakeOpenAIServer) -> None:
    server.script(Reply(content="slow", delay=30))
    with client_for(server, timeout=0.3) as client, pytest.raises(LLMError) as caught:
        client.complete(MESSAGES, model="m")
    assert caught.value.kind == "timeout"


def test_unreachable_server_becomes_connection_error() -> None:
    with FakeOpenAIServer() as fake:
        base_url = fake.base_url
    # the server is shut down now: the port refuses connections
    with OpenAIChatClient(base_url, timeout=2, max_retries=0) as client, \
            pytest.raises(LLMError) as caught:
        client.complete(MESSAGES, model="m")
    assert caught.value.kind == "connection"


@pytest.mark.parametrize("reply", [text(""), text("   \n"), text(None), Reply(no_choices=True)],
                         ids=["empty", "blank", "null", "no-choices"])
def test_empty_reply_is_an_error(server: FakeOpenAIServer, reply: Reply) -> None:
    server.script(reply)
    with client_for(server) as client, pytest.raises(LLMError) as caught:
        client.complete(MESSAGES, model="m")
    assert caught.value.kind == "empty"


@pytest.mark.parametrize("body", [b"not json at all", b'{"object": "chat.completion"}',
                                  b'{"choices": "nope"}'], ids=["text", "no-choices", "bad-type"])
def test_malformed_body_is_an_error(server: FakeOpenAIServer, body: bytes) -> None:
    server.script(Reply(raw_body=body))
    with client_for(server) as client, pytest.raises(LLMError) as caught:
        client.complete(MESSAGES, model="m")
    assert caught.value.kind in {"response", "empty"}


@pytest.mark.parametrize(("timeout", "retries"), [(0, 1), (-1, 1), (1, -1), (1, "2"), (1, 1.5),
                                                  (1, None), (1, True)])
def test_bad_configuration_is_rejected(timeout: float, retries: object) -> None:
    with pytest.raises(LLMError) as caught:
        OpenAIChatClient("http://127.0.0.1:9/v1", timeout=timeout,
                         max_retries=retries)  # type: ignore[arg-type]
    assert caught.value.kind == "config"


def test_llm_package_imports_only_errors_of_ours() -> None:
    package = pathlib.Path(__file__).parents[1] / "src" / "contextwright" / "llm"
    for module in package.glob("*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = node.module
            elif isinstance(node, ast.Import):
                names = ",".join(alias.name for alias in node.names)
            else:
                continue
            for name in names.split(","):
                if name.startswith("contextwright"):
                    # ``checks`` imports only ``errors``: the package still pulls in no core.
                    assert name in {"contextwright.errors", "contextwright.checks",
                                    "contextwright.llm.client"}, module


def _completion(message: dict[str, object]) -> Reply:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
            "usage": {"prompt_tokens": 41, "completion_tokens": 7, "total_tokens": 48}}
    return Reply(raw_body=json.dumps(body).encode())


def test_respond_offers_tools_and_returns_calls_and_usage(server: FakeOpenAIServer) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    server.script(_completion({"role": "assistant", "content": None, "tool_calls": [
        {"id": "k1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]}))
    with client_for(server) as client:
        reply = client.respond(MESSAGES, model="m", tools=tools, tool_choice="auto",
                               max_tokens=32)
    assert reply.content is None
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("f", '{"a": 1}')]
    assert (reply.prompt_tokens, reply.completion_tokens) == (41, 7)
    [request] = server.requests
    assert request.body["tools"] == tools and request.body["tool_choice"] == "auto"
    assert request.body["max_tokens"] == 32


def test_respond_without_tools_sends_no_tool_choice_and_refuses_an_empty_reply(
        server: FakeOpenAIServer) -> None:
    server.script(text("An answer."), text("  "))
    with client_for(server) as client:
        assert client.respond(MESSAGES, model="m", tool_choice="none").content == "An answer."
        with pytest.raises(LLMError) as caught:
            client.respond(MESSAGES, model="m")
    assert caught.value.kind == "empty"
    assert "tools" not in server.requests[0].body
    assert "tool_choice" not in server.requests[0].body
