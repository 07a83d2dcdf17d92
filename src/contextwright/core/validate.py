"""The validator every rendered message list passes before it leaves the library.

OpenAI: known roles; system messages only at the head; every block of tool messages directly
follows the assistant message whose calls it answers (each call answered exactly once, by
position); no call without its result. Anthropic: at least one message, the first and the last
are the user's (a final assistant message is a prefill: the model would continue it instead of
answering), roles alternate, no empty content or blank text block, every ``tool_use`` is
answered by a ``tool_result`` in the next user message and no result answers nothing, tool
blocks only with tools defined, object input schemas, ``max_tokens`` set, no blank system.
Responses: every ``function_call`` answered once by a ``function_call_output`` that follows it,
and no output that answers nothing. All: the count is within the available budget. A violation
is a bug in contextwright, raised as ``ValidationError`` and never shipped to a provider.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from contextwright.core.pairing import pair_results
from contextwright.errors import ValidationError

_OPENAI_ROLES = frozenset(("system", "user", "assistant", "tool"))


def check_budget(tokens: int, available: int) -> None:
    """The context must fit the available budget."""
    if tokens > available:
        raise ValidationError(f"context uses {tokens} tokens, over the available {available}")


def validate_openai(messages: Sequence[Mapping[str, Any]]) -> None:
    """Raise ``ValidationError`` unless ``messages`` is a legal OpenAI chat message list."""
    seen_other = False
    index = 0
    while index < len(messages):
        message = messages[index]
        role = message.get("role")
        if role not in _OPENAI_ROLES:
            raise ValidationError(f"messages[{index}] has an unknown role")
        if role == "system" and seen_other:
            raise ValidationError(f"messages[{index}] is a system message after the head")
        seen_other = seen_other or role != "system"
        if role == "tool":
            raise ValidationError(f"messages[{index}] is a tool result that follows no call")
        if role != "user" and _has_part(message.get("content"), "image_url"):
            raise ValidationError(f"messages[{index}] has an image outside a user message")
        index += 1
        calls = message.get("tool_calls") or []
        if calls:
            index = _check_openai_results(messages, index, [c["id"] for c in calls])


def _has_part(content: object, kind: str) -> bool:
    return isinstance(content, list) and any(
        isinstance(part, Mapping) and part.get("type") == kind for part in content)


def _check_openai_results(messages: Sequence[Mapping[str, Any]], index: int,
                          call_ids: list[str]) -> int:
    """Check the tool messages after an assistant call; returns the index after them."""
    start = index
    while index < len(messages) and messages[index].get("role") == "tool":
        index += 1
    pairing = pair_results(call_ids, [m.get("tool_call_id") for m in messages[start:index]])
    checked = index if pairing.stray is None else start + pairing.stray
    for at in range(start, checked):  # the results before a stray: as found, in order
        if _has_part(messages[at].get("content"), "image_url"):
            raise ValidationError(f"messages[{at}] is a tool message with an image")
    if pairing.stray is not None:
        raise ValidationError(f"messages[{checked}] answers no call of the message before it")
    if pairing.unanswered:
        raise ValidationError(f"a tool call before messages[{index}] has no result")
    return index


def validate_anthropic(messages: Sequence[Mapping[str, Any]]) -> None:
    """Raise ``ValidationError`` unless ``messages`` is a legal Anthropic message list."""
    if not messages:
        raise ValidationError("no messages (the Messages API needs at least one)")
    if messages[0].get("role") != "user":
        raise ValidationError("messages[0] must be a user message")
    if messages[-1].get("role") == "assistant":
        raise ValidationError(f"messages[{len(messages) - 1}], the last, is the assistant's: a "
                              "prefill the model would continue instead of answering")
    previous_calls: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise ValidationError(f"messages[{index}] has an unknown role")
        if index and messages[index - 1].get("role") == role:
            raise ValidationError(f"messages[{index}] repeats the role of the message before it")
        blocks = message.get("content") or []
        if not blocks:
            raise ValidationError(f"messages[{index}] has empty content")
        _check_anthropic_blocks(blocks, index)
        if role == "assistant" and any(b.get("type") == "image" for b in blocks):
            raise ValidationError(f"messages[{index}] has an image in an assistant message")
        if role == "user":
            answered = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
            if sorted(answered) != sorted(previous_calls):
                raise ValidationError(
                    f"messages[{index}] does not answer exactly the tool calls before it")
            previous_calls = []
        else:
            previous_calls = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    if previous_calls:
        raise ValidationError("the last assistant message has tool calls without results")


_ANTHROPIC_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def _check_anthropic_blocks(blocks: Sequence[Mapping[str, Any]], index: int) -> None:
    for block in blocks:
        if block.get("type") == "text" and not str(block.get("text", "")).strip():
            raise ValidationError(f"messages[{index}] has a blank text block")
        if block.get("type") == "tool_use" and not _ANTHROPIC_ID.match(str(block.get("id"))):
            raise ValidationError(f"messages[{index}] has a tool_use id the API refuses")


def _check_unique_calls(messages: Sequence[Mapping[str, Any]]) -> None:
    seen: set[str] = set()
    for message in messages:
        for block in message.get("content") or []:
            if block.get("type") == "tool_use":
                if block["id"] in seen:
                    raise ValidationError(f"tool_use id {block['id']!r} is used twice")
                seen.add(block["id"])


def validate_anthropic_request(body: Mapping[str, Any]) -> None:
    """Raise ``ValidationError`` unless ``body`` is a Messages API request the API accepts."""
    messages = body.get("messages", [])
    validate_anthropic(messages)
    _check_unique_calls(messages)
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValidationError("max_tokens must be set, 1 or more")
    if "system" in body and not _system_text(body["system"]).strip():
        raise ValidationError("system is empty (leave it out instead)")
    _check_breakpoints(body)
    tools = body.get("tools") or []
    for position, tool in enumerate(tools):
        schema = tool.get("input_schema")
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            raise ValidationError(f"tools[{position}].input_schema must be an object schema")
    if not tools and any(block.get("type") in ("tool_use", "tool_result")
                         for message in messages for block in message.get("content") or []):
        raise ValidationError("tool_use / tool_result blocks need tools defined")


def _system_text(system: object) -> str:
    """The text of a ``system`` given as a string or as text blocks."""
    if isinstance(system, list):
        return "".join(str(block.get("text", "")) for block in system
                       if isinstance(block, Mapping))
    return str(system)


def _check_breakpoints(body: Mapping[str, Any]) -> None:
    """At most four ``cache_control`` breakpoints, as the Messages API requires."""
    system = body.get("system")
    blocks: list[Any] = [*(body.get("tools") or []),
                         *(system if isinstance(system, list) else []),
                         *(block for message in body.get("messages", [])
                           for block in message.get("content") or [])]
    count = sum(1 for block in blocks if isinstance(block, Mapping) and "cache_control" in block)
    if count > 4:
        raise ValidationError(f"{count} cache_control breakpoints (the API allows 4)")


def validate_responses(body: Mapping[str, Any]) -> None:
    """Raise ``ValidationError`` unless ``body``'s input items are legal for the Responses API."""
    pending: set[str] = set()
    unanswered: set[str] = set()  # kept apart: a long loop is not checked call by call again
    answered: set[str] = set()
    for index, item in enumerate(body.get("input", [])):
        kind = item.get("type", "message")
        if kind == "function_call":
            pending.add(item["call_id"])
            if item["call_id"] not in answered:
                unanswered.add(item["call_id"])
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if call_id not in pending or call_id in answered:
                raise ValidationError(f"input[{index}] answers no call before it")
            answered.add(call_id)
            unanswered.discard(call_id)
        elif kind == "message":
            if item.get("role") not in ("user", "assistant", "developer", "system"):
                raise ValidationError(f"input[{index}] has an unknown role")
            if unanswered:
                raise ValidationError(f"a function call before input[{index}] has no output")
    if unanswered:
        raise ValidationError("a function call has no output")
