"""An ``Idempotency-Key`` header that is not ASCII is refused, naming the header.

HTTP carries header values as bytes without saying how text was encoded: curl sends a
terminal's UTF-8, ``requests`` Latin-1. The service used to read every header as Latin-1, so a
key sent as UTF-8 in the header arrived as other text than the same key in the body's
``idempotency_key`` (JSON, always UTF-8), which the client sends: a retry of the client's write
through the header stored the message a second time. The body carries any key; the header
only ASCII, as the Idempotency-Key draft's structured-field string allows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_helpers import KEYS

from contextwright.client import Client
from contextwright.server import BackgroundServer, ServerConfig, create_app

AUTH = {"Authorization": f"Bearer {KEYS['acme']}"}
KEY = "clé-1"


@pytest.fixture
def server_url(keys_file: Path) -> Iterator[str]:
    config = ServerConfig(store="memory://", keys=str(keys_file), keys_check_every=0.0)
    with BackgroundServer(create_app(config)) as server:
        yield server.url


@pytest.mark.parametrize("raw_key", [KEY.encode("utf-8"), KEY.encode("latin-1")],
                         ids=["utf-8", "latin-1"])
@pytest.mark.parametrize("call", ["prepare", "record"])
def test_a_non_ascii_idempotency_key_header_is_a_400_naming_it(
        server_url: str, raw_key: bytes, call: str) -> None:
    body = {"text": "hi"} if call == "prepare" else {"assistant": "hello"}
    with httpx.Client(base_url=server_url, headers=AUTH) as http:
        answer = http.post(f"/v1/sessions/u/s/{call}", json=body,
                           headers={"Idempotency-Key": raw_key})
        assert answer.status_code == 400, answer.text
        problem = answer.json()
        assert problem["type"] == "urn:contextwright:problem:invalid-input"
        assert problem["error"] == "InvalidInputError"
        assert "Idempotency-Key" in problem["detail"]
        assert http.get("/v1/sessions/u/s").status_code == 404  # nothing was stored


def test_a_key_the_client_sent_is_never_matched_by_other_text_in_the_header(
        server_url: str) -> None:
    with Client(server_url, api_key=KEYS["acme"]) as client, \
            httpx.Client(base_url=server_url, headers=AUTH) as http:
        assert client.prepare("u", "s", "hi", idempotency_key=KEY).user_seq == 1
        retried = http.post("/v1/sessions/u/s/prepare", json={"text": "hi"},
                            headers={"Idempotency-Key": KEY.encode("utf-8")})
        assert retried.status_code == 400, retried.text
        # An ASCII key is the same key in the body and in the header.
        assert client.prepare("u", "s", "again", idempotency_key="key-2").user_seq == 2
        same = http.post("/v1/sessions/u/s/prepare", json={"text": "again"},
                         headers={"Idempotency-Key": "key-2"})
        assert same.status_code == 200 and same.json()["user_seq"] == 2
        view = client.session("u", "s")
        assert view is not None and view.message_count == 2
