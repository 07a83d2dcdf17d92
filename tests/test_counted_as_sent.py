"""What a build counts is what its requests send: tool-result images a format shows as
placeholder lines, images over Anthropic's 5 MB and speakers' names Chat Completions refuses.

Each request is recounted here from the body as sent, with ``bpe_openai`` (not the library's
counting cache) in the library's units: 4 tokens of framing per message, 3 to prime the reply,
a call's name and arguments + 8, a schema's compact JSON + 8, an image by its model's published
rule. Every body is also checked against the official SDK's request type.
"""

from __future__ import annotations

import base64
import json
import struct
import warnings
import zlib
from collections.abc import Mapping
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.final import FinalContext
from contextwright.core.images import ImagePart, image_from_part
from contextwright.tokens import ANTHROPIC_IMAGES, GPT_4O_IMAGES, ImageTokenRule, patch_rule
from test_provider_requests import check_sdk_type


def _load_encoding() -> Any:
    # bpe-openai loads its files with a deprecated importlib call (an error under -W error).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return bpe_openai.get_encoding("o200k_base")


ENCODING = _load_encoding()
MESSAGE, REPLY, CALL, SCHEMA, NAME = 4, 3, 8, 8, 1
RULES: dict[str, ImageTokenRule] = {"gpt-4.1-mini": patch_rule(1.62), "gpt-4o": GPT_4O_IMAGES,
                                    "claude-sonnet-4-5": ANTHROPIC_IMAGES}


def count(text: str) -> int:
    return len(ENCODING.encode(text, disallowed_special=()))


def png(width: int, height: int, padding: int = 0) -> str:
    """Base64 of a real PNG (black pixels), ``padding`` zero bytes before its IEND chunk."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    rows = b"".join(b"\x00" + b"\x00" * width for _ in range(height))
    raw = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0,
                                                              0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows)) + b"\x00" * padding + chunk(b"IEND", b""))
    return base64.b64encode(raw).decode()


def image_part(width: int, height: int) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png(width, height)}",
                                               "detail": "high"}}


def image_cost(part: Mapping[str, Any], rule: ImageTokenRule) -> int:
    image = image_from_part(part, "a sent image")
    return rule.count(image.width, image.height, image.detail).tokens


def parts_tokens(content: Any, rule: ImageTokenRule) -> int:
    """Text and images of a message's content as sent (a string, or parts of any format)."""
    if isinstance(content, str):
        return count(content)
    total = 0
    for part in content or ():
        if part["type"] in ("text", "input_text"):
            total += count(part["text"])
        elif part["type"] == "search_result":
            total += parts_tokens(part["content"], rule)
        elif part["type"] == "tool_result":
            total += parts_tokens(part.get("content", ""), rule)
        elif part["type"] == "tool_use":
            total += count(part["name"]) + count(json.dumps(part["input"])) + CALL
        elif part["type"] == "image":
            source = part["source"]
            total += image_cost({"type": "image", "source": source}, rule)
        else:
            total += image_cost(part, rule)
    return total


def chat_tokens(body: Mapping[str, Any], rule: ImageTokenRule) -> int:
    """A Chat Completions request's tokens, from the body as sent."""
    total = REPLY
    for message in body["messages"]:
        total += MESSAGE + parts_tokens(message.get("content"), rule)
        if "name" in message:
            total += count(message["name"]) + NAME
        for call in message.get("tool_calls") or ():
            total += count(call["function"]["name"]) + count(call["function"]["arguments"]) + CALL
    return total + sum(count(json.dumps(t, ensure_ascii=False, separators=(",", ":"),
                                        sort_keys=True)) + SCHEMA for t in body.get("tools", ()))


def responses_tokens(body: Mapping[str, Any], ctx: FinalContext, rule: ImageTokenRule) -> int:
    """A Responses request's tokens: its items as sent, its tools as the build counted them."""
    total = REPLY + (MESSAGE + count(body["instructions"]) if "instructions" in body else 0)
    for item in body["input"]:
        if item["type"] == "function_call":
            total += count(item["name"]) + count(item["arguments"]) + CALL
        else:
            total += MESSAGE + parts_tokens(item.get("content", item.get("output")), rule)
    return total + sum(count(schema) + SCHEMA for schema in ctx.schema_jsons)


def anthropic_tokens(body: Mapping[str, Any], rule: ImageTokenRule) -> int:
    """A Messages request's tokens: each turn's blocks as sent, counted in OpenAI's units."""
    system = body.get("system", "")
    total = REPLY + (MESSAGE + parts_tokens(system, rule) if system else 0)
    return total + sum(MESSAGE + parts_tokens(turn["content"], rule) for turn in body["messages"])


def chart_history(rounds: int, images: int, size: int = 32) -> list[dict[str, Any]]:
    """Rounds of a chart tool: each result a line of text and ``images`` small images."""
    history: list[dict[str, Any]] = []
    for i in range(rounds):
        history += [
            {"role": "user", "content": f"show chart {i}"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": "chart", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{i}",
             "content": [{"type": "text", "text": f"chart {i}"}]
             + [image_part(size, size)] * images},
            {"role": "assistant", "content": f"Here is chart {i}."}]
    return history


CHART = {"type": "function", "function": {"name": "chart",
                                          "parameters": {"type": "object", "properties": {}}}}


def chart_request(tools: bool, images: int = 1) -> Request:
    return Request(system="You draw charts.", user_input="and now?",
                   history=chart_history(40, images), tools=[CHART] if tools else [])


# --- images a rendering shows as placeholders ------------------------------------------------


