"""Failures are RFC 9457 problem details from the error tree: no traceback, no payload echo."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_helpers import KEYS, Running

from contextwright import ContextManager, MemoryStore, errors
from contextwright.client import Client
from contextwright.server import BackgroundServer, ServerConfig, create_app
from contextwright.server.problems import kind_of
from contextwright.server.service import Service
from contextwright.session import SessionKey, SqliteStore

SECRET = "PAYLOAD-SECRET-7731"
AUTH = {"Authorization": f"Bearer {KEYS['acme']}"}


def _is_problem(answer: httpx.Response, status: int, slug: str) -> dict[str, object]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    body = answer.json()
    assert body["type"] == f"urn:contextwright:problem:{slug}"
    assert body["status"] == status and body["title"] and body["detail"]
    assert SECRET not in answer.text and "Traceback" not in answer.text
    if status == 400:  # every refused input names its error class, validated by whoever
        assert body["error"] == ("PlanError" if slug == "invalid-plan" else "InvalidInputError")
    return dict(body)


@pytest.fixture
def running(tmp_path: Path, serve_app: Callable[..., Running]) -> Running:
    return serve_app(f"sqlite:///{tmp_path / 's.db'}")


@pytest.mark.parametrize(("body", "names"), [
    (b'{"user_input": "' + SECRET.encode() + b'", ', "not valid JSON"),
    (b'{"user_input": "x", "bogus": "' + SECRET.encode() + b'"}', "bogus"),
    (b'{"user_input": 7}', "user_input"),
    (b"[" * 5000 + b"]" * 5000, "deeper"),
    (b'{"user_input": "\xff' + SECRET.encode() + b'"}', "UTF-8"),
    (b'{"user_input": "x", "history": [{"role": "wizard", "content": "'
     + SECRET.encode() + b'"}]}', "history[0]"),
    (b'{"user_input": "x", "plan": "/etc/passwd"}', "no shipped plan"),
])
def test_bad_input_is_400_naming_the_field_not_the_value(running: Running, body: bytes,
                                                         names: str) -> None:
    answer = httpx.post(running.url + "/v1/build", content=body,
                        headers={**AUTH, "Content-Type": "application/json"})
    problem = _is_problem(answer, 400, "invalid-plan" if "plan" in names else "invalid-input")
    assert names in str(problem["detail"])


def test_session_call_errors_are_400(running: Running) -> None:
    with httpx.Client(base_url=running.url, headers=AUTH) as http:
        orphan = http.post("/v1/sessions/u/s/record", json={"tool_results": [
            {"role": "tool", "tool_call_id": "c9", "content": SECRET}]})
        empty = http.post("/v1/sessions/u/s/record", json={})
        no_user = http.post("/v1/sessions/u/s/prepare", json={})
        last = http.get("/v1/sessions/u/s", params={"last": -1})
        wrong_type = http.post("/v1/sessions/u/s/prepare", content=b"text=hi",
                               headers={"Content-Type": "application/x-www-form-urlencoded"})
    for answer in (orphan, empty, no_user, last):
        _is_problem(answer, 400, "invalid-input")
    _is_problem(wrong_type, 415, "unsupported-media-type")


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/build", {"user_input": "x", "format": "xml"}),
    ("/v1/build", {"user_input": "x", "budget": -1}),
    ("/v1/build", {"user_input": "x", "env": {"a": 1}}),
    ("/v1/sessions/u/s/prepare", {"txt": SECRET}),
    ("/v1/sessions/u/s/prepare", {"text": "x", "env": {"a": 1}}),
    ("/v1/sessions/u/s/record", {"assistant": 5}),
    ("/v1/sessions/%FF/s/prepare", {"text": "x"}),
])
def test_a_body_refused_before_the_library_reads_it_is_still_an_invalid_input_error(
        running: Running, path: str, body: dict[str, object]) -> None:
    answer = httpx.post(running.url + path, json=body, headers=AUTH)
    assert _is_problem(answer, 400, "invalid-input")["error"] == "InvalidInputError"


def test_a_budget_failure_is_422_with_the_report_but_no_content(running: Running) -> None:
    request = {"user_input": "short", "system": f"{SECRET} " * 400, "budget": 50}
    answer = httpx.post(running.url + "/v1/build", json=request, headers=AUTH)
    problem = _is_problem(answer, 422, "budget-exceeded")
    assert problem["error"] == "BudgetError"
    report = problem["report"]
    assert isinstance(report, dict) and report["available"] == 50
    with Client(running.url, api_key=KEYS["acme"]) as client, pytest.raises(
            errors.BudgetError) as raised:
        client.build({"user_input": "short", "system": f"{SECRET} " * 400}, budget=50)
    assert raised.value.report.available == 50


def test_a_stored_message_that_does_not_fit_says_its_seq(running: Running) -> None:
    with Client(running.url, api_key=KEYS["acme"]) as client, pytest.raises(
            errors.BudgetError) as raised:
        client.prepare("u", "s", f"{SECRET} " * 40_000)
    assert raised.value.stored_seq == 1


def test_a_rendering_refused_after_the_message_is_stored_says_its_seq(running: Running) -> None:
    with Client(running.url, api_key=KEYS["acme"]) as client:
        with pytest.raises(errors.InvalidInputError) as raised:  # no tool to require
            client.prepare("u", "render", "Book me a flight to Oslo", tool_choice="required")
        assert raised.value.stored_seq == 1
        # The corrected call continues the stored turn: the message is stored once.
        client.prepare("u", "render", None)
        with pytest.raises(errors.InvalidInputError) as again:  # nothing stored this time
            client.prepare("u", "render", None, tool_choice="required")
        assert again.value.stored_seq is None
        assert client.session("u", "render").message_count == 1


@pytest.mark.parametrize(("error", "status"), [
    (errors.InvalidInputError("x"), 400), (errors.PlanError("x"), 400),
    (errors.TokenizerError("x"), 400), (errors.ConflictError("x"), 409),
    (errors.SessionGone("x"), 409), (errors.KeyConflictError("x"), 409),
    (errors.StoreUnavailable("x"), 503), (errors.OutcomeUnknown("x"), 503),
    (errors.CorruptRecordError("x"), 500), (errors.AccessDenied("x"), 403),
    (errors.SourceError("x"), 500), (errors.ValidationError("x"), 422),
    (errors.ClassifierError("x"), 503), (errors.ManagerClosed("x"), 503),
])
def test_every_error_of_the_tree_has_its_status(error: errors.ContextwrightError,
                                                status: int) -> None:
    assert kind_of(error).status == status


TWO_CALLS_ONE_ID = {"id": "call_0", "type": "function",
                    "function": {"name": "f", "arguments": "{}"}}


def test_a_request_whose_rendering_fails_validation_is_4xx_not_500(running: Running) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    turn = [{"role": "assistant", "content": None,
             "tool_calls": [TWO_CALLS_ONE_ID, TWO_CALLS_ONE_ID]},
            {"role": "tool", "tool_call_id": "call_0", "content": SECRET},
            {"role": "tool", "tool_call_id": "call_0", "content": "2"}]
    answer = httpx.post(running.url + "/v1/build", headers=AUTH, json={
        "user_input": "twice?", "tools": tools, "turn": turn, "format": "anthropic"})
    # Refused by the validator (422) or, once the request itself refuses the ids, as bad input.
    assert answer.status_code in (400, 422), answer.text
    _is_problem(answer, answer.status_code,
                "unrenderable" if answer.status_code == 422 else "invalid-input")


class _UnrenderableManager(ContextManager):
    """A manager whose rendering fails the validator, as a caller's messages may make it."""

    def prepare(self, *args: Any, **kwargs: Any) -> Any:
        raise errors.ValidationError("messages[3] answers no call of the message before it")


