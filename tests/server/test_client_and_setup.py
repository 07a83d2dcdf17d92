"""The clients' request settings, long user ids over the service, and refusals at start-up.

``Client.build`` takes every setting ``POST /v1/build`` honours, and the context it returns
answers ``to_request`` with the settings the call gave. A tenant's user id may hold what the
stored ``<tenant>/<user>`` leaves room for, and a longer one is refused with that length.
``contextwright serve`` refuses a thread count or rate store it cannot run with in one line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from server_helpers import KEYS, Running
from typer.testing import CliRunner

from contextwright import errors
from contextwright.cli import app
from contextwright.client import AsyncClient, Client, RemoteContext
from contextwright.server import ServerConfig
from contextwright.server.tenants import MAX_STORED_ID, scoped_user, user_id_limit
from contextwright.session.store import validate_id

TOOL = {"type": "function", "function": {"name": "search", "description": "Search the web",
                                         "parameters": {"type": "object", "properties": {}}}}
REQUEST = {"user_input": "Find flights to Oslo", "tools": [TOOL]}


@pytest.fixture
def running(tmp_path: Path, serve_app: Callable[..., Running]) -> Running:
    return serve_app(f"sqlite:///{tmp_path / 's.db'}")


def _check_settings(context: RemoteContext) -> None:
    body = context.to_request("openai")
    assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is False
    # Code written for FinalContext.to_request passes the settings again: the same ones work.
    same = context.to_request("openai", model="gpt-4o", tool_choice="required",
                              parallel_tool_calls=False, max_tokens=None)
    assert same == body
    with pytest.raises(ValueError, match="to_request cannot change tool_choice"):
        context.to_request("openai", tool_choice="auto")
    with pytest.raises(ValueError, match="to_request cannot change cache"):
        context.to_request("openai", cache=False)


def test_client_build_sends_tool_choice_and_parallel_tool_calls(running: Running) -> None:
    with Client(running.url, api_key=KEYS["acme"]) as client:
        context = client.build(REQUEST, model="gpt-4o", tool_choice="required",
                               parallel_tool_calls=False)
        named = client.build(REQUEST, format="anthropic",
                             tool_choice={"type": "function", "function": {"name": "search"}})
    _check_settings(context)
    assert named.to_request("anthropic")["tool_choice"] == {"type": "tool", "name": "search"}


def test_async_client_build_sends_tool_choice_and_parallel_tool_calls(running: Running) -> None:
    async def build() -> RemoteContext:
        async with AsyncClient(running.url, api_key=KEYS["acme"]) as client:
            return await client.build(REQUEST, model="gpt-4o", tool_choice="required",
                                      parallel_tool_calls=False)

    _check_settings(asyncio.run(build()))


def test_to_request_takes_the_settings_prepare_was_given(running: Running) -> None:
    with Client(running.url, api_key=KEYS["acme"]) as client:
        context = client.prepare("u", "s", "Find flights to Oslo", tools=[TOOL],
                                 model="gpt-4o", max_tokens=300, tool_choice="required")
    body = context.to_request("openai", model="gpt-4o", max_tokens=300)
    assert body["model"] == "gpt-4o" and body["tool_choice"] == "required"
    with pytest.raises(ValueError, match="to_request cannot change max_tokens"):
        context.to_request("openai", max_tokens=200)


def test_the_store_id_limit_the_service_counts_with_is_the_stores() -> None:
    validate_id("u" * MAX_STORED_ID, "user_id")
    with pytest.raises(errors.InvalidInputError):
        validate_id("u" * (MAX_STORED_ID + 1), "user_id")


def test_a_tenants_user_id_holds_what_the_stored_id_leaves_room_for(running: Running) -> None:
    limit = user_id_limit("acme")
    assert limit == MAX_STORED_ID - len("acme/")
    assert len(scoped_user("acme", "u" * limit)) == MAX_STORED_ID
    headers = {"Authorization": f"Bearer {KEYS['acme']}"}
    with httpx.Client(base_url=running.url, headers=headers) as http:
        fits = http.post(f"/v1/sessions/{'u' * limit}/s/prepare", json={"text": "hi"})
        over = http.post(f"/v1/sessions/{'u' * (limit + 1)}/s/prepare", json={"text": "hi"})
    assert fits.status_code == 200, fits.text
    assert over.status_code == 400
    # The length named is the caller's own limit, not the stored id's.
    assert f"user_id is longer than {limit} characters" in over.json()["detail"]
    assert over.json()["detail"].count("u" * 20) == 0


@pytest.mark.parametrize(("options", "message"), [
    (["--threads", "0"], "--threads must be 1 or more"),
    (["--threads", "-3"], "--threads must be 1 or more"),
    (["--rate-store", "redis://127.0.0.1:1/0"], "rate limiter's Redis cannot be reached"),
    (["--rate-store", "bogus://x"], "rate limiter's Redis URL is malformed"),
    (["--rate-store", "redis://127.0.0.1:notaport/0"], "rate limiter's Redis URL is malformed"),
])
def test_serve_refuses_threads_and_rate_stores_it_cannot_use_in_one_line(
        keys_file: Path, tmp_path: Path, options: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["serve", "--store", f"sqlite:///{tmp_path / 's.db'}",
                                      "--keys", str(keys_file), *options])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output


def test_a_config_without_threads_is_refused(keys_file: Path) -> None:
    with pytest.raises(errors.InvalidInputError, match="threads must be a whole number >= 1"):
        ServerConfig(store="memory://", keys=str(keys_file), threads=0)


def test_client_build_sends_an_allowed_tools_choice(running: Running) -> None:
    allowed = {"type": "allowed_tools",
               "allowed_tools": {"mode": "required", "tools": [
                   {"type": "function", "function": {"name": "search"}}]}}
    with Client(running.url, api_key=KEYS["acme"]) as client:
        context = client.build(REQUEST, model="gpt-4o", tool_choice=allowed)
        responses = client.build(REQUEST, format="openai-responses", tool_choice=allowed)
        with pytest.raises(errors.InvalidInputError, match="not among the request's tools"):
            client.build(REQUEST, tool_choice={"type": "allowed_tools", "allowed_tools": {
                "mode": "auto", "tools": [{"type": "function", "function": {"name": "book"}}]}})
    assert context.to_request("openai")["tool_choice"] == allowed
    assert responses.to_request("openai-responses")["tool_choice"]["type"] == "allowed_tools"
