"""OpenAI's ``allowed_tools`` tool choice: the model may call only some of the request's tools
(``auto``) or must call one of them (``required``), while every tool stays in the request (and
in the provider's prompt cache). Chat Completions and the Responses API each take it in their
own shape; the Messages API has no equivalent, and says so."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.final import FinalContext
from contextwright.errors import InvalidInputError
from fakes.provider_server import ProviderServer
from test_provider_requests import MODELS, WEATHER, check_sdk_type, send

TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
MEMOS = {"type": "function", "function": {"name": "list_memos", "parameters": {}}}

CHAT_FORM = {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
    {"type": "function", "function": {"name": "get_weather"}},
    {"type": "function", "function": {"name": "get_time"}}]}}
RESPONSES_FORM = {"type": "allowed_tools", "mode": "required", "tools": [
    {"type": "function", "name": "get_weather"}, {"type": "function", "name": "get_time"}]}


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


def context(tools: list[dict[str, Any]] | None = None) -> FinalContext:
    given = [WEATHER, TIME, MEMOS] if tools is None else tools
    return ContextBuilder(model="gpt-4o").build(
        BuildPlan.named("tool_heavy"),
        Request(user_input="Weather and time in Oslo?", tools=copy.deepcopy(given)))


@pytest.mark.parametrize("given", [CHAT_FORM, RESPONSES_FORM], ids=["chat form", "responses form"])
def test_allowed_tools_goes_to_each_openai_api_in_its_own_shape(
        given: dict[str, Any], server: ProviderServer) -> None:
    ctx = context()
    chat = ctx.to_request("openai", model=MODELS["openai"], tool_choice=given)
    assert chat["tool_choice"] == CHAT_FORM
    assert len(chat["tools"]) == 3  # every tool stays: only the choice narrows them
    responses = ctx.to_request("openai-responses", model=MODELS["openai-responses"],
                               tool_choice=given, parallel_tool_calls=False)
    assert responses["tool_choice"] == RESPONSES_FORM
    assert responses["parallel_tool_calls"] is False
    for fmt, body in (("openai", chat), ("openai-responses", responses)):
        check_sdk_type(fmt, body)
        send(server, fmt, body)


def test_allowed_tools_in_auto_mode() -> None:
    choice = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [
        {"type": "function", "function": {"name": "list_memos"}}]}}
    body = context().to_request("openai", tool_choice=choice)
    assert body["tool_choice"] == choice
    check_sdk_type("openai", body)


def test_the_callers_choice_is_not_shared_with_the_body() -> None:
    choice = copy.deepcopy(CHAT_FORM)
    body = context().to_request("openai", tool_choice=choice)
    body["tool_choice"]["allowed_tools"]["tools"].clear()
    assert choice == CHAT_FORM


def test_anthropic_has_no_allowed_tools_and_says_so() -> None:
    with pytest.raises(InvalidInputError, match=r"allowed_tools.*no equivalent in the Messages "
                                                r"API.*auto, none, required or one named tool"):
        context().to_request("anthropic", model=MODELS["anthropic"], tool_choice=CHAT_FORM)


@pytest.mark.parametrize(("choice", "message"), [
    ({**CHAT_FORM, "allowed_tools": {"mode": "required", "tools": [
        {"type": "function", "function": {"name": "send_email"}}]}},
     "tool_choice allows 'send_email', which is not among the tools"),
    ({**CHAT_FORM, "allowed_tools": {"mode": "required", "tools": []}},
     r"tool_choice \{'type': 'allowed_tools'\} allows no tool"),
    ({**CHAT_FORM, "allowed_tools": {"mode": "none", "tools": CHAT_FORM["allowed_tools"]["tools"]}},
     "mode must be 'auto' or 'required'"),
    ({**CHAT_FORM, "allowed_tools": {"mode": "auto", "tools": [{"type": "mcp"}]}},
     r"tools\[0\] must be a function tool"),
    ({"type": "allowed_tools"}, "allowed_tools must be an object"),
])
def test_a_wrong_allowed_tools_choice_is_refused_saying_what_is_wrong(
        choice: dict[str, Any], message: str) -> None:
    ctx = context()
    for fmt in ("openai", "openai-responses"):
        with pytest.raises(InvalidInputError, match=message):
            ctx.to_request(fmt, tool_choice=choice)  # type: ignore[arg-type]


def test_allowed_tools_without_tools_is_refused() -> None:
    ctx = ContextBuilder(model="gpt-4o").build(BuildPlan.named("simple_qa"),
                                                Request(user_input="hi"))
    with pytest.raises(InvalidInputError, match="needs tools, and this request has none"):
        ctx.to_request("openai", tool_choice=CHAT_FORM)


def test_an_object_of_another_kind_is_refused_naming_the_forms_taken() -> None:
    with pytest.raises(InvalidInputError, match=r"tool_choice \{'type': 'web_search'\} is not "
                                                "a form contextwright takes: auto, none"):
        context().to_request("openai", tool_choice={"type": "web_search"})
