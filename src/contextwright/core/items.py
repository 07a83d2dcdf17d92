"""Messages, tool calls, layers and context items: the data every build step passes along.

Pure data; nothing here does I/O. ``parse_message`` turns an OpenAI-format dict into a ``Message``
and is the single place where a malformed message is rejected. A message's images
(``core.images.ImagePart``) ride beside its text: user and tool messages may carry them.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Final, Literal, cast

from contextwright.core.caches import BoundedCache, register_cache, text_bytes
from contextwright.core.fence import fenced_body
from contextwright.core.images import ImagePart, image_from_part
from contextwright.core.parsing import (
    FINITE_NUMBERS,
    DuplicateKeyError,
    MalformedDocument,
    unique_keys,
)
from contextwright.errors import InvalidInputError

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset(("system", "user", "assistant", "tool"))


class Layer(IntEnum):
    """The context layers, L1 to L7; a lower number constrains the model more."""

    SYSTEM = 1
    """L1 system instructions and role: never cut (may be condensed by hand)."""
    TASK = 2
    """L2 the current user input: never cut."""
    TOOLS = 3
    """L3 tool definitions: loaded on demand."""
    EVIDENCE = 4
    """L4 retrieval and tool results: selected and reordered."""
    HISTORY = 5
    """L5 earlier conversation: summarised or dropped."""
    EXAMPLES = 6
    """L6 few-shot examples: cut first among guidance."""
    NOTES = 7
    """L7 reflection and scratch notes: compressed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One function call requested by the assistant."""

    id: str
    """Provider call id; results refer to it."""
    name: str
    """Function name."""
    arguments: str
    """Arguments as JSON text (validated to parse)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingBlock:
    """The model's own reasoning that came with an assistant message, kept opaque.

    Anthropic's extended thinking: a ``thinking`` block (its text and the ``signature`` that
    authenticates it) or a ``redacted_thinking`` block (encrypted ``data``). In an agent loop
    with thinking on, the Messages API refuses a request whose open tool loop lost the
    thinking it opened with, and it checks the signature: a build sends the blocks as given,
    never cut or changed.
    """

    type: Literal["thinking", "redacted_thinking"]
    text: str = ""
    """The reasoning (``thinking``); empty for ``redacted_thinking``."""
    signature: str = ""
    """Its signature (``thinking``; empty: unsigned, never sent), or the encrypted ``data``
    (``redacted_thinking``)."""

    @property
    def signed(self) -> bool:
        """Whether the provider can check it (only a signed block is sent back)."""
        return bool(self.signature.strip())

    def as_block(self) -> dict[str, str]:
        """The block as the Messages API and the chat dicts' ``thinking_blocks`` hold it."""
        if self.type == "thinking":
            return {"type": "thinking", "thinking": self.text, "signature": self.signature}
        return {"type": "redacted_thinking", "data": self.signature}


NEEDS_REASONING: Final = "needs_reasoning"
"""Metadata key of an assistant message in an open tool loop: the key of the item whose
reasoning (``Message.thinking``) the loop opened with. The provider refuses the loop without
it, so a build keeps the message only with that item (``core.builder``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """A chat message in provider-neutral form."""

    role: Role
    """One of system, user, assistant, tool."""
    content: str = ""
    """Text content ('' for an assistant message that only calls tools)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Calls requested by an assistant message."""
    tool_call_id: str | None = None
    """For a tool message: the call it answers."""
    name: str | None = None
    """For a tool message: the function name, when known."""
    id: str | None = None
    """Caller's message id, used for de-duplication."""
    timestamp: str | None = None
    """Caller's timestamp, kept as given."""
    images: tuple[ImagePart, ...] = ()
    """Images of a user or tool message, in order; they are shown after its text and are
    kept or dropped with the message, never cut."""
    thinking: tuple[ThinkingBlock, ...] = ()
    """The reasoning an assistant message came with (``thinking_blocks``), sent back only
    while its tool loop is open (``sources.conversation``); kept or dropped with the message,
    never cut."""


IMAGE_ROLES = frozenset(("user", "tool"))
"""Roles whose messages may carry images (no provider takes images from the others)."""

