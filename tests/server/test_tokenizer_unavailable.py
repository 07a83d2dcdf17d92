"""A tokenizer whose package the service lacks is the service's failure, not the caller's.

Asking for a shipped tokenizer on a service installed without its package used to be answered
400 ``invalid-input``, as if the request were malformed: the caller would fix nothing by
changing it, and a monitor counting 5xx saw no fault. It is a 501 naming the package, and the
client raises ``TokenizerUnavailable`` (a ``TokenizerError`` and a ``ServiceError``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_helpers import KEYS

from contextwright.client import Client, ServiceError, TokenizerUnavailable
from contextwright.errors import TokenizerError
from contextwright.server import BackgroundServer, ServerConfig, create_app
from contextwright.server.problems import kind_of
from contextwright.tokens import _base as token_loading

AUTH = {"Authorization": f"Bearer {KEYS['acme']}"}
PROBLEM = "urn:contextwright:problem:tokenizer-unavailable"


@pytest.fixture
def server_url(keys_file: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A served app, started with every package, that then cannot import ``bpe_openai``.

    The service's own manager loads ``o200k_base`` when it starts; a build asking for
    ``cl100k_base`` afterwards loads it then, and no tokenizer loaded before is cached.
    """
    config = ServerConfig(store="memory://", keys=str(keys_file), keys_check_every=0.0)
    with BackgroundServer(create_app(config)) as server:
        monkeypatch.setitem(sys.modules, "bpe_openai", None)  # import: ModuleNotFoundError
        monkeypatch.setattr(token_loading, "_by_name", {})
        yield server.url


def test_a_tokenizer_package_missing_on_the_service_is_a_501_naming_it(
        server_url: str) -> None:
    answer = httpx.post(server_url + "/v1/build", headers=AUTH,
                        json={"user_input": "hi", "tokenizer": "cl100k_base"})
    assert answer.status_code == 501, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert problem["type"] == PROBLEM
    assert problem["error"] == "TokenizerError"
    assert problem["package"] == "bpe_openai"
    assert "bpe-openai" in problem["detail"]
    assert "Retry-After" not in answer.headers  # retrying changes nothing


class _CountingTransport(httpx.HTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return super().handle_request(request)


def test_the_client_raises_tokenizer_unavailable_without_retrying(server_url: str) -> None:
    transport = _CountingTransport()
    with Client(server_url, api_key=KEYS["acme"], backoff=0.0,
                transport=transport) as client, pytest.raises(TokenizerUnavailable) as raised:
        client.build({"user_input": "hi"}, tokenizer="cl100k_base")
    assert transport.sent == 1
    error = raised.value
    assert isinstance(error, TokenizerError) and isinstance(error, ServiceError)
    assert error.status == 501
    assert error.package == "bpe_openai"
    assert "bpe-openai" in str(error)


def test_an_unusable_tokenizer_the_caller_chose_stays_a_400() -> None:
    assert kind_of(TokenizerError("unknown tokenizer")).status == 400
    try:
        raise TokenizerError("the tokenizers package is not installed") from ImportError(
            name="tokenizers")
    except TokenizerError as error:
        missing = error
    assert kind_of(missing).status == 501
