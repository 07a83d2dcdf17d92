"""A local HTTP server that enforces the OpenAI and Anthropic APIs' documented request rules.

It runs on ``fakes.json_server`` (127.0.0.1, an ephemeral port) and answers
``POST /v1/chat/completions``, ``POST /v1/responses`` and ``POST /v1/messages`` the way the
real APIs do for a valid request (a minimal completion, response or message), and with HTTP 400
and the rule that was broken for an invalid one, so tests can send contextwright's renderings
through the official SDKs and see them accepted. The checks are written from the APIs'
documentation, independently of contextwright's own validator. Every request is recorded (path
and JSON body).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
import struct
from dataclasses import dataclass
from typing import Any

from fakes.json_server import Answer, LocalJSONServer, json_answer

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
DETAILS = ("auto", "low", "high", "original")
OPENAI_MAX_TOOLS = 128
"""Chat Completions and Responses: the most tools in a request."""
CHAT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""Chat Completions: a message's ``name`` (the speaker)."""
CHAT_CALL_ID_CHARS = 40
"""Chat Completions: the longest ``tool_calls[].id``."""
RESPONSES_CALL_ID_CHARS = 64
"""Responses: the longest ``call_id``."""
ANTHROPIC_CALL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
"""Messages: the pattern of ``tool_use.id`` and ``tool_result.tool_use_id``."""
ANTHROPIC_IMAGE_LIMIT = 5 * 1024 * 1024
"""Bytes of base64 data an Anthropic image block takes."""
ANTHROPIC_MAX_SIDE = 8000
"""Messages (vision guide, general limits): the most pixels a side of an image may have."""
ANTHROPIC_MAX_IMAGES = 100
ANTHROPIC_MAX_IMAGES_LARGE_WINDOW = 600
"""Messages (vision guide, general limits): the most images in a request, for models with a
200K-token context window and for all other models."""
ANTHROPIC_200K_MODELS = re.compile(
    r"claude-(3-.*|sonnet-4|sonnet-4-5|haiku-4-5|opus-4|opus-4-1|opus-4-5)(-\d{8}|-latest)?")
"""Models with a 200K-token window (Anthropic's models overview), as named in requests."""
ANTHROPIC_MANY_IMAGES = 20
ANTHROPIC_MANY_IMAGES_MAX_SIDE = 2000
"""Messages (vision guide, general limits): in a request with more than 20 images, the most
pixels a side of each image may have."""
ANTHROPIC_MAX_REQUEST_BYTES = 32_000_000
"""Messages (API overview, request size limits): "The API has a maximum request size of 32 MB
for standard endpoints, including the Messages API"; a larger request gets 413
``request_too_large`` (from Cloudflare, before the API reads it). Read as decimal megabytes, the
stricter of the two readings."""
OPENAI_MAX_IMAGES = 500
OPENAI_MAX_IMAGE_BYTES = 50_000_000
"""Chat Completions and Responses (images and vision guide, image input requirements): "Up to
500 individual image inputs per request" and "up to 50 MB total payload size per request" (an
earlier wording: "50 MB image bytes per request"). Measured here on the base64 text the images
are sent as, in decimal megabytes: the stricter readings."""
MAGIC = {"image/png": b"\x89PNG", "image/jpeg": b"\xff\xd8", "image/gif": b"GIF8",
         "image/webp": b"RIFF"}


class Rejected(Exception):
    """The request breaks one of the API's rules (the message says which)."""


@dataclass(frozen=True, slots=True)
class Received:
    """One request the server received."""

    path: str
    body: dict[str, Any]
    status: int
    error: str | None


# --- images ------------------------------------------------------------------------------