DETACHED_ORDER: Final = -(2**32)
"""Base ``ContextItem.order`` of items placed before their list wherever the list starts.

A session's older turns, recalled from its store, render before the request's window at
``DETACHED_ORDER`` plus their position in the session: as the window slides on, they keep
their order (and their items, and so their cached rendering). A session position below
2**31 keeps such an order below ``DETACHED_ORDER / 2``, the line ``detached`` draws between
them and positions in the list."""


def detached(order: float) -> bool:
    """Whether ``order`` is a detached position (``DETACHED_ORDER``), not one in the list."""
    return order < DETACHED_ORDER / 2


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextItem:
    """The smallest unit a source contributes."""

    key: str
    """Globally unique ``namespace.field``; the namespace must be the owning source's."""
    message: Message
    """What is rendered: role, content and any tool calls."""
    layer: Layer
    """Its layer (see ``Layer``)."""
    priority: int = 0
    """Higher wins a key conflict."""
    group: str | None = None
    """Items sharing a group (a tool call and its results) are kept or dropped together."""
    round_start: bool | None = None
    """For sources organised in rounds (history): True on the item that opens a round (the
    user message), False on the others. Items arrive newest first, so a round ends, reading
    on, after its opening unit. None for sources without rounds."""
    order: float = 0
    """Position within the source's section when rendered (chronological for history).

    Below ``DETACHED_ORDER / 2`` (``detached``): an item placed before its list at a position
    that does not move with the list's start (a session's stored turn: ``DETACHED_ORDER`` plus
    its position in the session)."""
    untrusted: bool = False
    """Data (tool output, document text, a session's zones): fenced in every rendering and
    never in the user's voice (a source offering it as a user message fails); in the system
    role it joins the system message only inside its fence."""
    truncatable: bool = False
    """The text may be cut (around the query's keywords) to fit."""
    label: str | None = None
    """Section or source label shown with the content (e.g. ``refund_policy.md §2``)."""
    raw: str | None = None
    """The original content when ``message.content`` is a compacted form of it."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Free-form provenance: timestamp, score, document, paragraph, pinned."""

    @property
    def namespace(self) -> str:
        """The part of the key before the first dot."""
        return self.key.split(".", 1)[0]


def check_text(value: object, where: str) -> str:
    """Return ``value`` if it is a string that encodes as UTF-8; else ``InvalidInputError``."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{where} must be a string")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInputError(
                f"{where} is not valid Unicode (lone surrogate at {exc.start})") from None
    return value


TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A function name every provider accepts (OpenAI's and Anthropic's own rule)."""


TOOL_ERROR_MARK = "(tool error)"
"""How a failed tool call's result says so in its text: chat messages have no error flag, so
inputs that carry one (Anthropic ``is_error``, LangChain ``status="error"``) are read into
this mark, and renderings that have one set it again (``reports_failure``). A cut keeps it at
the head, and the reduced and one-line forms of a result open with it too."""


def reports_failure(content: str) -> bool:
    """Whether a tool result's text, fenced by a build or not, opens with ``TOOL_ERROR_MARK``."""
    return fenced_body(content).startswith(TOOL_ERROR_MARK)


def _parse_tool_call(raw: object, where: str) -> ToolCall:
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where} must be an object")
    function = raw.get("function")
    if not isinstance(function, Mapping):
        raise InvalidInputError(f"{where}.function must be an object")
    name = check_text(function.get("name"), f"{where}.function.name")
    if not TOOL_NAME.fullmatch(name):
        raise InvalidInputError(f"{where}.function.name must be 1 to 64 ASCII letters, digits, "
                                "'_' or '-'")
    return ToolCall(
        id=check_text(raw.get("id"), f"{where}.id"),
        name=name,
        arguments=_tool_arguments(function.get("arguments", "{}"), f"{where}.function.arguments"),
    )


