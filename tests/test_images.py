"""Images end to end: parts checked and sized from their own bytes, counted by each provider's
published rule, rendered natively (placeholders and notes where a format takes none), hashed
into the prefix, budgeted whole, and carried through every message form."""

from __future__ import annotations

import base64
import io
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from contextwright import BuildPlan, ContextBuilder, ContextManager, Request
from contextwright.convert import chat_messages, to_langchain, to_llama_index
from contextwright.core.cache import message_hash
from contextwright.core.images import ImagePart, image_from_part, image_header
from contextwright.core.items import Message, parse_message
from contextwright.errors import InvalidInputError
from contextwright.tokens import (
    ANTHROPIC_IMAGES,
    DEFAULT_IMAGES,
    GPT_4O_IMAGES,
    GPT_4O_MINI_IMAGES,
    TokenCount,
    patch_rule,
)
from fakes.provider_server import ProviderServer
from test_provider_requests import MODELS, check_sdk_type, send

# --- image bytes, written here -----------------------------------------------------------


def png(width: int, height: int) -> bytes:
    """A real, decodable PNG: black RGB pixels."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    rows = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                                               0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def jpeg(width: int, height: int) -> bytes:
    """SOI, a JFIF APP0 and an EXIF-like APP1 segment (to be skipped), then SOF2 and EOI."""
    app0 = b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    app1 = b"Exif\x00\x00" + b"\x00" * 300
    sof = struct.pack(">BHHB", 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return (b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", len(app0) + 2) + app0
            + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1
            + b"\xff\xff\xc2" + struct.pack(">H", len(sof) + 2) + sof + b"\xff\xd9")


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00" + b";"


def webp(width: int, height: int, kind: str) -> bytes:
    if kind == "VP8 ":
        body = b"\x00\x00\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\x00"
    elif kind == "VP8L":
        body = b"\x2f" + ((width - 1) | (height - 1) << 14).to_bytes(4, "little")
    else:
        body = (b"\x00\x00\x00\x00" + (width - 1).to_bytes(3, "little")
                + (height - 1).to_bytes(3, "little"))
    chunk = kind.encode() + struct.pack("<I", len(body)) + body
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def data_part(raw: bytes, media_type: str = "image/png", detail: str | None = None
              ) -> dict[str, Any]:
    image_url: dict[str, Any] = {"url": f"data:{media_type};base64,{b64(raw)}"}
    if detail:
        image_url["detail"] = detail
    return {"type": "image_url", "image_url": image_url}


CAT = png(64, 48)
CAT_PART = ImagePart(data=b64(CAT), media_type="image/png", detail="high")
URL_PART = ImagePart(url="https://example.invalid/chart.png")


# --- headers -------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [
    (png(640, 480), ("image/png", 640, 480)),
    (jpeg(1024, 768), ("image/jpeg", 1024, 768)),
    (gif(3, 5), ("image/gif", 3, 5)),
    (webp(300, 200, "VP8 "), ("image/webp", 300, 200)),
    (webp(4000, 16383, "VP8L"), ("image/webp", 4000, 16383)),
    (webp(20000, 9, "VP8X"), ("image/webp", 20000, 9)),
], ids=["png", "jpeg", "gif", "webp-lossy", "webp-lossless", "webp-extended"])
def test_width_and_height_are_read_from_the_image_header(raw: bytes,
                                                         expected: tuple[str, int, int]) -> None:
    assert image_header(raw) == expected
    part = ImagePart(data=b64(raw))
    assert (part.media_type, part.width, part.height) == expected


def test_headers_agree_with_pillow_on_images_it_encodes() -> None:
    from PIL import Image

    for fmt, media_type in (("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"),
                            ("WEBP", "image/webp")):
        buffer = io.BytesIO()
        Image.new("RGB", (123, 77), (200, 10, 10)).save(buffer, fmt)
        assert image_header(buffer.getvalue()) == (media_type, 123, 77), fmt


def test_truncated_or_foreign_bytes_are_not_read_as_an_image() -> None:
    for raw in (b"", b"\x89PNG\r\n\x1a\n", jpeg(10, 10)[:30], b"GIF89", b"%PDF-1.7 ...",
                b"RIFF\x00\x00\x00\x00WEBPVP8 "):
        assert image_header(raw) is None


@pytest.mark.parametrize(("fields", "message"), [
    ({"data": b64(CAT), "media_type": "image/tiff"}, "media type"),
    ({"data": "not base64!!"}, "not valid base64"),
    ({"data": b64(b"plain text, not an image")}, "not a PNG, JPEG, GIF or WebP"),
    ({"data": b64(CAT), "media_type": "image/jpeg"}, "is image/png, not"),
    ({"data": "A" * (28 * 1024 * 1024)}, "larger than 20 MB"),
    ({"url": "file:///etc/passwd"}, "http"),
    ({"url": "https://example.invalid/a b.png"}, "http"),
    ({}, "url or base64 data"),
    ({"url": "https://example.invalid/a.png", "data": b64(CAT)}, "one of them"),
    ({"url": "https://example.invalid/a.png", "detail": "ultra"}, "detail"),
    ({"url": "https://example.invalid/a.png", "width": 10}, "together"),
    ({"data": b64(CAT), "width": 65, "height": 48}, "do not match"),
])
def test_bad_images_are_typed_errors(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        ImagePart(**fields)


def test_a_bad_image_in_a_message_names_the_part_and_never_echoes_it() -> None:
    secret = b64(b"secret bytes 12345")
    with pytest.raises(InvalidInputError, match=r"history\[0\]\.content\[1\]") as error:
        Request(user_input="hi", history=[{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{secret}"}}]}],
        ).validate()
    assert secret not in str(error.value)


def test_images_only_on_user_and_tool_messages() -> None:
    for role in ("system", "assistant"):
        with pytest.raises(InvalidInputError, match="only user and tool"):
            parse_message({"role": role, "content": [data_part(CAT)]}, "m")


def test_a_data_url_is_read_into_data() -> None:
    part = ImagePart(url=f"data:image/png;base64,{b64(CAT)}")
    assert part.url is None and part.data == b64(CAT) and (part.width, part.height) == (64, 48)
    assert part.source.startswith("data:image/png;base64,")


# --- token counts --------------------------------------------------------------------------


def test_openai_tile_counts_match_the_published_examples() -> None:
    assert GPT_4O_IMAGES.count(1024, 1024, "high").tokens == 765
    assert GPT_4O_IMAGES.count(2048, 4096, "high").tokens == 1105
    assert GPT_4O_IMAGES.count(4096, 8192, "low").tokens == 85
    assert GPT_4O_IMAGES.count(None, None, "low").exact  # low costs the same whatever the size
    assert GPT_4O_IMAGES.count(512, 512, "high").tokens == 85 + 170  # never scaled up
    # gpt-4o mini: the same four tiles at its own base and tile counts.
    assert GPT_4O_MINI_IMAGES.count(1024, 1024, "high").tokens == 2833 + 4 * 5667


def test_openai_patch_counts_match_the_published_examples() -> None:
    rule = patch_rule(1.0)
    assert rule.count(1024, 1024, "auto").tokens == 1024
    assert rule.count(1800, 2400, "auto").tokens == 1452  # scaled down to 1056 x 1408
    assert patch_rule(1.62).count(1024, 1024, "high").tokens == 1659  # ceil(1024 * 1.62)
    assert rule.count(None, None, "auto") == TokenCount(1536, exact=False)


def test_anthropic_counts_match_the_published_table() -> None:
    assert ANTHROPIC_IMAGES.count(1092, 1092, "auto").tokens == 1590
    assert ANTHROPIC_IMAGES.count(200, 200, "auto").tokens == 54  # 200 * 200 / 750, up
    # Past the long-edge limit: scaled to 1568 on the long side first.
    assert ANTHROPIC_IMAGES.count(3136, 1000, "auto").tokens == (
        ANTHROPIC_IMAGES.count(1568, 500, "auto").tokens)
    assert ANTHROPIC_IMAGES.count(4000, 4000, "auto").tokens <= 1640


def test_an_unknown_size_counts_the_rules_maximum_and_says_it_is_an_estimate() -> None:
    for rule, most in ((GPT_4O_IMAGES, 85 + 8 * 170), (ANTHROPIC_IMAGES, 1640)):
        count = rule.count(None, None, "high")
        assert count.tokens == most and not count.exact
        assert all(rule.count(w, h, "high").tokens <= most
                   for w, h in ((768, 2048), (5000, 300), (2048, 2048), (10, 10000)))
    assert not DEFAULT_IMAGES.count(1024, 1024, "high").exact  # no model: larger of two


def user_with(image: ImagePart, text: str = "What is in this picture?") -> Request:
    return Request(user_input=text, images=[image])


def test_a_build_counts_the_image_by_the_models_rule_exactly() -> None:
    image = ImagePart(data=b64(png(1024, 1024)), detail="high")
    plan = BuildPlan.named("simple_qa")
    for model, image_tokens in (("gpt-4o", 765), ("gpt-4o-mini", 2833 + 4 * 5667),
                                ("claude-sonnet-4-5", 1399)):
        builder = ContextBuilder(model=model)
        with_image = builder.build(plan, user_with(image))
        without = builder.build(plan, Request(user_input="What is in this picture?"))
        assert with_image.total_tokens - without.total_tokens == image_tokens, model
        assert with_image.recount() == with_image.total_tokens
    assert ContextBuilder(model="gpt-4o").build(plan, user_with(image)).report.exact_tokens


def test_a_url_image_without_a_size_makes_the_total_an_estimate() -> None:
    builder = ContextBuilder(model="gpt-4o")
    ctx = builder.build(BuildPlan.named("simple_qa"), user_with(URL_PART))
    assert not ctx.report.exact_tokens and "(estimated)" in ctx.report.format_debug()
    sized = ImagePart(url=URL_PART.url, width=1024, height=1024, detail="high")
    assert builder.build(BuildPlan.named("simple_qa"), user_with(sized)).report.exact_tokens


# --- budget, hashing -----------------------------------------------------------------------


def test_an_image_message_is_kept_or_dropped_whole_and_the_report_says_so() -> None:
    big = ImagePart(data=b64(png(1024, 1024)), detail="high")
    history = [{"role": "user", "content": [{"type": "text", "text": "old photo"},
                                            big.to_chat_part()]},
               {"role": "assistant", "content": "A black square."},
               {"role": "user", "content": "and the weather?"},
               {"role": "assistant", "content": "Sunny."}]
    plan = BuildPlan.named("chat").with_budget(available_override=700)
    ctx = ContextBuilder(model="gpt-4o").build(plan, Request(user_input="thanks", history=history))
    assert not any(m.images for m in ctx.messages)
    assert not any("old photo" in m.content for m in ctx.messages)  # not its text alone
    dropped = [d for d in ctx.report.decisions if d.key == "history.m0"]
    assert dropped and dropped[0].action == "dropped" and "1 image(s)" in dropped[0].reason
    roomy = BuildPlan.named("chat").with_budget(available_override=4000)
    kept = ContextBuilder(model="gpt-4o").build(roomy, Request(user_input="thanks",
                                                               history=history))
    assert [m.images for m in kept.messages if m.images] == [(big,)]


def test_another_image_is_another_message_for_hashes_and_the_prefix() -> None:
    one = Message(role="user", content="look", images=(CAT_PART,))
    other = Message(role="user", content="look", images=(
        ImagePart(data=b64(png(64, 49)), detail="high"),))
    low = Message(role="user", content="look", images=(
        ImagePart(data=CAT_PART.data, detail="low"),))
    plain = Message(role="user", content="look")
    assert len({message_hash(m) for m in (one, other, low, plain)}) == 4

    def history(image: ImagePart) -> list[dict[str, Any]]:
        return [{"role": "user", "content": [{"type": "text", "text": "look"},
                                             image.to_chat_part()]},
                {"role": "assistant", "content": "Black."}]

    builder = ContextBuilder(model="gpt-4o")
    plan = BuildPlan.named("chat")
    first = builder.build(plan, Request(user_input="ok", history=history(CAT_PART)), cache=True)
    same = builder.build(plan, Request(user_input="ok", history=history(CAT_PART)),
                         previous=first)
    assert same.report.cache is not None and same.report.cache.broke_at is None
    changed = builder.build(plan, Request(user_input="ok", history=history(other.images[0])),
                            previous=first)
    assert changed.report.cache is not None and changed.report.cache.broke_key == "history"


def test_two_messages_with_the_same_words_and_other_images_are_not_duplicates() -> None:
    history = [{"role": "user", "content": [{"type": "text", "text": "this one?"},
                                            CAT_PART.to_chat_part()]},
               {"role": "assistant", "content": "A cat."},
               {"role": "user", "content": [{"type": "text", "text": "this one?"},
                                            URL_PART.to_chat_part()]},
               {"role": "assistant", "content": "A chart."}]
    ctx = ContextBuilder().build(BuildPlan.named("chat"), Request(user_input="ok",
                                                                  history=history))
    assert [m.images for m in ctx.messages if m.images] == [(CAT_PART,), (URL_PART,)]


# --- renderings ----------------------------------------------------------------------------

WEATHER = {"type": "function", "function": {
    "name": "take_screenshot", "parameters": {"type": "object", "properties": {}}}}
SHOT = ImagePart(data=b64(png(320, 200)))


def agent_request(tools: bool = True) -> Request:
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "take_screenshot", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": [
        {"type": "text", "text": "screenshot of the page"}, SHOT.to_chat_part()]}
    return Request(user_input="What does the page show? Compare with mine.", system="Agent.",
                   images=[CAT_PART, URL_PART], tools=[WEATHER] if tools else [],
                   turn=[call, result])


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


def build_agent(tools: bool = True) -> Any:
    return ContextBuilder().build(BuildPlan.named("tool_heavy"), agent_request(tools))


def test_openai_chat_renders_user_images_natively_and_tool_images_as_placeholders() -> None:
    ctx = build_agent()
    body = ctx.to_request("openai", model="gpt-4o")
    user = next(m for m in body["messages"] if m["role"] == "user")
    assert user["content"][0] == {"type": "text",
                                  "text": "What does the page show? Compare with mine."}
    assert [p["image_url"] for p in user["content"][1:]] == [
        {"url": CAT_PART.source, "detail": "high"}, {"url": URL_PART.url}]
    tool = next(m for m in body["messages"] if m["role"] == "tool")
    assert isinstance(tool["content"], str)
    assert "[image: image/png 320x200]\n<<end " in tool["content"]  # inside the fence
    assert ctx.rendering_notes("openai") == [
        "1 image(s) shown as placeholders: Chat Completions tool messages carry text only"]


def test_responses_carries_images_in_user_messages_and_function_outputs() -> None:
    body = build_agent().to_request("openai-responses", model="gpt-4o")
    user = next(i for i in body["input"] if i.get("role") == "user")
    assert [p["type"] for p in user["content"]] == ["input_text", "input_image", "input_image"]
    output = next(i for i in body["input"] if i["type"] == "function_call_output")["output"]
    assert [p["type"] for p in output] == ["input_text", "input_image", "input_text"]
    assert output[0]["text"].startswith("<<data ") and output[2]["text"].startswith("<<end ")
    assert output[1] == {"type": "input_image", "image_url": SHOT.source, "detail": "auto"}


def test_anthropic_puts_tool_images_inside_the_fenced_tool_result() -> None:
    ctx = build_agent()
    body = ctx.to_request("anthropic")
    blocks = [b for m in body["messages"] for b in m["content"]]
    result = next(b for b in blocks if b["type"] == "tool_result")
    assert [b["type"] for b in result["content"]] == ["text", "image", "text"]
    assert result["content"][1]["source"] == {"type": "base64", "media_type": "image/png",
                                              "data": SHOT.data}
    images = [b for b in blocks if b["type"] == "image"]
    assert [i["source"]["type"] for i in images] == ["base64", "url"]
    assert any("detail" in note for note in ctx.rendering_notes("anthropic"))


def test_without_tools_anthropic_tool_images_become_placeholders_and_a_note() -> None:
    ctx = build_agent(tools=False)
    body = ctx.to_request("anthropic")
    results = [b for m in body["messages"] for b in m["content"] if b["type"] == "search_result"]
    assert any("[image: image/png 320x200]" in r["content"][0]["text"] for r in results)
    assert any("search_result blocks, which carry text only" in n
               for n in ctx.rendering_notes("anthropic"))


def test_an_image_over_anthropics_5_mb_is_a_placeholder_there_only() -> None:
    small = png(16, 16)  # 6 MB of padding before its IEND chunk: the header is still read
    image = ImagePart(data=b64(small[:-12] + b"\x00" * (6 * 1024 * 1024) + small[-12:]))
    assert image.size_bytes > 5 * 1024 * 1024
    ctx = ContextBuilder().build(BuildPlan.named("simple_qa"), user_with(image))
    blocks = ctx.to_request("anthropic")["messages"][-1]["content"]
    assert [b["type"] for b in blocks] == ["text"] and "[image: image/png 16x16]" in (
        blocks[0]["text"])
    assert any("5 MB" in n for n in ctx.rendering_notes("anthropic"))
    assert ctx.to_request("openai")["messages"][-1]["content"][1]["type"] == "image_url"


def padded_png(raw_bytes: int) -> ImagePart:
    """A 16 x 16 PNG padded to ``raw_bytes`` decoded bytes (the header is still read)."""
    small = png(16, 16)
    return ImagePart(data=b64(small[:-12] + b"\x00" * (raw_bytes - len(small)) + small[-12:]))


def test_anthropics_5_mb_is_measured_on_the_base64_sent(server: ProviderServer) -> None:
    # The API counts the base64 string: 3/4 of 5 MiB decoded is 5 MiB of base64, at the limit.
    at_limit, over = padded_png(5 * 1024 * 1024 * 3 // 4), padded_png(4_500_000)
    assert at_limit.data is not None and len(at_limit.data) == 5 * 1024 * 1024
    assert over.size_bytes < 5 * 1024 * 1024 < len(over.data or "")
    for image, sent in ((at_limit, True), (over, False)):
        ctx = ContextBuilder().build(BuildPlan.named("simple_qa"), user_with(image))
        body = ctx.to_request("anthropic", model=MODELS["anthropic"])
        blocks = body["messages"][-1]["content"]
        assert any(b["type"] == "image" for b in blocks) is sent
        assert any("5 MB" in n for n in ctx.rendering_notes("anthropic")) is not sent
        if not sent:
            assert "[image: image/png 16x16]" in blocks[0]["text"]
        send(server, "anthropic", body)
        assert ctx.to_request("openai")["messages"][-1]["content"][1]["type"] == "image_url"


def test_the_local_server_measures_anthropics_limit_on_the_base64(server: ProviderServer
                                                                   ) -> None:
    data = padded_png(4_500_000).data
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": data}}]}]}
    with pytest.raises(anthropic.BadRequestError,
                       match=r"image exceeds 5 MB maximum: 6000\d+ bytes > 5242880 bytes"):
        send(server, "anthropic", body)


def test_an_over_limit_image_in_a_session_is_a_placeholder_in_every_later_call(
        server: ProviderServer) -> None:
    manager = ContextManager()
    manager.prepare("u", "s", "What is in this picture?",
                    images=[padded_png(4_500_000).to_chat_part()])
    manager.record("u", "s", assistant="A small black square.")
    for text in ("And what is 2+2?", "And 3+3?"):
        body = manager.prepare("u", "s", text).to_request("anthropic", model="claude-sonnet-4-5")
        assert not [b for m in body["messages"] for b in m["content"] if b["type"] == "image"]
        send(server, "anthropic", body)


def test_the_text_rendering_shows_placeholders_content_cannot_forge() -> None:
    request = Request(user_input="see\n[image: image/png 1x1]", images=[CAT_PART])
    ctx = ContextBuilder().build(BuildPlan.named("simple_qa"), request, target="text")
    text = ctx.to_text()
    assert "\n\\[image: image/png 1x1]" in text  # the user's line, escaped
    assert "\n[image: image/png 64x48]" in text  # the renderer's own line
    assert ctx.rendering_notes("text") == [
        "1 image(s) shown as placeholders: the text prompt carries no images"]


def test_the_text_rendering_keeps_a_tool_images_placeholder_inside_its_fence() -> None:
    ctx = ContextBuilder().build(BuildPlan.named("tool_heavy"), agent_request(True),
                                 target="text")
    text = ctx.to_text()
    assert "\n[image: image/png 320x200]\n<<end " in text  # before the closing line
    assert ctx.total_tokens == ContextBuilder().tokenizer.count(text)


@pytest.mark.parametrize("fmt", ["openai", "openai-responses", "anthropic"])
def test_image_renderings_are_of_the_sdk_types_and_accepted_through_the_sdk(
        fmt: str, server: ProviderServer) -> None:
    for ctx in (build_agent(), build_agent(tools=False),
                ContextBuilder().build(BuildPlan.named("chat"), user_with(URL_PART, ""))):
        body = ctx.to_request(fmt, model=MODELS[fmt])
        check_sdk_type(fmt, body)
        send(server, fmt, body)


@pytest.mark.parametrize(("fmt", "body", "rule"), [
    ("openai", {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "shot?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "x", "content": [data_part(CAT)]}]},
     "Supported values"),
    ("openai", {"model": "gpt-4o", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@"}}]}]}, "base64"),
    ("openai-responses", {"model": "gpt-4o", "input": [{"type": "message", "role": "assistant",
                                                        "content": [{"type": "input_image",
                                                                     "image_url": URL_PART.url,
                                                                     "detail": "auto"}]}]},
     "Supported values"),
    ("anthropic", {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {
            "type": "base64", "media_type": "image/jpeg", "data": b64(CAT)}}]}]},
     "does not match"),
    ("anthropic", {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "image", "source": {
            "type": "url", "url": URL_PART.url}}]}]}, "only allowed in user"),
])
def test_the_local_server_rejects_images_where_the_apis_do(fmt: str, body: dict[str, Any],
                                                           rule: str,
                                                           server: ProviderServer) -> None:
    with pytest.raises((openai.BadRequestError, anthropic.BadRequestError), match=rule):
        send(server, fmt, body)


# --- every message form --------------------------------------------------------------------


def conversation() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "text", "text": "Two pictures:"},
                                     CAT_PART.to_chat_part(), URL_PART.to_chat_part()],
         "id": "u1"},
        {"role": "assistant", "content": None, "id": "a1", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "take_screenshot", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": [
            {"type": "text", "text": "done"}, SHOT.to_chat_part()], "id": "t1"},
        {"role": "assistant", "content": "Both are dark.", "id": "a2"},
    ]


def images_of(messages: list[dict[str, Any]]) -> list[list[ImagePart]]:
    return [parse_message(m, "m").images for m in messages]  # type: ignore[misc]


def test_round_trips_between_every_form_keep_every_image() -> None:
    history = conversation()
    expected = [[(i.source, i.detail) for i in images] for images in images_of(history)]
    ctx = ContextBuilder().build(BuildPlan.named("tool_heavy"), Request(
        user_input="thanks", history=history, tools=[WEATHER]))
    anthropic_body = ctx.to_request("anthropic")["messages"]
    responses_body = ctx.to_request("openai-responses")["input"]
    routes = {
        "langchain": chat_messages(to_langchain(history)),
        "llama-index": chat_messages(to_llama_index(history)),
        "langchain→llama-index": chat_messages(to_llama_index(
            chat_messages(to_langchain(history)))),
        "anthropic": chat_messages(anthropic_body)[:4],
        "responses": chat_messages(responses_body)[:4],
        "anthropic→langchain→llama-index": chat_messages(to_llama_index(chat_messages(
            to_langchain(chat_messages(anthropic_body)))))[:4],
    }
    for route, back in routes.items():
        got = [[(i.source, i.detail) for i in images] for images in images_of(back)]
        if route.startswith("anthropic"):  # the Messages API has no detail hint (a note says)
            got = [[(s, d) for (s, _), (_, d) in zip(g, e, strict=True)]
                   for g, e in zip(got, expected, strict=True)]
        assert got == expected, route


def test_anthropic_and_langchain_image_forms_are_read() -> None:
    anthropic_user = {"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": b64(CAT)}},
        {"type": "image", "source": {"type": "url", "url": URL_PART.url}},
        {"type": "text", "text": "these"}]}
    langchain_blocks = {"role": "user", "content": [
        {"type": "image", "base64": b64(CAT), "mime_type": "image/png"},
        {"type": "image", "source_type": "url", "url": URL_PART.url},
        {"type": "text", "text": "these"}]}
    responses_item = {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "these"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{b64(CAT)}",
         "detail": "auto"},
        {"type": "input_image", "image_url": URL_PART.url, "detail": "auto"}]}
    for given in (anthropic_user, langchain_blocks, responses_item):
        (message,) = chat_messages(given)
        parsed = parse_message(message, "m")
        assert parsed.content == "these"
        assert [i.source for i in parsed.images] == [
            f"data:image/png;base64,{b64(CAT)}", URL_PART.url]


def test_anthropic_tool_results_with_images_and_errors_are_read() -> None:
    (result,) = chat_messages({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": [
            {"type": "text", "text": "page failed"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": b64(CAT)}}]}]})
    parsed = parse_message(result, "m")
    assert parsed.role == "tool" and parsed.content == "(tool error) page failed"
    assert [i.width for i in parsed.images] == [64]


def test_llama_index_image_blocks_and_a_local_path_is_refused(tmp_path: Any) -> None:
    from llama_index.core.base.llms.types import ImageBlock, TextBlock
    from llama_index.core.llms import ChatMessage

    message = ChatMessage(role="user", blocks=[TextBlock(text="look"), ImageBlock(image=CAT),
                                               ImageBlock(url=URL_PART.url, detail="low")])
    (chat,) = chat_messages(message)
    parsed = parse_message(chat, "m")
    assert [(i.media_type, i.width, i.detail) for i in parsed.images] == [
        ("image/png", 64, "auto"), (None, None, "low")]
    picture = tmp_path / "x.png"
    picture.write_bytes(CAT)
    with pytest.raises(InvalidInputError, match="local path"):
        chat_messages(ChatMessage(role="user", blocks=[ImageBlock(path=picture)]))


def test_openai_sdk_objects_with_images_are_read() -> None:
    from openai.types.responses import ResponseInputImage

    part = ResponseInputImage(type="input_image", detail="low", image_url=URL_PART.url)
    assert image_from_part(part.model_dump(), "p") == ImagePart(url=URL_PART.url, detail="low")


def test_prepare_and_record_carry_images_through_the_session(server: ProviderServer) -> None:
    manager = ContextManager()
    prepared = manager.prepare("u", "s", "What is this?", images=[
        CAT_PART, {"type": "image", "source": {"type": "url", "url": URL_PART.url}}])
    body = prepared.to_request("anthropic", model="claude-sonnet-4-5")
    last = body["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["text", "image", "image"]
    send(server, "anthropic", body)
    manager.record("u", "s", assistant="A cat and a chart.")
    manager.record("u", "s", messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": b64(png(8, 8))}}]}])
    again = manager.prepare("u", "s", "and now?")
    sent = again.to_request("openai", model="gpt-4o")
    parts = [p for m in sent["messages"] if isinstance(m["content"], list)
             for p in m["content"] if p["type"] == "image_url"]
    assert len(parts) == 3
    send(server, "openai", sent)
    with pytest.raises(InvalidInputError, match="images go with a user message"):
        manager.prepare("u", "s", None, images=[CAT_PART])


def test_langchain_messages_with_standard_image_blocks_are_read() -> None:
    from langchain_core.messages import HumanMessage, ToolMessage

    human = HumanMessage(content=[
        {"type": "text", "text": "these"},
        {"type": "image", "base64": b64(CAT), "mime_type": "image/png"},
        {"type": "image", "url": URL_PART.url}], id="h1")
    tool = ToolMessage(content=[{"type": "image_url", "image_url": {"url": URL_PART.url}}],
                       tool_call_id="c1", status="error")
    parsed = [parse_message(m, "m") for m in chat_messages([human, tool])]
    assert [len(m.images) for m in parsed] == [2, 1]
    assert parsed[0].id == "h1" and parsed[1].content == "(tool error) "


def test_a_snapshot_records_what_each_image_is_and_replays_with_it() -> None:
    from contextwright.observe.replay import replay, snapshot_of

    request = Request(user_input="What is this?", images=[CAT_PART, URL_PART])
    snapshot = snapshot_of(BuildPlan.named("simple_qa"), request)
    (user,) = [m for m in snapshot.messages if m["role"] == "user"]
    assert [i["media_type"] for i in user["images"]] == ["image/png", None]
    assert all("data" not in i for i in user["images"])  # what it is, never its bytes
    again = replay(snapshot, BuildPlan.named("chat"))
    (replayed,) = [m for m in again.replayed.messages if m["role"] == "user"]
    assert [i["digest"] for i in replayed["images"]] == [i["digest"] for i in user["images"]]
