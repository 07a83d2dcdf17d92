"""Images the Messages API refuses by their size: over 8000 pixels a side, or over 2000 in a
request with more than 20 images. Each such image would fail every later call of its
conversation; the Anthropic rendering shows it as a placeholder line and says why."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.final import FinalContext
from contextwright.core.providers import PROVIDER_FORMATS
from fakes.provider_server import ProviderServer
from test_images import b64, png
from test_provider_requests import MODELS, WEATHER, call, check_sdk_type, send

SMALL = b64(png(64, 48))
WIDE = b64(png(2100, 8))  # over 2000 pixels across, a few bytes
TOO_WIDE = b64(png(8001, 2))


def image_part(data: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}


def screenshots(count: int, data: str = SMALL) -> list[dict[str, Any]]:
    """``count`` rounds, each a user message with one image and the assistant's answer."""
    history: list[dict[str, Any]] = []
    for number in range(count):
        history += [{"role": "user", "content": [{"type": "text", "text": f"shot {number}"},
                                                 image_part(data)]},
                    {"role": "assistant", "content": f"I see shot {number}."}]
    return history


def build(request: Request) -> FinalContext:
    return ContextBuilder(model="claude-sonnet-4-5").build(BuildPlan.named("chat"), request)


def image_blocks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The image blocks of an Anthropic body, in order (those inside tool results too)."""
    for message in body["messages"]:
        for block in message["content"]:
            inner = block.get("content") if block["type"] == "tool_result" else [block]
            yield from (b for b in inner if isinstance(b, dict) and b["type"] == "image")


def sent_data(body: dict[str, Any]) -> list[str]:
    return [block["source"]["data"] for block in image_blocks(body)]


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


def test_the_local_server_refuses_a_wide_image_among_more_than_20(
        server: ProviderServer) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png"}}
    content = [{**image, "source": {**image["source"], "data": SMALL}} for _ in range(20)]
    wide = {**image, "source": {**image["source"], "data": WIDE}}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [
        {"role": "user", "content": [*content[:19], wide, {"type": "text", "text": "?"}]}]}
    send(server, "anthropic", body)  # 20 images: 8000 pixels a side
    import anthropic
    with pytest.raises(anthropic.BadRequestError, match="many-image requests: 2000 pixels"):
        send(server, "anthropic", {**body, "messages": [
            {"role": "user", "content": [*content, wide, {"type": "text", "text": "?"}]}]})


def test_with_more_than_20_images_anthropic_gets_the_newest_20(server: ProviderServer) -> None:
    # A screenshot agent: twenty earlier images, and a wide one with this question.
    ctx = build(Request(user_input="And this one?", history=screenshots(20),
                        images=[image_part(WIDE)]))
    body = ctx.to_request("anthropic", model=MODELS["anthropic"])
    sent = sent_data(body)
    assert len(sent) == 20 and sent[-1] == WIDE  # the question's own image is sent
    first_user = body["messages"][0]["content"]
    assert first_user == [{"type": "text", "text": "shot 0\n[image: image/png 64x48]"}]
    assert ctx.rendering_notes("anthropic") == [
        "1 image(s) shown as placeholders: the Messages API takes images of at most 2000 "
        "pixels a side in a request with more than 20 images"]
    check_sdk_type("anthropic", body)
    send(server, "anthropic", body)
    for fmt in ("openai", "openai-responses"):  # OpenAI takes them all: sent as they are
        openai_body = ctx.to_request(fmt, model=MODELS[fmt])  # type: ignore[arg-type]
        assert openai_body.__repr__().count("data:image/png") == 21
        send(server, fmt, openai_body)


def test_more_than_20_images_within_2000_pixels_are_all_sent_and_wider_ones_not(
        server: ProviderServer) -> None:
    ctx = build(Request(user_input="And this one?", history=screenshots(21),
                        images=[image_part(WIDE)]))
    body = ctx.to_request("anthropic", model=MODELS["anthropic"])
    assert sent_data(body) == [SMALL] * 21  # more images than the newest 20 would show
    last = body["messages"][-1]["content"]
    assert last == [{"type": "text", "text": "And this one?\n[image: image/png 2100x8]"}]
    send(server, "anthropic", body)


def test_twenty_images_of_any_size_are_sent_as_they_are(server: ProviderServer) -> None:
    ctx = build(Request(user_input="And this one?", history=screenshots(19, WIDE),
                        images=[image_part(WIDE)]))
    body = ctx.to_request("anthropic", model=MODELS["anthropic"])
    assert sent_data(body) == [WIDE] * 20
    assert ctx.rendering_notes("anthropic") == []
    send(server, "anthropic", body)


def test_an_image_over_8000_pixels_is_a_placeholder_for_anthropic_in_any_request(
        server: ProviderServer) -> None:
    turn = [call("c1", city="Paris"), {"role": "tool", "tool_call_id": "c1", "content": [
        {"type": "text", "text": "radar"}, image_part(TOO_WIDE)]}]
    ctx = ContextBuilder(model="claude-sonnet-4-5").build(
        BuildPlan.named("tool_heavy"),
        Request(user_input="What is this?", images=[image_part(TOO_WIDE)], tools=[WEATHER],
                turn=turn))
    body = ctx.to_request("anthropic", model=MODELS["anthropic"])
    assert sent_data(body) == []
    text = repr(body["messages"])
    assert text.count("[image: image/png 8001x2]") == 2
    assert ctx.rendering_notes("anthropic") == [
        "2 image(s) shown as placeholders: the Messages API takes images of at most 8000 "
        "pixels a side"]
    check_sdk_type("anthropic", body)
    send(server, "anthropic", body)
    for fmt in PROVIDER_FORMATS:
        ctx.to_request(fmt, model=MODELS[fmt])  # every rendering within the build's budget


def test_the_local_server_refuses_more_images_than_the_models_window_allows(
        server: ProviderServer) -> None:
    import anthropic
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": SMALL}}
    body = {"max_tokens": 64, "messages": [
        {"role": "user", "content": [*[image] * 101, {"type": "text", "text": "?"}]}]}
    send(server, "anthropic", {**body, "model": "claude-sonnet-4-6"})  # a 1M-token window
    with pytest.raises(anthropic.BadRequestError, match="at most 100 images"):
        send(server, "anthropic", {**body, "model": "claude-sonnet-4-5"})


@pytest.mark.parametrize(("model", "sent"), [("claude-sonnet-4-5", 100),
                                             ("claude-sonnet-4-6", 101)])
def test_anthropic_gets_the_newest_images_its_model_takes_in_one_request(
        model: str, sent: int, server: ProviderServer) -> None:
    ctx = ContextBuilder(model=model).build(
        BuildPlan.named("chat"), Request(user_input="And now?", history=screenshots(101)))
    body = ctx.to_request("anthropic")
    assert len(sent_data(body)) == sent
    shown = body["messages"][0]["content"][0]["text"]
    if sent == 100:  # the oldest is a placeholder; the note says why
        assert shown == "shot 0\n[image: image/png 64x48]"
        assert ctx.rendering_notes("anthropic") == [
            "1 image(s) shown as placeholders: the Messages API takes at most 100 images in "
            "a request to a model with a 200K-token window"]
    else:
        assert shown == "shot 0" and ctx.rendering_notes("anthropic") == []
    check_sdk_type("anthropic", body)
    send(server, "anthropic", body)
