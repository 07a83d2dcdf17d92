"""Problems of the service: no payload value in them, bounds on what a rendering may carry, and
the statuses the OpenAPI schema lists."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextwright.server import BackgroundServer, ServerConfig, create_app, hash_key

API_KEY = "acme-key-1"
MARK = "zq7marker"
HEADERS = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[tenants.acme]\nkeys = ["{hash_key(API_KEY)}"]\n', "utf-8")
    config = ServerConfig(store=f"sqlite:///{tmp_path / 's.db'}", keys=str(keys),
                          keys_check_every=0.0)
    server = BackgroundServer(create_app(config)).start()
    yield server.url
    server.stop()


def _tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


PREPARE_BODIES = [
    {"text": "hi", "tools": [_tool(f"{MARK} bad name!")]},
    {"text": "hi", "tools": [_tool(f"{MARK}_f"), _tool(f"{MARK}_f")]},
    {"text": "hi", "env": {f"{MARK}_key": 5}},
]
BUILD_BODIES = [
    {"user_input": "hi", "plan": f"{MARK}-plan"},
    {"user_input": "hi", "model": f"{MARK}-model"},
    {"user_input": "hi", "tools": [_tool(f"{MARK} bad name!")]},
    {"user_input": "hi", "tools": [_tool(f"{MARK}_f"), _tool(f"{MARK}_f")]},
    {"user_input": "hi", "env": {f"{MARK}_key": 5}},
]


@pytest.mark.parametrize("body", PREPARE_BODIES)
def test_a_refused_prepare_names_no_value_of_its_body_and_stores_nothing(
        url: str, body: dict[str, Any]) -> None:
    answer = httpx.post(f"{url}/v1/sessions/nora/trip/prepare", json=body, headers=HEADERS)
    assert answer.status_code == 400, answer.text
    assert MARK not in answer.text
    assert "stored_seq" not in answer.json()
    assert httpx.get(f"{url}/v1/sessions/nora/trip", headers=HEADERS).status_code == 404


@pytest.mark.parametrize("body", BUILD_BODIES)
def test_a_refused_build_names_no_value_of_its_body(url: str, body: dict[str, Any]) -> None:
    answer = httpx.post(f"{url}/v1/build", json=body, headers=HEADERS)
    assert answer.status_code == 400, answer.text
    assert MARK not in answer.text


def test_a_refused_body_still_names_the_schema_fields_at_fault(url: str) -> None:
    answer = httpx.post(f"{url}/v1/sessions/nora/trip/prepare", headers=HEADERS,
                        json={"text": "hi", "env": {"tz": 5}, "tools": [_tool("f"), _tool("f")]})
    assert "env.<key>" in answer.json()["detail"]
    answer = httpx.post(f"{url}/v1/sessions/nora/trip/prepare", headers=HEADERS,
                        json={"text": "hi", "tools": [_tool("f"), _tool("f")]})
    assert answer.json()["detail"] == "tools[1] repeats the name of tools[0]"


@pytest.mark.parametrize("path,body", [
    ("/v1/build", {"user_input": "hi"}),
    ("/v1/sessions/nora/trip/prepare", {"text": "hi"}),
])
def test_max_tokens_beyond_any_window_is_a_typed_422_and_stores_nothing(
        url: str, path: str, body: dict[str, Any]) -> None:
    answer = httpx.post(url + path, headers=HEADERS, json={**body, "max_tokens": 10 ** 30})
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert problem["error"] == "ValidationError" and "max_tokens" in problem["detail"]
    assert httpx.get(f"{url}/v1/sessions/nora/trip", headers=HEADERS).status_code == 404
    fine = httpx.post(url + path, headers=HEADERS, json={**body, "max_tokens": 2 ** 53})
    assert fine.status_code == 200, fine.text


def test_the_openapi_schema_lists_the_statuses_each_operation_answers(url: str) -> None:
    schema = httpx.get(f"{url}/openapi.json").json()
    statuses = {(method, path): set(operation["responses"])
                for path, methods in schema["paths"].items()
                for method, operation in methods.items()}
    for path in ("/v1/build", "/v1/sessions/{user_id}/{session_id}/prepare",
                 "/v1/sessions/{user_id}/{session_id}/record"):
        assert {"405", "413", "415", "422", "500"} <= statuses[("post", path)]
    assert statuses[("get", "/healthz")] == {"200", "405", "500"}
    assert "401" not in statuses[("get", "/readyz")]
    assert "413" not in statuses[("get", "/metrics")]
    # Each of them is what the service answers.
    assert httpx.put(f"{url}/v1/build", headers=HEADERS).status_code == 405
    assert httpx.post(f"{url}/v1/build", headers={**HEADERS, "Content-Type": "text/plain"},
                      content=b"{}").status_code == 415
    limit = schema["paths"]["/v1/build"]["post"]["requestBody"]["content"][
        "application/json"]["schema"]["properties"]["max_tokens"]
    assert limit["maximum"] == 2 ** 53


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """The service on a Redis store (the store whose reads interleave most with writes)."""
    import redis

    client = redis.Redis.from_url("redis://127.0.0.1:6379/0", socket_connect_timeout=3)
    client.ping()
    prefix = f"cwtest-{uuid.uuid4().hex}"
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[tenants.acme]\nkeys = ["{hash_key(API_KEY)}"]\n', "utf-8")
    config = ServerConfig(store=f"redis://127.0.0.1:6379/0?prefix={prefix}", keys=str(keys),
                          keys_check_every=0.0)
    server = BackgroundServer(create_app(config)).start()
    yield server.url
    server.stop()
    for name in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(name)
    client.close()


def test_message_count_is_the_newest_seq_returned_while_writes_go_on(redis_url: str) -> None:
    import threading

    url = redis_url
    stop = threading.Event()

    def write(worker: int) -> None:
        with httpx.Client(base_url=url, headers=HEADERS) as client:
            turn = 0
            while not stop.is_set():
                turn += 1
                client.post("/v1/sessions/nora/busy/record",
                            json={"messages": [{"role": "user", "content": f"{worker}-{turn}"}]})

    writers = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    for writer in writers:
        writer.start()
    mismatches = []
    try:
        with httpx.Client(base_url=url, headers=HEADERS) as reader:
            for _ in range(60):
                answer = reader.get("/v1/sessions/nora/busy", params={"last": 5})
                if answer.status_code != 200 or not answer.json()["messages"]:
                    continue
                view = answer.json()
                if view["message_count"] != view["messages"][-1]["seq"]:
                    mismatches.append((view["message_count"], view["messages"][-1]["seq"]))
    finally:
        stop.set()
        for writer in writers:
            writer.join()
    assert mismatches == []