def _check_image_data(media_type: object, data: object, where: str) -> None:
    """Base64 of an image of the stated type (the APIs refuse a mismatch)."""
    if media_type not in IMAGE_TYPES:
        raise Rejected(f"{where}: image media type must be one of {', '.join(IMAGE_TYPES)}")
    try:
        raw = base64.b64decode(str(data), validate=True)
    except (binascii.Error, ValueError):
        raise Rejected(f"{where}: image data is not valid base64") from None
    if not raw.startswith(MAGIC[str(media_type)]):
        raise Rejected(f"{where}: image does not match the provided media type {media_type}")


def _check_openai_images(messages: list[Any]) -> None:
    """OpenAI's per-request image limits: 500 images, 50 MB of image data (data URLs)."""
    urls = [url for url in _image_urls(messages) if isinstance(url, str)]
    if len(urls) > OPENAI_MAX_IMAGES:
        raise Rejected(f"Too many images in request. Max is {OPENAI_MAX_IMAGES}, but got "
                       f"{len(urls)}.")
    data = [url.partition(";base64,")[2] for url in urls if url.startswith("data:")]
    total = sum(len(text) for text in data)
    if total > OPENAI_MAX_IMAGE_BYTES:
        raise Rejected(f"Total image size exceeds the limit of {OPENAI_MAX_IMAGE_BYTES} bytes "
                       f"per request: {total} bytes")


def _image_urls(value: object) -> list[object]:
    """The URL of every ``image_url`` / ``input_image`` part inside ``value``, in order."""
    if isinstance(value, list):
        return [url for item in value for url in _image_urls(item)]
    if not isinstance(value, dict):
        return []
    if value.get("type") == "image_url":
        image_url = value.get("image_url")
        return [image_url.get("url") if isinstance(image_url, dict) else image_url]
    if value.get("type") == "input_image":
        return [value.get("image_url")]
    return [url for key in ("content", "output") for url in _image_urls(value.get(key))]


def _check_image_url(url: object, where: str) -> None:
    """An http(s) URL, or a data: URL of base64 image data."""
    if not isinstance(url, str):
        raise Rejected(f"{where}: image url must be a string")
    if url.startswith("data:"):
        match = re.fullmatch(r"data:([^;,]+);base64,(.+)", url, re.DOTALL)
        if match is None:
            raise Rejected(f"{where}: invalid image data URL")
        _check_image_data(match.group(1), match.group(2), where)
    elif not re.fullmatch(r"https?://\S+", url):
        raise Rejected(f"{where}: invalid image URL")


# --- OpenAI Chat Completions -------------------------------------------------------------