def test_a_validation_error_is_a_422_naming_the_rule_and_the_client_raises_it(
        keys_file: Path) -> None:
    config = ServerConfig(store="memory://", keys=str(keys_file))
    app = create_app(config, manager=_UnrenderableManager(MemoryStore(), background=False))
    with BackgroundServer(app) as server:
        answer = httpx.post(server.url + "/v1/sessions/u/s/prepare", headers=AUTH,
                            json={"text": SECRET})
        problem = _is_problem(answer, 422, "unrenderable")
        assert problem["error"] == "ValidationError"
        assert "messages[3] answers no call" in str(problem["detail"])
        with Client(server.url, api_key=KEYS["acme"]) as client, pytest.raises(
                errors.ValidationError, match="answers no call"):
            client.prepare("u", "s", "hi")


def test_unknown_routes_and_methods_are_problems(running: Running) -> None:
    _is_problem(httpx.get(running.url + "/v2/nothing", headers=AUTH), 404, "not-found")
    _is_problem(httpx.put(running.url + "/v1/build", headers=AUTH), 405, "method-not-allowed")


class _BrokenStore(SqliteStore):
    """A store with a bug (not a store error): what an unexpected exception looks like."""

    def count(self, key: SessionKey) -> int:
        raise RuntimeError(f"bug while reading {SECRET}")


