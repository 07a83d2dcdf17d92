"""Each rendering hands back objects of its own: a caller that edits a request body or its
messages in place (adding ``strict`` to a tool, a field to a message) changes nothing that a
later rendering of the same context shows."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.final import FinalContext
from contextwright.core.providers import PROVIDER_FORMATS, ProviderFormat
from test_images import b64, png
from test_provider_requests import WEATHER, call, result

NESTED = {"type": "function", "function": {
    "name": "find_order", "description": "Find an order.",
    "parameters": {"type": "object", "properties": {
        "filters": {"type": "object", "properties": {"status": {"type": "string",
                                                                "enum": ["open", "shut"]}}}},
        "required": ["filters"]}}}


def context() -> FinalContext:
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(png(8, 8))}"}}
    return ContextBuilder(model="gpt-4o").build(BuildPlan.named("tool_heavy"), Request(
        user_input="And the order?", system="Agent.",
        tools=[copy.deepcopy(WEATHER), copy.deepcopy(NESTED)],
        images=[image], turn=[call("c1", city="Paris"), result("c1", '{"sky": "clear"}')]))


def scribble(value: Any) -> None:
    """Edit every dict and list inside ``value`` in place, as a careless caller might."""
    if isinstance(value, dict):
        for item in list(value.values()):
            scribble(item)
        value["strict"] = True
        value["x-edited"] = ["by the caller"]
    elif isinstance(value, list):
        for item in value:
            scribble(item)
        value.append({"x-edited": True})


@pytest.mark.parametrize("fmt", PROVIDER_FORMATS)
def test_editing_a_request_body_in_place_leaves_later_renderings_alone(
        fmt: ProviderFormat) -> None:
    ctx = context()
    first = ctx.to_request(fmt, tool_choice="auto")
    before = copy.deepcopy(first)
    tool = first["tools"][0]
    tool.get("function", tool)["strict"] = True  # what callers commonly add
    scribble(first)
    assert ctx.to_request(fmt, tool_choice="auto") == before
    assert [dict(s) for s in ctx.tool_schemas] == [WEATHER, NESTED]


@pytest.mark.parametrize("fmt", PROVIDER_FORMATS)
def test_editing_rendered_messages_in_place_leaves_later_renderings_alone(
        fmt: ProviderFormat) -> None:
    ctx = context()
    first = ctx.to_messages(fmt)
    before = copy.deepcopy(first)
    scribble(first)
    assert ctx.to_messages(fmt) == before


def test_the_callers_tool_schemas_are_never_edited_through_a_body() -> None:
    tool = copy.deepcopy(NESTED)
    ctx = ContextBuilder(model="gpt-4o").build(
        BuildPlan.named("tool_heavy"), Request(user_input="find it", tools=[tool]))
    for fmt in PROVIDER_FORMATS:
        scribble(ctx.to_request(fmt))
    assert tool == NESTED