def _tool_arguments(arguments: object, where: str) -> str:
    r"""Arguments as JSON text that every provider parses alike: one object, strict JSON.

    Python's ``json`` reads ``NaN``, ``Infinity`` and numbers too large for a float (as
    infinity), and keeps the last of duplicate keys; a provider's parser may refuse them or keep
    another value, so all of these are refused here. So is an escaped lone surrogate
    (``"\ud83d"``, half an emoji): the text is ASCII, but the value it stands for is not valid
    Unicode, and a rendering that sends the parsed arguments (Anthropic's ``input``) could not
    encode it, as ``check_text`` refuses such a character in any text.
    """
    if isinstance(arguments, Mapping):
        try:
            arguments = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
        except RecursionError:
            raise InvalidInputError(_too_deep(where)) from None
        except (TypeError, ValueError):
            raise InvalidInputError(f"{where} is not a JSON object") from None
    arguments = check_text(arguments, where)
    try:
        parsed = json.loads(arguments, object_pairs_hook=unique_keys, **FINITE_NUMBERS)
    except DuplicateKeyError:
        raise InvalidInputError(f"{where} has a duplicate key") from None
    except MalformedDocument as exc:  # a number strict JSON parsers refuse
        raise InvalidInputError(f"{where}: {exc}") from None
    except RecursionError:  # valid JSON, but deeper than Python's parser can follow
        raise InvalidInputError(_too_deep(where)) from None
    except ValueError:
        raise InvalidInputError(f"{where} is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise InvalidInputError(f"{where} must be a JSON object")
    if "\\u" in arguments:  # the text is valid Unicode: only an escape can make a surrogate
        _check_encodes(parsed, where)
    return arguments


def _check_encodes(parsed: dict[str, Any], where: str) -> None:
    """``InvalidInputError`` unless the parsed arguments encode as UTF-8."""
    try:
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(
            f"{where} has an escaped lone surrogate (not valid Unicode)") from None
    except RecursionError:  # nested about as deep as json.loads allows: as it says then
        raise InvalidInputError(_too_deep(where)) from None


def _too_deep(where: str) -> str:
    """The message for arguments nested deeper than Python's JSON code can follow."""
    return f"{where} is nested too deeply to parse (about 1,000 levels at most)"


def _content(content: object, where: str) -> tuple[str, tuple[ImagePart, ...]]:
    """Text and images of string content or OpenAI content parts (text, refusal, ``image_url``).

    The text parts are joined by line breaks; the images keep their order.
    """
    if content is None:
        return "", ()
    if isinstance(content, list):
        texts = []
        images = []
        for index, part in enumerate(content):
            if isinstance(part, Mapping) and part.get("type") == "image_url":
                images.append(image_from_part(part, f"{where}[{index}]"))
                continue
            if isinstance(part, Mapping) and part.get("type") == "refusal":
                # A refusal part (an assistant message's content parts): its words, as text.
                texts.append(check_text(part.get("refusal"), f"{where}[{index}].refusal"))
                continue
            if not isinstance(part, Mapping) or part.get("type") != "text":
                raise InvalidInputError(
                    f"{where}[{index}] must be a text, refusal or image_url part")
            texts.append(check_text(part.get("text"), f"{where}[{index}].text"))
        return "\n".join(texts), tuple(images)
    return check_text(content, where), ()


_Parsed = tuple[Mapping[str, Any], dict[str, Any], Message]


def _parsed_bytes(_: int, entry: _Parsed) -> int:
    """The message's text (the dict and its copy share the caller's strings) and objects."""
    message = entry[2]
    return (text_bytes(message.content) + sum(text_bytes(c.arguments) for c in message.tool_calls)
            + 600 + 300 * len(message.tool_calls))


_PARSED: BoundedCache[int, _Parsed] = BoundedCache(
    "core.items.parsed", max_entries=200_000, share=0.15, size=_parsed_bytes)


def parse_message(raw: object, where: str) -> Message:
    """Turn an OpenAI-format message dict into a ``Message``; ``where`` names it in errors.

    A history is re-read on every turn, so parses are remembered per dict object. A remembered
    parse is used only if the very same dict (kept alive by the cache, so its id cannot be
    reused) still equals a deep copy taken when it was parsed: a message edited in place is
    parsed again.
    """
    known = parsed_unchanged(raw)
    if known is not None:
        return known
    message = _parse_message(raw, where)
    _PARSED.put(id(raw), (cast(Mapping[str, Any], raw), _snapshot(raw), message))
    return message


def parse_listed(messages: Sequence[object], where: str, index: int) -> Message:
    """``parse_message(messages[index], f"{where}[{index}]")``, naming it only when parsing.

    For loops over a long list re-read on every build: a remembered parse is checked and
    handed back without formatting a location that only an error would show.
    """
    raw = messages[index]
    known = parsed_unchanged(raw)
    return known if known is not None else parse_message(raw, f"{where}[{index}]")


def parsed_unchanged(raw: object) -> Message | None:
    """``parse_message``'s remembered parse of ``raw`` if that dict is unchanged (else None).

    For a caller that only asks whether a message it saw parsed is still the same object: no
    ``where`` to format, and nothing parsed on a miss.
    """
    if isinstance(raw, Message):
        return raw
    entry = _PARSED.get(id(raw)) or _PARSED.revive(id(raw))
    if entry is not None and entry[0] is raw and raw == entry[1]:
        return entry[2]
    return None


def parse_fresh(raw: object, where: str) -> Message:
    """``parse_message`` without remembering the parse: for a pass that reads each message once.

    The same checks and the same ``Message``; no deep copy is taken and the parse cache is left
    to the messages builds read again and again (a long history indexed whole would otherwise
    fill it with messages no build shows).
    """
    if isinstance(raw, Message):
        return raw
    return _parse_message(raw, where)


def _snapshot(value: Any) -> Any:
    """A deep copy of JSON-shaped data; anything else is left to ``copy.deepcopy``.

    Several times faster than ``copy.deepcopy`` alone, which was a fifth of a cold build.
    """
    if isinstance(value, str | int | float | bool) or value is None:
        return value  # immutable (bool and int subclasses included)
    if type(value) is dict:
        return {key: _snapshot(item) for key, item in value.items()}
    if type(value) is list:
        return [_snapshot(item) for item in value]
    if type(value) is tuple:
        return tuple(_snapshot(item) for item in value)
    return copy.deepcopy(value)


def _parse_message(raw: object, where: str) -> Message:
    # Locations (``where`` and a field) are formatted only for an error: indexing a long
    # history parses every message once, and formatting them was a fifth of each parse.
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where} must be an object")
    role = raw.get("role")
    if role == "developer":
        # OpenAI's name for the system role of its newer models (``chat_messages`` reads it the
        # same way): the developer's instructions, shown as any system message of the history.
        role = "system"
    elif role not in ROLES:
        raise InvalidInputError(f"{where}.role is not one of system, developer, user, "
                                "assistant, tool")
    calls = raw.get("tool_calls") or ()
    if calls and role != "assistant":
        raise InvalidInputError(f"{where}.tool_calls is only allowed on assistant messages")
    if not isinstance(calls, list | tuple):
        raise InvalidInputError(f"{where}.tool_calls must be a list")
    call_id = raw.get("tool_call_id")
    if role == "tool":
        call_id = _text_at(call_id, where, ".tool_call_id")
    message_id = _optional_text_at(raw.get("id"), where, ".id")
    timestamp = _optional_text_at(raw.get("timestamp"), where, ".timestamp")
    name = raw.get("name")
    content_raw = raw.get("content")
    images: tuple[ImagePart, ...] = ()
    if isinstance(content_raw, str):
        content = _text_at(content_raw, where, ".content")
    else:
        content, images = _content(content_raw, f"{where}.content")
    refusal = raw.get("refusal")
    if refusal is not None and not content:
        # The model's answer was a refusal (OpenAI's ``refusal``, content null): its words are
        # the answer, as ``chat_messages`` and ``ContextManager.record`` keep them.
        content = check_text(refusal, f"{where}.refusal")
    if images and role not in IMAGE_ROLES:
        raise InvalidInputError(f"{where}.content has images, which only user and tool "
                                "messages may carry")
    tool_calls = tuple(
        _parse_tool_call(call, f"{where}.tool_calls[{i}]") for i, call in enumerate(calls))
    if len(tool_calls) > 1:
        _check_unique_call_ids(tool_calls, where)
    blocks = raw.get("thinking_blocks")
    thinking = () if blocks is None else _thinking_blocks(blocks, role,
                                                          f"{where}.thinking_blocks")
    return Message(
        role=cast(Role, role),
        content=content,
        tool_calls=tool_calls,
        tool_call_id=call_id if isinstance(call_id, str) else None,
        name=_message_name(name, role, f"{where}.name") if isinstance(name, str) else None,
        id=message_id,
        timestamp=timestamp,
        images=images,
        thinking=thinking,
    )