def check_chat(body: dict[str, Any]) -> None:
    _require_model(body)
    _check_cache_key(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Rejected("messages must be a non-empty array")
    tools = body.get("tools") or []
    _check_chat_tools(tools)
    _check_openai_images(messages)
    if not tools and ("tool_choice" in body or "parallel_tool_calls" in body):
        raise Rejected("tool_choice and parallel_tool_calls are only allowed when tools are "
                       "specified")
    pending: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise Rejected(f"messages[{index}].role is invalid")
        _check_chat_content(message, index)
        if "name" in message and not CHAT_NAME.match(str(message["name"])):
            raise Rejected(f"Invalid 'messages[{index}].name': string does not match pattern. "
                           "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                raise Rejected(f"messages[{index}]: messages with role 'tool' must be a response "
                               "to a preceding message with 'tool_calls'")
            pending.remove(message["tool_call_id"])
            continue
        if pending:
            raise Rejected("an assistant message with 'tool_calls' must be followed by tool "
                           "messages responding to each 'tool_call_id'")
        if role in ("system", "developer", "user") and message.get("content") is None:
            raise Rejected(f"messages[{index}].content is required")
        calls = message.get("tool_calls") or []
        if calls and role != "assistant":
            raise Rejected(f"messages[{index}]: only assistant messages have tool_calls")
        for number, call in enumerate(calls):
            json.loads(call["function"]["arguments"])
            _check_length(call["id"], CHAT_CALL_ID_CHARS,
                          f"messages[{index}].tool_calls[{number}].id")
            pending.append(call["id"])
    if pending:
        raise Rejected("an assistant message with 'tool_calls' must be followed by tool messages")


_CHAT_PARTS = {"user": ("text", "image_url", "input_audio", "file"), "system": ("text",),
               "developer": ("text",), "assistant": ("text", "refusal"), "tool": ("text",)}


def _check_chat_content(message: dict[str, Any], index: int) -> None:
    """Content parts each role takes; images only in user messages (url, data URL, detail)."""
    content = message.get("content")
    if not isinstance(content, list):
        return
    role = message["role"]
    for number, part in enumerate(content):
        where = f"messages[{index}].content[{number}]"
        kind = part.get("type")
        if kind not in _CHAT_PARTS[role]:
            raise Rejected(f"{where}.type: Invalid value: '{kind}'. Supported values for "
                           f"role {role} are: {', '.join(_CHAT_PARTS[role])}")
        if kind == "text" and not isinstance(part.get("text"), str):
            raise Rejected(f"{where}.text is required")
        if kind == "image_url":
            image_url = part.get("image_url")
            if not isinstance(image_url, dict) or set(image_url) - {"url", "detail"}:
                raise Rejected(f"{where}.image_url takes url and detail only")
            if image_url.get("detail", "auto") not in DETAILS:
                raise Rejected(f"{where}.image_url.detail is invalid")
            _check_image_url(image_url.get("url"), where)


def _check_tool_count(tools: list[dict[str, Any]]) -> None:
    if len(tools) > OPENAI_MAX_TOOLS:
        raise Rejected(f"Invalid 'tools': array too long. Expected an array with maximum length "
                       f"{OPENAI_MAX_TOOLS}, but got an array with length {len(tools)} instead.")


def _check_chat_tools(tools: list[dict[str, Any]]) -> None:
    _check_tool_count(tools)
    for index, tool in enumerate(tools):
        function = tool.get("function") or {}
        if tool.get("type") != "function" or not TOOL_NAME.match(function.get("name", "")):
            raise Rejected(f"tools[{index}] is not a function with a valid name")
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise Rejected(f"tools[{index}].function.parameters must be an object")


# --- OpenAI Responses --------------------------------------------------------------------


def check_responses(body: dict[str, Any]) -> None:
    _require_model(body)
    _check_cache_key(body)
    items = body.get("input")
    if not isinstance(items, list) or not items:
        raise Rejected("input must be a non-empty array")
    _check_openai_images(items)
    tools = body.get("tools") or []
    _check_tool_count(tools)
    for index, tool in enumerate(tools):
        if tool.get("type") != "function" or not TOOL_NAME.match(tool.get("name", "")):
            raise Rejected(f"tools[{index}] is not a function with a valid name")
        if (tool.get("parameters") or {}).get("type") != "object":
            raise Rejected(f"tools[{index}].parameters must be an object schema")
    if not tools and ("tool_choice" in body or "parallel_tool_calls" in body):
        raise Rejected("tool_choice needs tools")
    calls: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        if kind in ("function_call", "function_call_output"):
            _check_length(item.get("call_id"), RESPONSES_CALL_ID_CHARS,
                          f"input[{index}].call_id")
        if kind == "function_call":
            json.loads(item["arguments"])
            calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item.get("call_id") not in calls:
                raise Rejected(f"input[{index}]: no tool call found for function call output "
                               f"with call_id {item.get('call_id')}")
            _check_responses_parts(item.get("output"), ("input_text", "input_image"),
                                   f"input[{index}].output")
        elif kind == "message":
            if item.get("role") not in ("user", "assistant", "system", "developer"):
                raise Rejected(f"input[{index}].role is invalid")
            if not isinstance(item.get("content"), str | list):
                raise Rejected(f"input[{index}].content is required")
            allowed = (("input_text", "input_image", "input_file") if item["role"] == "user"
                       else ("output_text", "refusal", "input_text")
                       if item["role"] == "assistant" else ("input_text",))
            _check_responses_parts(item.get("content"), allowed, f"input[{index}].content")
        else:
            raise Rejected(f"input[{index}].type {kind!r} is not supported here")


def _check_responses_parts(content: object, allowed: tuple[str, ...], where: str) -> None:
    """Parts of a message or a function call's output; ``input_image`` with url and detail."""
    if isinstance(content, str):
        return
    if not isinstance(content, list) or not content:
        raise Rejected(f"{where} must be a string or a non-empty array")
    for number, part in enumerate(content):
        kind = part.get("type")
        if kind not in allowed:
            raise Rejected(f"{where}[{number}].type: Invalid value: '{kind}'. Supported values "
                           f"are: {', '.join(allowed)}")
        if kind == "input_image":
            if part.get("detail") not in DETAILS:
                raise Rejected(f"{where}[{number}].detail is required")
            _check_image_url(part.get("image_url"), f"{where}[{number}]")
        elif not isinstance(part.get("text"), str):
            raise Rejected(f"{where}[{number}].text is required")


# --- Anthropic Messages ------------------------------------------------------------------


def check_messages(body: dict[str, Any]) -> None:
    _require_model(body)
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        raise Rejected("max_tokens: field required")
    if "system" in body:
        _check_system(body["system"])
    tools = body.get("tools") or []
    _check_anthropic_tools(tools)
    _check_cache_control(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Rejected("messages: at least one message is required")
    if messages[0].get("role") != "user":
        raise Rejected("messages: first message must use the \"user\" role")
    previous_calls: list[str] = []
    for index, message in enumerate(messages):
        blocks = _blocks(message, index)
        for block in blocks:
            _check_block(block, index, bool(tools))
            if block["type"] == "image" and message["role"] != "user":
                raise Rejected(f"messages.{index}: image blocks are only allowed in user "
                               "messages")
        if message["role"] == "user":
            results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
            if previous_calls and (blocks[: len(results)] != [b for b in blocks
                                                              if b["type"] == "tool_result"]
                                   or sorted(results) != sorted(previous_calls)):
                raise Rejected(f"messages.{index}: tool_use ids were found without tool_result "
                               "blocks immediately after")
            if results and not previous_calls:
                raise Rejected(f"messages.{index}: unexpected tool_use_id found in tool_result "
                               "blocks")
            previous_calls = []
        else:
            previous_calls = [b["id"] for b in blocks if b["type"] == "tool_use"]
    if previous_calls:
        raise Rejected("tool_use ids were found without tool_result blocks immediately after")
    _check_image_sizes(messages, str(body["model"]))
    _check_thinking(body, messages)
    last = messages[-1]
    if last["role"] == "assistant":
        tail = _blocks(last, len(messages) - 1)[-1]
        if tail["type"] == "text" and tail["text"] != tail["text"].rstrip():
            raise Rejected("final assistant content cannot end with trailing whitespace")


THINKING_TYPES = ("thinking", "redacted_thinking")


def _check_thinking(body: dict[str, Any], messages: list[dict[str, Any]]) -> None:
    """Extended thinking's rules: reasoning opens an assistant message, and with thinking on,
    the open tool loop keeps the reasoning it opened with (the API checks its signature)."""
    for index, message in enumerate(messages):
        kinds = [b["type"] for b in _blocks(message, index)]
        if any(kind in THINKING_TYPES for kind in kinds):
            if message["role"] != "assistant":
                raise Rejected(f"messages.{index}: thinking blocks are only allowed in "
                               "assistant messages")
            first_other = next((i for i, k in enumerate(kinds) if k not in THINKING_TYPES),
                               len(kinds))
            if any(k in THINKING_TYPES for k in kinds[first_other:]):
                raise Rejected(f"messages.{index}: thinking blocks must come first in the "
                               "assistant message")
    settings = body.get("thinking")
    if not isinstance(settings, dict) or settings.get("type") not in ("enabled", "adaptive"):
        return  # off (adaptive: the newer models decide how much to think, on the same rules)
    budget = settings.get("budget_tokens")
    if settings["type"] == "enabled" and (not isinstance(budget, int) or budget < 1024
                                          or budget >= body["max_tokens"]):
        raise Rejected("thinking.budget_tokens: must be >= 1024 and less than max_tokens")
    opened = max((i for i, m in enumerate(messages) if m["role"] == "user" and any(
        b["type"] != "tool_result" for b in _blocks(m, i))), default=-1)
    loop = [(i, m) for i, m in enumerate(messages) if i > opened and m["role"] == "assistant"]
    if not loop or not any(b["type"] == "tool_use" for _, m in loop for b in _blocks(m, _)):
        return
    first_index, first = loop[0]
    kind = _blocks(first, first_index)[0]["type"]
    if kind not in THINKING_TYPES:
        raise Rejected(f"messages.{first_index}.content.0.type: Expected `thinking` or "
                       f"`redacted_thinking`, but found `{kind}`. When `thinking` is enabled, a "
                       "final `assistant` message must start with a thinking block")


def _check_thinking_block(block: dict[str, Any], index: int) -> None:
    kind = block["type"]
    field = "signature" if kind == "thinking" else "data"
    if (kind == "thinking" and not isinstance(block.get("thinking"), str)) or not (
            isinstance(block.get(field), str) and block[field].strip()):
        raise Rejected(f"messages.{index}: {kind}.{field}: Field required")
    if "cache_control" in block:
        raise Rejected(f"messages.{index}: {kind} blocks cannot be marked with cache_control")


def _check_system(system: object) -> None:
    """A non-blank string, or a list of non-blank text blocks."""
    if isinstance(system, str) and system.strip():
        return
    if isinstance(system, list) and system and all(
            isinstance(b, dict) and b.get("type") == "text" and str(b.get("text", "")).strip()
            for b in system):
        return
    raise Rejected("system: text content blocks must be non-empty")


def _check_cache_control(body: dict[str, Any]) -> None:
    """At most 4 breakpoints, each ``{"type": "ephemeral"}`` (with an optional ttl)."""
    system = body.get("system")
    blocks = [*(body.get("tools") or []), *(system if isinstance(system, list) else []),
              *(b for m in body.get("messages") or [] if isinstance(m.get("content"), list)
                for b in m["content"])]
    marks = [b["cache_control"] for b in blocks if isinstance(b, dict) and "cache_control" in b]
    if len(marks) > 4:
        raise Rejected(f"A maximum of 4 blocks with cache_control may be provided. Found "
                       f"{len(marks)}.")
    for mark in marks:
        if not isinstance(mark, dict) or mark.get("type") != "ephemeral" or set(mark) - {
                "type", "ttl"} or mark.get("ttl", "5m") not in ("5m", "1h"):
            raise Rejected("cache_control: Input tag does not match 'ephemeral'")


def _check_anthropic_tools(tools: list[dict[str, Any]]) -> None:
    for index, tool in enumerate(tools):
        if not TOOL_NAME.match(tool.get("name", "")):
            raise Rejected(f"tools.{index}.name: String should match pattern")
        if (tool.get("input_schema") or {}).get("type") != "object":
            raise Rejected(f"tools.{index}.custom.input_schema.type: Field required")


def _blocks(message: dict[str, Any], index: int) -> list[dict[str, Any]]:
    if message.get("role") not in ("user", "assistant"):
        raise Rejected(f"messages.{index}.role: Input should be 'user' or 'assistant'")
    content = message.get("content")
    if isinstance(content, str):
        if not content.strip():
            raise Rejected(f"messages.{index}: text content blocks must be non-empty")
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        raise Rejected(f"messages.{index}: all messages must have non-empty content except for "
                       "the optional final assistant message")
    return content


def _check_block(block: dict[str, Any], index: int, tools: bool) -> None:
    kind = block.get("type")
    if kind == "text":
        if not block.get("text", "").strip():
            raise Rejected(f"messages.{index}: text content blocks must contain non-whitespace "
                           "text")
    elif kind in ("tool_use", "tool_result"):
        if not tools:
            raise Rejected("requests which include `tool_use` or `tool_result` blocks must "
                           "define tools")
        if kind == "tool_use" and not isinstance(block.get("input"), dict):
            raise Rejected(f"messages.{index}: tool_use.input must be an object")
        call_id = block.get("id" if kind == "tool_use" else "tool_use_id")
        if not ANTHROPIC_CALL_ID.match(str(call_id)):
            raise Rejected(f"messages.{index}.content.{kind}.id: String should match pattern "
                           "'^[a-zA-Z0-9_-]+$'")
        if kind == "tool_result" and isinstance(block.get("content"), list):
            for part in block["content"]:
                if part.get("type") not in ("text", "image", "search_result", "document"):
                    raise Rejected(f"messages.{index}: tool_result content takes text, image, "
                                   "search_result and document blocks")
                _check_block(part, index, tools)
    elif kind == "image":
        _check_anthropic_image(block.get("source"), index)
    elif kind in THINKING_TYPES:
        _check_thinking_block(block, index)
    elif kind == "search_result":
        content = block.get("content")
        if (not isinstance(block.get("source"), str) or not isinstance(block.get("title"), str)
                or not isinstance(content, list) or not content
                or any(c.get("type") != "text" for c in content)):
            raise Rejected(f"messages.{index}: search_result needs source, title and text "
                           "content")
    else:
        raise Rejected(f"messages.{index}: unsupported block type {kind!r}")


def _check_image_sizes(messages: list[dict[str, Any]], model: str) -> None:
    """The vision guide's general limits: at most 100 images (600 for a model whose window is
    not 200K tokens), at most 8000 px a side, and at most 2000 px a side when the request has
    more than 20 images (top-level or inside ``tool_result``)."""
    sizes: list[tuple[int, tuple[int, int] | None]] = []
    for index, message in enumerate(messages):
        for block in _blocks(message, index):
            parts = block.get("content") if block["type"] == "tool_result" else [block]
            for part in parts if isinstance(parts, list) else []:
                if part.get("type") == "image":
                    sizes.append((index, _base64_image_size(part["source"])))
    most = (ANTHROPIC_MAX_IMAGES if ANTHROPIC_200K_MODELS.fullmatch(model)
            else ANTHROPIC_MAX_IMAGES_LARGE_WINDOW)
    if len(sizes) > most:
        raise Rejected(f"messages: too many images: {len(sizes)}; {model} takes at most "
                       f"{most} images in a request")
    limit = (ANTHROPIC_MANY_IMAGES_MAX_SIDE if len(sizes) > ANTHROPIC_MANY_IMAGES
             else ANTHROPIC_MAX_SIDE)
    for index, size in sizes:
        if size is not None and max(size) > limit:
            kind = "many-image requests" if limit == ANTHROPIC_MANY_IMAGES_MAX_SIDE else "images"
            raise Rejected(f"messages.{index}: At least one of the image dimensions exceed max "
                           f"allowed size for {kind}: {limit} pixels")


def _base64_image_size(source: dict[str, Any]) -> tuple[int, int] | None:
    """(width, height) of a base64 image; None for a URL (the API fetches it) or an image
    whose size this server cannot read."""
    if source.get("type") != "base64":
        return None
    raw = base64.b64decode(str(source["data"]))
    if raw.startswith(b"\x89PNG") and len(raw) >= 24:
        width, height = struct.unpack(">II", raw[16:24])
        return int(width), int(height)
    if raw.startswith(b"GIF8") and len(raw) >= 10:
        width, height = struct.unpack("<HH", raw[6:10])
        return int(width), int(height)
    try:
        from PIL import Image
    except ImportError:
        return None
    try:
        with Image.open(io.BytesIO(raw)) as image:
            return image.size
    except OSError:  # a header-only test image Pillow cannot open
        return None


def _check_anthropic_image(source: object, index: int) -> None:
    if not isinstance(source, dict):
        raise Rejected(f"messages.{index}: image.source: Field required")
    if source.get("type") == "base64":
        _check_image_data(source.get("media_type"), source.get("data"), f"messages.{index}")
        size = len(str(source["data"]))  # the API measures the base64 string, not the image
        if size > ANTHROPIC_IMAGE_LIMIT:
            raise Rejected(f"messages.{index}: image exceeds 5 MB maximum: {size} bytes > "
                           f"{ANTHROPIC_IMAGE_LIMIT} bytes")
    elif source.get("type") == "url":
        if not re.fullmatch(r"https?://\S+", str(source.get("url"))):
            raise Rejected(f"messages.{index}: image.source.url is invalid")
    else:
        raise Rejected(f"messages.{index}: image.source.type must be base64 or url")


def _check_length(value: object, limit: int, where: str) -> None:
    """A string of at most ``limit`` characters (OpenAI's words for a longer one)."""
    if not isinstance(value, str):
        raise Rejected(f"Invalid '{where}': expected a string")
    if len(value) > limit:
        raise Rejected(f"Invalid '{where}': string too long. Expected a string with maximum "
                       f"length {limit}, but got a string with length {len(value)} instead.")


def _check_cache_key(body: dict[str, Any]) -> None:
    if "prompt_cache_key" in body and not isinstance(body["prompt_cache_key"], str):
        raise Rejected("prompt_cache_key: Input should be a valid string")


def _require_model(body: dict[str, Any]) -> None:
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise Rejected("model: field required")


# --- the server --------------------------------------------------------------------------

CHECKS = {"/v1/chat/completions": check_chat, "/v1/responses": check_responses,
          "/v1/messages": check_messages}


def reply_for(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """A minimal valid reply of each API."""
    model = body.get("model", "m")
    if path == "/v1/chat/completions":
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    if path == "/v1/responses":
        return {"id": "resp_1", "object": "response", "created_at": 0, "model": model,
                "status": "completed", "output": [
                    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": "ok", "annotations": []}]}],
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}


class ProviderServer(LocalJSONServer):
    """Start with ``with ProviderServer() as server:``; ``server.base_url`` ends in ``/v1``."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[Received] = []

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Answer:
        """A minimal valid reply, or 400 naming the rule the request breaks (413: too large)."""
        size = int(headers.get("content-length") or 0)
        if path == "/v1/messages" and size > ANTHROPIC_MAX_REQUEST_BYTES:
            self._record(Received(path, body, 413, "request_too_large"))
            return json_answer(413, {"type": "error", "error": {
                "type": "request_too_large",
                "message": "Request exceeds the maximum allowed number of bytes."}})
        refused = self.refusal(path, body)
        return refused if refused is not None else json_answer(200, reply_for(path, body))

    def refusal(self, path: str, body: dict[str, Any]) -> Answer | None:
        """The API's answer to a request it refuses (404, 400), else None; recorded either way."""
        check = CHECKS.get(path)
        if check is None:
            return json_answer(404, {"error": {"message": f"no route {path}"}})
        try:
            check(body)
        except (Rejected, KeyError, TypeError, ValueError, AttributeError) as exc:
            message = f"{type(exc).__name__}: {exc}"
            self._record(Received(path, body, 400, message))
            return json_answer(400, {"type": "error", "error": {
                "type": "invalid_request_error", "message": message}})
        self._record(Received(path, body, 200, None))
        return None

    def _record(self, received: Received) -> None:
        with self._lock:
            self.received.append(received)