def test_an_unexpected_error_is_a_bare_500_logged_not_shown(
        tmp_path: Path, keys_file: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = ServerConfig(store="memory://", keys=str(keys_file))
    app = create_app(config, store=_BrokenStore(str(tmp_path / "s.db")))
    with caplog.at_level("ERROR", logger="contextwright.server"), BackgroundServer(app) as server:
        answer = httpx.get(server.url + "/v1/sessions/u/s", headers=AUTH)
    problem = _is_problem(answer, 500, "internal")
    assert "RuntimeError" not in answer.text and problem["detail"]
    assert "RuntimeError" in caplog.text  # the operator sees it


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A Redis server of this test alone, so it can be stopped mid-test."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed (.ci/run starts it)", pytrace=False)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
         "no", "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail("the private redis-server did not start")
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0", process
    process.kill()
    process.wait()


def test_a_store_outage_is_503_with_retry_after_and_readyz_says_so(
        private_redis: tuple[str, subprocess.Popen[bytes]],
        serve_app: Callable[..., Running]) -> None:
    url, process = private_redis
    running = serve_app(url)
    with httpx.Client(base_url=running.url, headers=AUTH) as http:
        assert http.get("/readyz").status_code == 200
        assert http.post("/v1/sessions/u/s/prepare", json={"text": "hi"}).status_code == 200
        process.kill()
        process.wait()
        down = http.post("/v1/sessions/u/s/prepare", json={"text": SECRET})
        problem = _is_problem(down, 503, "store-unavailable")
        assert down.headers["retry-after"] == "1"
        assert problem["error"] in ("StoreUnavailable", "OutcomeUnknown")
        _is_problem(http.get("/readyz"), 503, "store-unavailable")
        assert http.get("/healthz").status_code == 200  # the process itself is fine
    with Client(running.url, api_key=KEYS["acme"], retries=1, backoff=0.01) as client, \
            pytest.raises(errors.StoreUnavailable):
        client.prepare("u", "s", "again")


def test_the_documented_build_body_is_the_request_schema_plus_the_options() -> None:
    from dataclasses import fields

    from contextwright.core.request import Request
    from contextwright.server.bodies import BuildBody, BuildOptions

    documented = set(BuildBody.model_fields) - set(BuildOptions.model_fields)
    assert documented == {field.name for field in fields(Request)}


def test_a_blank_fence_secret_stops_the_service_at_start(
        keys_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTWRIGHT_FENCE_SECRET", "  ")
    with pytest.raises(errors.ConfigurationError, match="fence secret is empty"):
        Service(ServerConfig(store="memory://", keys=str(keys_file)))