def _thinking_blocks(value: object, role: object, where: str) -> tuple[ThinkingBlock, ...]:
    """An assistant message's ``thinking_blocks``, each checked (``InvalidInputError``).

    Anthropic ``thinking`` and ``redacted_thinking`` blocks, as LiteLLM's chat dicts carry them.
    """
    if value is None or (isinstance(value, list | tuple) and not value):
        return ()
    if role != "assistant":
        raise InvalidInputError(f"{where} is only allowed on assistant messages")
    if not isinstance(value, list | tuple):
        raise InvalidInputError(f"{where} must be a list")
    return tuple(_thinking_block(block, f"{where}[{i}]") for i, block in enumerate(value))


def _thinking_block(block: object, where: str) -> ThinkingBlock:
    if not isinstance(block, Mapping):
        raise InvalidInputError(f"{where} must be an object")
    kind = block.get("type")
    if kind == "thinking":
        # Unsigned reasoning (another provider's, or a stream cut short) is read, and left out
        # of what a build sends: the provider takes reasoning back only with its signature.
        signature = block.get("signature")
        return ThinkingBlock(type="thinking", text=check_text(block.get("thinking"),
                                                              f"{where}.thinking"),
                             signature="" if signature is None else check_text(
                                 signature, f"{where}.signature"))
    if kind == "redacted_thinking":
        return ThinkingBlock(type="redacted_thinking",
                             signature=_nonblank(block.get("data"), f"{where}.data"))
    raise InvalidInputError(f"{where}.type must be 'thinking' or 'redacted_thinking'")


