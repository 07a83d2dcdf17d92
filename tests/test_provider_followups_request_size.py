"""Request-wide image limits: the Messages API takes requests of at most 32 MB, and OpenAI at
most 500 images and 50 MB of image data in a request. A session with many inline screenshots
would reach them and then be refused on every later call; each rendering shows the oldest
images as placeholder lines instead, and its notes say why.

Images here are small PNGs padded to the size wanted (their header says 64x48, so they cost
few tokens); one base64 string is shared by every image of a test, so only the rendered bodies
are large."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.final import FinalContext
from fakes.provider_server import ProviderServer, check_chat, check_messages, check_responses
from test_images import b64, png
from test_provider_hunt_images import SMALL, image_blocks, image_part, screenshots
from test_provider_requests import send

SHOT = png(64, 48)
ANTHROPIC_MAX_IMAGE_BYTES = 5 * 1024 * 1024
ANTHROPIC_MAX_REQUEST_BYTES = 32_000_000
OPENAI_MAX_IMAGES = 500
OPENAI_MAX_IMAGE_DATA = 50_000_000


def padded(base64_chars: int) -> str:
    """A 64x48 PNG padded with zero bytes to about ``base64_chars`` characters of base64."""
    return b64(SHOT + b"\0" * (base64_chars * 3 // 4 - len(SHOT)))


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


def wire_size(body: dict[str, Any]) -> int:
    """Bytes of the body as the SDKs send it (compact JSON, UTF-8)."""
    return len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())


def build(model: str, shots: int, data: str) -> FinalContext:
    """``shots`` earlier screenshots and one more with the question: ``shots + 1`` images."""
    return ContextBuilder(model=model).build(
        BuildPlan.named("chat"), Request(user_input="And this one?",
                                         history=screenshots(shots, data),
                                         images=[image_part(data)]))


def chat_images(body: dict[str, Any]) -> list[str]:
    return [part["image_url"]["url"] for message in body["messages"]
            if isinstance(message["content"], list)
            for part in message["content"] if part["type"] == "image_url"]


def responses_images(body: dict[str, Any]) -> list[str]:
    return [part["image_url"] for item in body["input"]
            if isinstance(item.get("content"), list)
            for part in item["content"] if part["type"] == "input_image"]


# --- Anthropic: 32 MB a request --------------------------------------------------------------


def test_the_local_server_refuses_an_anthropic_request_over_32_mb(server: ProviderServer) -> None:
    answer = server.answer("/v1/messages", {"content-length": str(32_000_001)}, {})
    assert answer.status == 413 and b"request_too_large" in answer.body


def test_anthropic_requests_stay_within_32_mb_showing_the_oldest_images_as_placeholders(
        ) -> None:
    data = padded(ANTHROPIC_MAX_IMAGE_BYTES - 200_000)  # each within the 5 MB of one image
    ctx = build("claude-sonnet-4-5", 6, data)  # 7 images: about 34 MB of base64
    body = ctx.to_request("anthropic")
    assert 6 * len(data) < ANTHROPIC_MAX_REQUEST_BYTES < 7 * len(data)
    assert sum(1 for _ in image_blocks(body)) == 6
    assert wire_size(body) <= ANTHROPIC_MAX_REQUEST_BYTES
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "shot 0\n[image: image/png 64x48]"}]
    assert body["messages"][-1]["content"][-1]["type"] == "image"  # the question's own image
    assert ctx.rendering_notes("anthropic") == [
        "1 image(s) shown as placeholders: the Messages API takes requests of at most 32 MB "
        "(their images' base64 data counted with an estimate of the rest)"]
    check_messages(body)  # the API's other rules, without sending 30 MB through the SDK


def test_a_long_text_leaves_less_room_for_images() -> None:
    data = padded(4_200_000)  # seven are 29.4 MB: within 32 MB alone
    text = "word " * 600_000  # 3 MB of text: with the seven images, over 32 MB
    ctx = ContextBuilder(model="claude-sonnet-4-6").build(
        BuildPlan.named("chat"),
        Request(user_input="And this one?", system=text, history=screenshots(6, data),
                images=[image_part(data)]))
    body = ctx.to_request("anthropic")
    assert sum(1 for _ in image_blocks(body)) == 6
    assert wire_size(body) <= ANTHROPIC_MAX_REQUEST_BYTES


# --- OpenAI: 500 images and 50 MB of image data ----------------------------------------------


def test_the_local_server_refuses_openai_requests_over_the_image_limits() -> None:
    many = {"model": "gpt-4.1", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{SMALL}"}}] * 501}]}
    with pytest.raises(Exception, match="Too many images"):
        check_chat(many)
    large = f"data:image/png;base64,{padded(17_000_000)}"  # shared: no copies
    heavy = {"model": "gpt-4.1", "input": [{"type": "message", "role": "user", "content": [
        {"type": "input_image", "image_url": large, "detail": "auto"}] * 3}]}
    with pytest.raises(Exception, match="Total image size exceeds"):
        check_responses(heavy)


def test_openai_requests_carry_the_newest_500_images(server: ProviderServer) -> None:
    ctx = build("gpt-4.1", 500, SMALL)  # 501 images
    chat = ctx.to_request("openai")
    responses = ctx.to_request("openai-responses")
    for fmt, body, sent in (("openai", chat, chat_images(chat)),
                            ("openai-responses", responses, responses_images(responses))):
        assert len(sent) == OPENAI_MAX_IMAGES
        assert ctx.rendering_notes(fmt) == [  # type: ignore[arg-type]
            "1 image(s) shown as placeholders: OpenAI takes at most 500 images in a request"]
        send(server, fmt, body)
    assert chat["messages"][0]["content"] == [
        {"type": "text", "text": "shot 0\n[image: image/png 64x48]"}]
    assert responses["input"][0]["content"] == [
        {"type": "input_text", "text": "shot 0\n[image: image/png 64x48]"}]


def test_openai_requests_carry_at_most_50_mb_of_image_data() -> None:
    part = image_part(padded(17_000_000))  # within OpenAI's 20 MB an image; three are over 50 MB
    history = [message for number in range(2) for message in (
        {"role": "user", "content": [{"type": "text", "text": f"shot {number}"}, part]},
        {"role": "assistant", "content": f"I see shot {number}."})]
    ctx = ContextBuilder(model="gpt-4.1").build(
        BuildPlan.named("chat"), Request(user_input="And this one?", history=history,
                                         images=[part]))
    for fmt, sent_of, check in (("openai", chat_images, check_chat),
                                ("openai-responses", responses_images, check_responses)):
        body = ctx.to_request(fmt)  # type: ignore[arg-type]
        sent = sent_of(body)
        assert len(sent) == 2 and sum(map(len, sent)) <= OPENAI_MAX_IMAGE_DATA + 100
        check(body)  # the API's rules, without sending another copy
        del body, sent
        assert ctx.rendering_notes(fmt) == [  # type: ignore[arg-type]
            "1 image(s) shown as placeholders: OpenAI takes at most 50 MB of image data in a "
            "request"]


def test_a_session_within_the_limits_is_rendered_as_before() -> None:
    ctx = build("gpt-4.1", 3, SMALL)
    assert len(chat_images(ctx.to_request("openai"))) == 4
    assert ctx.rendering_notes("openai") == ctx.rendering_notes("openai-responses") == []