def test_chat_tool_images_are_counted_as_the_placeholders_sent() -> None:
    # An image of 32 x 32 costs GPT-4.1-mini 2 tokens; its placeholder line costs more.
    ctx = ContextBuilder(model="gpt-4.1-mini").build(
        BuildPlan.named("tool_heavy").with_budget(available_override=1500),
        chart_request(tools=True))
    body = ctx.to_request("openai")
    check_sdk_type("openai", body)
    assert any("[image: image/png 32x32]" in m["content"]
               for m in body["messages"] if m["role"] == "tool")
    assert chat_tokens(body, RULES["gpt-4.1-mini"]) == ctx.total_tokens <= ctx.available
    assert ctx.recount() == ctx.total_tokens and ctx.report.exact_tokens


@pytest.mark.parametrize("model", ["gpt-4.1-mini", "gpt-4o", "claude-sonnet-4-5"])
def test_every_rendering_of_tool_images_fits_the_budget(model: str) -> None:
    rule = RULES[model]
    for tools in (True, False):
        ctx = ContextBuilder(model=model).build(
            BuildPlan.named("tool_heavy").with_budget(available_override=1500),
            chart_request(tools=tools))
        bodies = {fmt: ctx.to_request(fmt) for fmt in ("openai", "openai-responses",
                                                       "anthropic")}
        for fmt, body in bodies.items():
            check_sdk_type(fmt, body)
        assert chat_tokens(bodies["openai"], rule) <= ctx.total_tokens <= ctx.available
        assert responses_tokens(bodies["openai-responses"], ctx, rule) <= ctx.available
        assert anthropic_tokens(bodies["anthropic"], rule) <= ctx.available, (model, tools)


def test_search_result_placeholders_are_counted_in_their_message() -> None:
    # Without tools the Messages API gets tool results as search_result blocks: text only.
    request = Request(system="You draw charts.", user_input="thanks",
                      history=chart_history(1, images=6, size=8))
    ctx = ContextBuilder(model="claude-sonnet-4-5").build(
        BuildPlan.named("chat").with_budget(available_override=2000), request)
    body = ctx.to_request("anthropic")
    check_sdk_type("anthropic", body)
    found = [b for m in body["messages"] for b in m["content"] if b["type"] == "search_result"]
    text = found[0]["content"][0]["text"]
    assert text.count("[image: image/png 8x8]") == 6
    tool = next(i for i, m in enumerate(ctx.messages) if m.role == "tool")
    assert ctx.message_tokens[tool] >= MESSAGE + count(text)


def test_a_tight_budget_without_tools_keeps_the_anthropic_request_within_it() -> None:
    ctx = ContextBuilder(model="claude-sonnet-4-5").build(
        BuildPlan.named("tool_heavy").with_budget(available_override=1200),
        chart_request(tools=False, images=6))
    body = ctx.to_request("anthropic")
    check_sdk_type("anthropic", body)
    assert "search_result blocks, which carry text only" in " ".join(
        ctx.rendering_notes("anthropic"))
    assert anthropic_tokens(body, ANTHROPIC_IMAGES) <= ctx.available


def test_an_image_over_anthropics_5_mb_is_counted_as_its_placeholder_there() -> None:
    # 16 x 16 pixels cost GPT-4.1-mini 2 tokens; over 5 MB of base64, Anthropic gets a line.
    image = ImagePart(data=png(16, 16, padding=4_500_000))
    request = Request(user_input="What is this?", images=[image])
    ctx = ContextBuilder(model="gpt-4.1-mini").build(
        BuildPlan.named("simple_qa").with_budget(available_override=40), request)
    body = ctx.to_request("anthropic")
    check_sdk_type("anthropic", body)
    assert "[image: image/png 16x16]" in body["messages"][-1]["content"][0]["text"]
    assert anthropic_tokens(body, RULES["gpt-4.1-mini"]) <= ctx.total_tokens <= ctx.available
    chat = ctx.to_request("openai")
    check_sdk_type("openai", chat)
    assert chat_tokens(chat, RULES["gpt-4.1-mini"]) < ctx.total_tokens  # the image: 2 tokens
    assert not ctx.report.exact_tokens  # an upper bound of the chat request, so estimated


def test_a_costlier_image_than_its_placeholder_is_counted_and_marked_estimated() -> None:
    # GPT-4o counts a 32 x 32 image at high detail 255 tokens: the Responses and Anthropic
    # requests send it, Chat Completions a shorter line, so the count covers the image.
    ctx = ContextBuilder(model="gpt-4o").build(BuildPlan.named("tool_heavy"),
                                               chart_request(tools=True))
    body = ctx.to_request("openai-responses")
    check_sdk_type("openai-responses", body)
    assert responses_tokens(body, ctx, GPT_4O_IMAGES) <= ctx.total_tokens
    assert chat_tokens(ctx.to_request("openai"), GPT_4O_IMAGES) < ctx.total_tokens
    assert not ctx.report.exact_tokens


# --- speakers' names -------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "sent"), [("helper_bot", True), ("helper bot", False),
                                            ("x" * 65, False)])
def test_a_speaker_name_is_counted_only_when_chat_completions_takes_it(name: str,
                                                                       sent: bool) -> None:
    history = [{"role": "user", "content": "hi"},
               {"role": "assistant", "name": name, "content": "hello there"}]
    ctx = ContextBuilder(model="gpt-4o").build(
        BuildPlan.named("chat"), Request(system="sys", user_input="ok", history=history))
    body = ctx.to_request("openai")
    check_sdk_type("openai", body)
    assert ("name" in body["messages"][2]) is sent
    assert chat_tokens(body, GPT_4O_IMAGES) == ctx.total_tokens == ctx.recount()
    assert ctx.report.exact_tokens