def _nonblank(value: object, where: str) -> str:
    """A signature or encrypted data: text, not blank (the API checks it)."""
    text = check_text(value, where)
    if not text.strip():
        raise InvalidInputError(f"{where} is empty: the provider checks it, so a block "
                                "without it would be refused")
    return text


def _message_name(value: object, role: object, where: str) -> str | None:
    """A message's optional ``name``; a tool result's only when it reads as a tool's name.

    A tool result's name is shown where a tool's would be (Anthropic shows it as a
    ``search_result`` title when the request has no tools), so free text there could pass for
    something other than data. One that breaks a tool name's rule is not kept: the result is
    named after the call it answers (whose name is checked), which says the same, and a
    session stored before this rule still reads.
    """
    if not isinstance(value, str):
        return None
    name = check_text(value, where)
    if role == "tool" and not TOOL_NAME.fullmatch(name):
        return None
    return name


def _check_unique_call_ids(calls: tuple[ToolCall, ...], where: str) -> None:
    """Refuse two calls of one message with the same id.

    No result could say which of them it answers, and no provider takes the pair.
    """
    first: dict[str, int] = {}
    for index, call in enumerate(calls):
        earlier = first.setdefault(call.id, index)
        if earlier != index:
            raise InvalidInputError(f"{where}.tool_calls[{index}].id {call.id!r} repeats "
                                    f"tool_calls[{earlier}].id")


def _text_at(value: object, where: str, field: str) -> str:
    """``check_text(value, where + field)``, the location formatted only for an error."""
    if isinstance(value, str):
        if value.isascii():
            return value
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            pass  # check_text says where and why
        else:
            return value
    return check_text(value, f"{where}{field}")


def _optional_text_at(value: object, where: str, field: str) -> str | None:
    """None, or text (numbers are accepted and written as text) as ``_text_at`` checks it."""
    if value is None:
        return None
    return _text_at(value if isinstance(value, str) else str(value), where, field)


register_cache("core.items.parsed", _PARSED)
