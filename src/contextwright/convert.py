"""Messages in the forms people already hold, as the OpenAI chat dicts contextwright reads.

``chat_messages`` takes, in any mix: OpenAI chat message dicts and the OpenAI SDK's objects
(``ChatCompletionMessage``, a whole ``ChatCompletion``), OpenAI Responses input and output items
(``function_call``, ``function_call_output``, messages) and a whole ``Response``, Anthropic message
params and the Anthropic SDK's ``Message``, LangChain ``BaseMessage`` and LlamaIndex
``ChatMessage``. ``to_langchain`` and ``to_llama_index`` go the other way. SDK objects are read
through their ``model_dump()``, so no SDK has to be installed to use this module. Ids, names and
tool-call ids are kept. Images of user and tool messages (OpenAI ``image_url`` and
``input_image`` parts, Anthropic ``image`` blocks with a base64 or url source, LangChain's image
blocks, LlamaIndex ``ImageBlock``, ``ImagePart`` objects) become OpenAI ``image_url`` parts,
checked (``core.images``); a part a chat message cannot carry (audio, a document block, an
uploaded file's id) is refused with a typed error naming it rather than dropped, and so is an
item that is not a message (a bare content block, a Responses item of another type). The model's
own reasoning is not the conversation's text: Anthropic's thinking blocks (from Anthropic
messages, LangChain's, and LlamaIndex ``ThinkingBlock``s with their signature) are kept apart,
as the assistant message's ``thinking_blocks`` (the field LiteLLM's messages use), so a build
can send them back while their tool loop is open (the Messages API refuses such a loop without
them); Responses reasoning items and LangChain's and LlamaIndex's other reasoning are left
out. The parts of a tool the provider ran itself (hosted or server
tools: a ``Response``'s ``web_search_call`` and the like, Anthropic ``server_tool_use`` and its
``*_tool_result`` blocks, LangChain's ``server_tool_call`` / ``server_tool_result``) are left out
too: nothing of the caller's answers their call, and the model's answer after them says what
they found; so are LlamaIndex's ``CachePoint`` blocks, which mark a prompt-cache breakpoint, not
text. What is left out is counted in ``left_out`` when the caller passes one, so it can report
it. A LangChain message's call blocks
(``tool_use``, ``function_call``, ``tool_call``) are its ``tool_calls``, read from there. A
refusal keeps its words as the content, and so does an audio answer (its transcript; one
without a transcript, or a legacy ``function_call``, is refused); a failed tool result
(``is_error``, LangChain ``status="error"``) is marked ``(tool error)``. A streamed LangChain
message (``AIMessageChunk`` and the like, added up) reads like the message itself. An
assistant's text parts are joined as the model wrote them (Anthropic splits an answer around
its citations), a user's by line breaks. A
``developer`` message becomes a ``system`` message (the role the chat format and every
provider take for developer instructions). The OpenAI Agents SDK's placeholder id
(``FAKE_RESPONSES_ID``) is not kept: it names no message.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contextwright.core.images import ImagePart, image_detail, image_from_part, is_image_part
from contextwright.core.items import TOOL_ERROR_MARK, reports_failure
from contextwright.errors import InvalidInputError

__all__ = ["chat_messages", "to_langchain", "to_llama_index"]

_KEEP = ("id", "timestamp", "name", "consumed", "thinking_blocks")
"""Fields of a chat dict carried over as they are (``thinking_blocks``: an assistant's
reasoning, as LiteLLM's messages carry it)."""

PLACEHOLDER_ID = "__fake_id__"
"""The OpenAI Agents SDK's ``agents.models.fake_id.FAKE_RESPONSES_ID``: the id it gives every
item a chat-completions model returns. It names no message, and history is deduplicated by id,
so carrying it would make a conversation's different answers one."""

_MESSAGE_FIELDS = ("content", "tool_calls", "tool_call_id", "refusal")
"""What a message without a role (a caller may imply it) still has."""


def chat_messages(items: object, where: str = "messages", *,
                  left_out: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """OpenAI chat message dicts for ``items`` (one message object or a list of them).

    ``left_out``, when given, counts by type the parts no chat message carries and that are
    left out rather than refused (a hosted tool's items, a cache marker), for the caller's
    report: what a conversion leaves out is never lost without a word.
    """
    if left_out is None:
        left_out = {}
    if isinstance(items, Mapping) or _is_sdk_object(items) or isinstance(items, str | bytes):
        items = [items]
    if not isinstance(items, Iterable):
        raise InvalidInputError(f"{where} must be a message or a list of messages")
    converted: list[dict[str, Any]] = []
    run: list[Mapping[str, Any]] = []  # consecutive Responses items: a call joins its message
    run_places: list[str] = []
    for index, item in enumerate(items):
        place = f"{where}[{index}]"
        given_dict = isinstance(item, Mapping)
        if _is_sdk_object(item):
            item = _as_mapping(item, place)
        _check_types(item, place)
        if _is_responses_item(item):
            run.append(item)
            run_places.append(place)
            continue
        if run:
            converted += _from_responses_items(run, run_places, left_out)
            run, run_places = [], []
        if given_dict and _is_plain_chat(item):
            converted.append(_from_chat(item, place, keep_all=True))
        else:
            converted.extend(_convert(_as_mapping(item, place), place, left_out))
    if run:
        converted += _from_responses_items(run, run_places, left_out)
    return converted


def _check_types(item: object, place: str) -> None:
    """Refuse a ``type`` that is not a string, on the message or on one of its content parts.

    Every format tells its items and parts apart by ``type``; a list or an object there (bad
    JSON from a client) names no kind, and would otherwise fail deep in a lookup as an
    unhashable value.
    """
    if not isinstance(item, Mapping):
        return
    if "type" in item and not isinstance(item["type"], str):
        raise InvalidInputError(f"{place}.type must be a string")
    content = item.get("content")
    if isinstance(content, list):
        for index, part in enumerate(content):
            if isinstance(part, Mapping) and "type" in part and not isinstance(part["type"], str):
                raise InvalidInputError(f"{place}.content[{index}].type must be a string")


def _is_responses_item(item: object) -> bool:
    """A Responses input or output item (an Anthropic message dict also says type: message)."""
    if not isinstance(item, Mapping) or item.get("type") not in _RESPONSES_ITEMS:
        return False
    content = item.get("content")
    return "stop_reason" not in item and not (isinstance(content, list)
                                              and _is_anthropic_content(content))


HOSTED_RESPONSES_ITEMS = frozenset(("web_search_call", "file_search_call",
                                    "code_interpreter_call", "image_generation_call", "mcp_call",
                                    "mcp_list_tools"))
"""Items of the Responses API's hosted tools. The server ran the tool within one response, so
nothing of the caller's answers its call, and the model's answer after the item says what it
found: they are left out (counted in ``left_out``)."""

HOSTED_ANTHROPIC_BLOCKS = frozenset(("server_tool_use", "mcp_tool_use", "mcp_tool_result",
                                     "mcp_tool_listing", "container_upload"))
"""Anthropic's blocks of a tool its server runs (web search and fetch, code execution, MCP
connectors), besides the ``*_tool_result`` blocks (``web_search_tool_result``...): left out
like the Responses API's hosted items."""

SERVER_TOOL_BLOCKS = frozenset(("server_tool_call", "server_tool_call_chunk",
                                "server_tool_result"))
"""LangChain's standard content blocks of a provider's server-side tools."""


def is_hosted_tool_part(kind: object) -> bool:
    """Whether a block or item of type ``kind`` is part of a tool the provider ran itself.

    Anthropic names every server tool's result ``<tool>_tool_result`` (new tools keep coming),
    so that suffix counts too; the caller's own ``tool_result`` does not end with it.
    """
    return isinstance(kind, str) and (
        kind in HOSTED_RESPONSES_ITEMS or kind in HOSTED_ANTHROPIC_BLOCKS
        or kind in SERVER_TOOL_BLOCKS or kind.endswith("_tool_result"))


def log_left_out(log: logging.Logger, user_id: str, session_id: str,
                 left_out: Mapping[str, int]) -> None:
    """Say on ``log`` which parts of a recorded answer no chat message carries, by type.

    The ``record_left_out`` event of ``ContextManager.record`` and of the service clients,
    which convert SDK objects before sending: a hosted tool's items are the provider's, and a
    later build could not send them back; the model's answer after them says what they found.
    """
    counts = dict(sorted(left_out.items()))
    parts = ", ".join(f"{count} {kind}" for kind, count in counts.items())
    log.warning("record left out parts no chat message carries: %s", parts,
                extra={"contextwright": {"event": "record_left_out", "user_id": user_id,
                                         "session_id": session_id, "left_out": counts}})


def _leave_out(left_out: dict[str, int], kind: str) -> None:
    """Count one part of type ``kind`` as left out of the conversion."""
    left_out[kind] = left_out.get(kind, 0) + 1


_RESPONSES_ITEMS = frozenset(("message", "function_call", "function_call_output", "reasoning"))
"""Responses items read as messages. A hosted tool's item is left out only within a whole
``Response``, whose answer follows it; alone in a list it is refused like any item that is not
a message (the OpenAI Agents integration leaves those out itself, and its report says so)."""


def _is_plain_chat(item: Mapping[str, Any]) -> bool:
    """An OpenAI chat dict already: kept as given, its own extra fields included.

    A LlamaIndex ``ChatMessage``'s dump (``model_dump()``, or its JSON read back) has no
    ``type`` and no ``content`` either, only ``blocks``: kept as given, its text would be lost.
    """
    content = item.get("content")
    return ("type" not in item and "choices" not in item and item.get("role") != "developer"
            and not _is_llama_index(item) and not _has_other_answer(item)
            and (content is None or isinstance(content, str)))


def _has_other_answer(item: Mapping[str, Any]) -> bool:
    """An assistant's answer given as audio or as a legacy ``function_call``, not as text.

    Kept as given, the message would read as an empty answer: its words or its call lost.
    """
    return item.get("audio") is not None or item.get("function_call") is not None


def _is_llama_index(item: Mapping[str, Any]) -> bool:
    """A dumped LlamaIndex ``ChatMessage``: its text is in ``blocks``, it has no ``content``."""
    return "blocks" in item and "role" in item and "content" not in item


def _is_sdk_object(value: object) -> bool:
    return callable(getattr(value, "model_dump", None))


def _as_mapping(item: object, where: str) -> Mapping[str, Any]:
    if isinstance(item, Mapping):
        return item
    if _is_sdk_object(item):
        dumped = item.model_dump()  # type: ignore[attr-defined]
        if isinstance(dumped, Mapping):
            return dumped
    raise InvalidInputError(f"{where} must be a message object (a dict or an SDK message)")


def _convert(item: Mapping[str, Any], where: str, left_out: dict[str, int]
             ) -> list[dict[str, Any]]:
    if "choices" in item:  # a whole ChatCompletion: its first choice's message
        choices = item.get("choices") or []
        if not isinstance(choices, Sequence) or isinstance(choices, str) or not choices:
            raise InvalidInputError(f"{where} is a completion without choices")
        choice = _as_block(choices[0], f"{where}.choices[0]")
        return _convert(choice.get("message") or {}, f"{where}.choices[0].message", left_out)
    kind = item.get("type")
    if kind in _LANGCHAIN_ROLES and "additional_kwargs" in item:
        return _from_langchain(item, where, left_out)
    if _is_llama_index(item):
        return [_from_llama_index(item, where, left_out)]
    if kind == "response" or (item.get("object") == "response" and "output" in item):
        output = item.get("output") or []
        return _one_turn(_from_responses_items(
            output, [f"{where}.output[{i}]" for i in range(len(output))], left_out))
    if kind in ("function_call", "function_call_output") or (
            kind == "message" and item.get("role") is not None and "stop_reason" not in item
            and _is_responses_content(item.get("content"))):
        return _from_responses_items([item], [where], left_out)
    if isinstance(item.get("content"), list) and _is_anthropic_content(item["content"]):
        return _from_anthropic(item, where, left_out)
    return [_from_chat(item, where)]


def _as_block(value: object, where: str) -> Mapping[str, Any]:
    """``value`` as a content block or a call (an object); ``InvalidInputError`` naming it else.

    A bare string or number where a block belongs (bad JSON from a client) would otherwise
    fail deep in a lookup with an error that names nothing.
    """
    if _is_sdk_object(value):
        value = value.model_dump()  # type: ignore[attr-defined]
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where} must be an object, not {type(value).__name__}")
    return value


def _required(item: Mapping[str, Any], key: str, where: str) -> Any:
    """``item[key]``; ``InvalidInputError`` naming ``where`` when it is missing or null."""
    value = item.get(key)
    if value is None:
        raise InvalidInputError(f"{where} has no {key}")
    return value


def _block_text(block: Mapping[str, Any], where: str) -> str:
    """The ``text`` of a text block; ``InvalidInputError`` when it is not a string."""
    text = block.get("text", "")
    if not isinstance(text, str):
        raise InvalidInputError(f"{where}.text must be a string")
    return text


# --- OpenAI chat -----------------------------------------------------------------------------


def _from_chat(item: Mapping[str, Any], where: str, *, keep_all: bool = False
               ) -> dict[str, Any]:
    role = item.get("role")
    if role is None:
        _refuse_if_not_a_message(item, where)
    if keep_all:
        kept = dict(item)
        if kept.get("id") == PLACEHOLDER_ID:
            del kept["id"]
        return kept
    if role == "developer":
        role = "system"
    message: dict[str, Any] = {} if role is None else {"role": role}  # a caller may imply it
    if "content" in item:
        message["content"] = _chat_content(item["content"], where)
        if role == "assistant" and isinstance(message["content"], str) and isinstance(
                item["content"], Sequence) and not isinstance(item["content"], str):
            message["content"] = _answer_text(item["content"])
    if item.get("refusal") and not message.get("content"):
        message["content"] = item["refusal"]  # the model's answer was a refusal: keep its words
    if _has_other_answer(item) and (item.get("function_call") is not None
                                    or not message.get("content")):
        message["content"] = _other_answer_text(item, where)
    for key in _KEEP:
        value = item.get(key)
        if value is not None and not (key == "id" and value == PLACEHOLDER_ID):
            message[key] = value
    if item.get("tool_calls"):
        message["tool_calls"] = [_chat_call(call, f"{where}.tool_calls[{index}]")
                                 for index, call in enumerate(item["tool_calls"])]
    if "tool_call_id" in item:
        message["tool_call_id"] = item["tool_call_id"]
    return message


def _other_answer_text(item: Mapping[str, Any], where: str) -> str:
    """The words of an audio answer (its transcript); a typed error for what has none.

    An audio answer sent back by its id alone, or a legacy ``function_call`` (the ``functions``
    API, whose results have no call id to pair with), cannot be carried to another request.
    """
    if item.get("function_call") is not None:
        raise InvalidInputError(f"{where} holds a legacy function_call, which contextwright "
                                "cannot carry: give calls as tool_calls (with ids) and their "
                                "results as tool messages")
    audio = item.get("audio")
    transcript = audio.get("transcript") if isinstance(audio, Mapping) else None
    if not isinstance(transcript, str) or not transcript:
        raise InvalidInputError(f"{where} is an audio answer without a transcript, which "
                                "contextwright cannot carry: give its words as content")
    return transcript


def _chat_call(call: object, where: str) -> dict[str, Any]:
    """An OpenAI tool call (``id``, ``function.name``, ``function.arguments``), checked.

    Anthropic's shape (``id``, ``name``, ``input``: a ``tool_use`` block, as LlamaIndex's
    Anthropic model keeps its calls) is read too; anything else is refused naming its place.
    """
    if _is_sdk_object(call):
        call = call.model_dump()  # type: ignore[attr-defined]
    if isinstance(call, Mapping) and "id" in call:  # its value is checked with the message
        function = call.get("function")
        if isinstance(function, Mapping) and "name" in function:
            return {"id": call["id"], "type": "function",
                    "function": {"name": function["name"],
                                 "arguments": function.get("arguments") or "{}"}}
        if "name" in call and isinstance(call.get("input"), Mapping | None):
            return {"id": call["id"], "type": "function", "function": {
                "name": call["name"],
                "arguments": json.dumps(call.get("input") or {}, ensure_ascii=False)}}
    raise InvalidInputError(f"{where} is not a tool call: it needs an id and either "
                            "function.name and function.arguments (OpenAI) or name and input "
                            "(Anthropic)")


def _refuse_if_not_a_message(item: Mapping[str, Any], where: str) -> None:
    """Refuse a role-less item that is no message (read as one, it would be an empty message).

    A caller may leave the role out (``record`` implies it), but then the item still has a
    message's fields; a content block or another kind of item has a ``type`` instead.
    """
    kind = item.get("type")
    if kind == "message":
        raise InvalidInputError(f"{where} is a message item without a role")
    if kind is not None:
        raise InvalidInputError(
            f"{where} is a {kind!r} item, not a message: contextwright reads whole messages (a "
            "content block goes inside one's content) and the Responses items message, "
            "function_call, function_call_output and reasoning")
    if not any(key in item for key in _MESSAGE_FIELDS):
        raise InvalidInputError(f"{where} is not a message: it has no role, content or tool "
                                "calls")


Content = str | list[dict[str, Any]] | None
"""Chat content: text, or OpenAI parts (text and ``image_url``) when there are images."""


def _chat_content(content: object, where: str) -> Content:
    """Text, or text and image parts in their order when the content has images."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return _parts_content([(part, f"{where}.content[{index}]")
                               for index, part in enumerate(content)])
    raise InvalidInputError(f"{where}.content must be text or a list of text and image parts")


def _parts_content(parts: Sequence[tuple[object, str]]) -> Content:
    """Content of ``(part, its place)`` pairs: text, or text and image parts in their order."""
    if not any(is_image_part(part) for part, _ in parts):
        return "\n".join(_text_part(part, place) for part, place in parts)
    return [image_from_part(part, place).to_chat_part() if is_image_part(part)
            else {"type": "text", "text": _text_part(part, place)}
            for part, place in parts]


_ANSWER_TEXT_PARTS = frozenset(("text", "output_text"))


def _answer_text(parts: Sequence[object]) -> str:
    """The text of an assistant's content parts, as the model wrote it.

    A model's answer comes as pieces: Anthropic splits it around each citation ("According to
    the policy, " then "refunds take 15 days" with its citation, then "."), and the Responses
    API's ``output_text`` joins its parts as they are. Adjacent text parts are one run of
    text, joined without a separator; a block between them (a tool call, a server tool's
    result) ends a run, and runs are joined by a line break. Checked already: every part is
    text or a block the caller's reader left out.
    """
    runs: list[list[str]] = [[]]
    for part in parts:
        if isinstance(part, str):
            runs[-1].append(part)
        elif isinstance(part, Mapping) and part.get("type") in _ANSWER_TEXT_PARTS:
            runs[-1].append(str(part.get("text") or ""))
        elif isinstance(part, Mapping) and part.get("type") == "refusal":
            runs[-1].append(str(part.get("refusal") or ""))
        elif runs[-1]:
            runs.append([])
    return "\n".join(text for text in ("".join(run) for run in runs) if text)


def _text_of(content: Content) -> str:
    """The text of chat content (its text parts joined)."""
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content if part.get("type") == "text")
    return content or ""


def _joined(texts: list[str], images: list[dict[str, Any]], joiner: str = "\n") -> Content:
    """Content of separate texts and image parts: text, or a text part then the images."""
    text = joiner.join(texts)
    if not images:
        return text
    return [{"type": "text", "text": text}, *images] if text else images


def _text_part(part: object, where: str) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, Mapping) and part.get("type") in ("text", "input_text", "output_text"):
        text = part.get("text")
        if isinstance(text, str):
            return text
    if isinstance(part, Mapping) and part.get("type") == "refusal":
        refusal = part.get("refusal")  # the model's answer was a refusal: keep its words
        if isinstance(refusal, str):
            return refusal
    kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
    raise InvalidInputError(f"{where} is a {kind!r} part, which contextwright cannot carry "
                            "(text and image parts only)")


# --- OpenAI Responses ------------------------------------------------------------------------


def _is_responses_content(content: object) -> bool:
    return isinstance(content, list) and any(
        isinstance(p, Mapping) and p.get("type") in ("input_text", "output_text")
        for p in content)


def _from_responses_items(items: Sequence[Mapping[str, Any]], places: Sequence[str],
                          left_out: dict[str, int]) -> list[dict[str, Any]]:
    """Chat dicts of consecutive Responses items; ``places`` names each item in errors."""
    messages: list[dict[str, Any]] = []
    for item, place in zip(items, places, strict=True):
        kind = item.get("type", "message")
        if kind == "function_call":
            call = {"id": _required(item, "call_id", place), "type": "function",
                    "function": {"name": _required(item, "name", place),
                                 "arguments": item.get("arguments") or "{}"}}
            if messages and messages[-1]["role"] == "assistant" and not messages[-1].get(
                    "tool_call_id"):
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": _required(item, "call_id", place),
                             "content": _output_text(item.get("output"), place)})
        elif kind == "message":
            message = _from_chat(item, place)
            if _answers_nothing_yet(messages) and _is_assistant_text(message):
                _join_text(messages[-1], message)
            else:
                messages.append(message)
        elif kind == "reasoning":
            continue  # the model's own reasoning summary: not part of the conversation's text
        elif kind in HOSTED_RESPONSES_ITEMS:
            _leave_out(left_out, kind)
        else:
            raise InvalidInputError(f"{place} is a {kind!r} item, which contextwright cannot "
                                    "carry")
    return messages


def _answers_nothing_yet(messages: list[dict[str, Any]]) -> bool:
    """Whether the last message is an assistant's calls that no output has answered yet.

    An assistant's message item right after them is of the same response (a response's
    output may hold its text after its calls, and the next response needs their outputs
    first), so it joins them: as a message of its own it would stand between the calls and
    their results.
    """
    return bool(messages) and messages[-1]["role"] == "assistant" and bool(
        messages[-1].get("tool_calls"))


def _is_assistant_text(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "assistant" and isinstance(message.get("content"), str | None)


def _join_text(calls: dict[str, Any], message: Mapping[str, Any]) -> None:
    """Add ``message``'s text (and its id, when the calls have none) to the calls' message."""
    texts = [text for text in (calls.get("content"), message.get("content")) if text]
    calls["content"] = "\n\n".join(texts) if texts else None
    for key, value in message.items():
        if key not in ("role", "content"):
            calls.setdefault(key, value)


def _one_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A whole ``Response``'s messages as the one assistant message of its turn.

    Its output may hold the assistant's text after its calls (``function_call``, then a
    message): as two chat messages, the call's result would not follow its call. Texts are
    joined in order; calls keep theirs. Output with parts other than text stays as it is.
    """
    if len(messages) < 2 or any(m.get("role") != "assistant" or not isinstance(
            m.get("content"), str | None) for m in messages):
        return messages
    merged: dict[str, Any] = {}
    for message in messages:
        for key, value in message.items():
            merged.setdefault(key, value)
    texts = [m["content"] for m in messages if m.get("content")]
    merged["content"] = "\n\n".join(texts) if texts else None
    calls = [call for m in messages for call in m.get("tool_calls") or ()]
    if calls:
        merged["tool_calls"] = calls
    return [merged]


def _output_text(output: object, where: str) -> Content:
    if isinstance(output, str):
        return output
    return _chat_content(output, where) or ""


# --- Anthropic -------------------------------------------------------------------------------


_ANTHROPIC_ONLY = frozenset(("tool_use", "tool_result", "thinking", "redacted_thinking",
                             *HOSTED_ANTHROPIC_BLOCKS))
_ANTHROPIC_ONLY_NAMES = "tool_use, tool_result, thinking or a server tool's blocks"


def _is_anthropic_content(blocks: Sequence[Any]) -> bool:
    """Blocks only Anthropic has (text blocks alone read the same in both formats)."""
    return any(isinstance(b, Mapping) and (b.get("type") in _ANTHROPIC_ONLY or (
        str(b.get("type")).endswith("_tool_result"))) for b in blocks)


def _from_anthropic(item: Mapping[str, Any], where: str, left_out: dict[str, int]
                    ) -> list[dict[str, Any]]:
    """An Anthropic message; none when it held only a server tool's blocks.

    An empty assistant message would say the model answered nothing, where it used a tool
    its provider ran (its answer comes in the next message).
    """
    role = item.get("role")
    blocks = [_as_block(block, f"{where}.content[{index}]")
              for index, block in enumerate(item["content"])]
    if role == "user":
        return _anthropic_user(blocks, where)
    if role not in ("assistant", None):  # a caller may imply the assistant's (``record``)
        raise InvalidInputError(f"{where}.role must be user or assistant: an Anthropic "
                                f"message (its content has {_ANTHROPIC_ONLY_NAMES}) has no "
                                f"role {role!r}")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    thinking: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        kind = block.get("type")
        place = f"{where}.content[{index}]"
        if kind == "text":
            texts.append(_block_text(block, place))
        elif kind == "tool_use":
            calls.append({"id": _required(block, "id", place), "type": "function", "function": {
                "name": _required(block, "name", place),
                "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False)}})
        elif kind in THINKING_BLOCKS:
            thinking.append(thinking_block(block))
        elif is_hosted_tool_part(kind):
            _leave_out(left_out, str(kind))
        else:
            raise InvalidInputError(f"{where}.content[{index}] is a {kind!r} block, which "
                                    "contextwright cannot carry")
    if not (texts or calls or thinking) and blocks:
        return []
    message: dict[str, Any] = {"role": "assistant", "content": _answer_text(blocks) or None}
    if calls:
        message["tool_calls"] = calls
    if thinking:
        message["thinking_blocks"] = thinking
    if item.get("id") is not None and item.get("type") != "message":
        message["id"] = item["id"]
    return [message]


THINKING_BLOCKS = frozenset(("thinking", "redacted_thinking"))
"""Anthropic's reasoning blocks, carried as an assistant message's ``thinking_blocks``."""


def thinking_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """A ``thinking`` / ``redacted_thinking`` block with the fields the API takes back.

    Checked when the message is read (``core.items``); other fields (a framework's stream
    index) are not the provider's and are not sent.
    """
    if block.get("type") == "thinking":
        return {"type": "thinking", "thinking": block.get("thinking"),
                "signature": block.get("signature")}
    return {"type": "redacted_thinking", "data": block.get("data")}


def _anthropic_user(blocks: Sequence[Mapping[str, Any]], where: str) -> list[dict[str, Any]]:
    """Tool results become ``tool`` messages (first, as the API orders them), text the user's."""
    results: list[dict[str, Any]] = []
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        kind = block.get("type")
        place = f"{where}.content[{index}]"
        if kind == "tool_result":
            content = _anthropic_result_text(block.get("content"), place)
            results.append({"role": "tool",
                            "tool_call_id": _required(block, "tool_use_id", place),
                            "content": _error_marked(content, bool(block.get("is_error")))})
        elif kind == "text":
            texts.append(_block_text(block, place))
        elif kind == "image":
            images.append(image_from_part(block, place).to_chat_part())
        else:
            raise InvalidInputError(f"{place} is a {kind!r} block, which contextwright cannot "
                                    "carry")
    if texts or images:
        results.append({"role": "user", "content": _joined(texts, images)})
    return results


def _error_marked(content: Content, failed: bool) -> Content:
    """A failed tool's result says so in its text (chat messages have no error flag)."""
    if not failed:
        return content
    if isinstance(content, list):
        text = _text_of(content)
        images = [part for part in content if part.get("type") != "text"]
        return _joined([_error_marked(text, True)], images)  # type: ignore[list-item]
    text = content or ""
    return text if text.startswith(TOOL_ERROR_MARK) else f"{TOOL_ERROR_MARK} {text}"


def _anthropic_result_text(content: object, where: str) -> Content:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return _chat_content(content, where) or ""


# --- LangChain and LlamaIndex ----------------------------------------------------------------

_LANGCHAIN_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool",
                    "developer": "system",
                    # A streamed message (``model.stream()`` added up, as agents keep it) is a
                    # chunk of its kind, whole once added up: read like the message itself.
                    "HumanMessageChunk": "user", "AIMessageChunk": "assistant",
                    "SystemMessageChunk": "system", "ToolMessageChunk": "tool"}


_LANGCHAIN_CALL_BLOCKS = {"tool_use": "id", "function_call": "call_id", "tool_call": "id"}
"""Content blocks that repeat one of the message's ``tool_calls`` (ChatAnthropic's ``tool_use``,
ChatOpenAI's Responses ``function_call``, LangChain's standard ``tool_call``), with the field
that holds the call's id."""

_LANGCHAIN_REASONING_BLOCKS = frozenset(("reasoning", "thinking", "redacted_thinking"))
"""The model's own reasoning (Responses and standard ``reasoning``, Anthropic's thinking): not
the conversation's text. Anthropic's thinking blocks are kept apart (``thinking_blocks``)."""


def _from_langchain(item: Mapping[str, Any], where: str, left_out: dict[str, int]
                    ) -> list[dict[str, Any]]:
    """A LangChain ``BaseMessage`` (dumped): ``tool_calls`` carry parsed ``args``.

    No message for an answer that held only a hosted tool's blocks: an empty assistant message
    would say the model answered nothing.
    """
    role = _LANGCHAIN_ROLES[item["type"]]
    calls = item.get("tool_calls") or []
    invalid = [call for call in item.get("invalid_tool_calls") or () if call.get("id")]
    content = item.get("content")
    thinking = [thinking_block(part) for part in content if isinstance(part, Mapping)
                and part.get("type") in THINKING_BLOCKS] if isinstance(content, list) else []
    if not isinstance(content, list):
        text = _chat_content(content, where)
    else:
        hosted = sum(left_out.values())
        parts = _langchain_parts(content, [*calls, *invalid], where, left_out)
        if (role == "assistant" and not (parts or calls or invalid or thinking)
                and sum(left_out.values()) > hosted):
            return []
        text = _parts_content(parts)
        if role == "assistant" and isinstance(text, str):
            text = _answer_text(content)
    message: dict[str, Any] = {"role": role, "content": text}
    if thinking and role == "assistant":
        message["thinking_blocks"] = thinking  # ChatAnthropic's: sent back in an open loop
    if role == "tool" and item.get("status") == "error":
        message["content"] = _error_marked(message["content"] or "", True)
    if calls or invalid:
        raw = _raw_arguments(item)
        message["tool_calls"] = [
            _langchain_call(call, raw, f"{where}.tool_calls[{index}]")
            for index, call in enumerate(calls)] + [_invalid_call(call) for call in invalid]
    if role == "tool":
        message["tool_call_id"] = item.get("tool_call_id")
    for key in ("id", "name"):
        if item.get(key) is not None:
            message[key] = item[key]
    return [message]


def _langchain_call(call: object, raw: Mapping[str, str], where: str) -> dict[str, Any]:
    """A LangChain ``ToolCall`` (``id``, ``name``, parsed ``args``) as an OpenAI tool call."""
    call = _as_block(call, where)
    call_id = _required(call, "id", where)
    return {"id": call_id, "type": "function",
            "function": {"name": _required(call, "name", where),
                         "arguments": _arguments_text(call, raw.get(call_id))}}


MALFORMED_ARGUMENTS = "malformed_arguments"
"""The one key of the arguments object that carries a call's argument text that is not JSON."""


def _invalid_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """A LangChain ``invalid_tool_calls`` entry (arguments that are not JSON) as a kept call.

    LangChain's agent answers such a call with an error ``ToolMessage``, so the call is kept to
    pair with it: left out, that result would follow no call, and the model would not see what
    went wrong. Its text cannot be the arguments as they are (every rendering needs a JSON
    object: Anthropic's ``input`` is one), so the model's text is the string value of one key,
    ``malformed_arguments``: the model still sees what it wrote, and every provider takes it.
    A call without an id is left out: nothing can answer it (LangChain's agent does not either).
    """
    raw = call.get("args")
    return {"id": call["id"], "type": "function", "function": {
        "name": call.get("name") or "unknown",  # the name LangChain's error result gives it
        "arguments": json.dumps({MALFORMED_ARGUMENTS: raw if isinstance(raw, str) else ""},
                                ensure_ascii=False)}}


def _langchain_parts(content: Sequence[object], calls: Sequence[Mapping[str, Any]],
                     where: str, left_out: dict[str, int]) -> list[tuple[object, str]]:
    """The content's parts with their places, less reasoning and the blocks left out.

    Left out are the blocks that repeat a call and those of a tool the provider ran (counted in
    ``left_out``).

    A call block whose call is not among ``tool_calls`` is refused: dropped, the call would be
    lost, and read from the block alone, its arguments would be the provider's raw text.
    """
    call_ids = {call.get("id") for call in calls}
    parts: list[tuple[object, str]] = []
    for index, part in enumerate(content):
        place = f"{where}.content[{index}]"
        if not isinstance(part, Mapping):
            parts.append((part, place))
            continue
        kind = part.get("type")
        if kind in _LANGCHAIN_REASONING_BLOCKS:
            continue  # the model's own reasoning is not the conversation's text
        if is_hosted_tool_part(kind):
            _leave_out(left_out, str(kind))
            continue
        id_field = _LANGCHAIN_CALL_BLOCKS.get(str(kind))
        if id_field is None:
            parts.append((part, place))
        elif part.get(id_field) not in call_ids:
            raise InvalidInputError(f"{place} is a {kind!r} block whose call is not among the "
                                    "message's tool_calls")
    return parts


def _raw_arguments(item: Mapping[str, Any]) -> dict[str, str]:
    """Argument strings by call id, as the provider sent them.

    ChatOpenAI keeps them in ``additional_kwargs`` (Chat Completions) or in the content's
    ``function_call`` blocks (Responses API).
    """
    raw: dict[str, str] = {}
    content = item.get("content")
    for block in content if isinstance(content, list) else ():
        if isinstance(block, Mapping) and block.get("type") == "function_call":
            arguments, call_id = block.get("arguments"), block.get("call_id")
            if isinstance(arguments, str) and call_id:
                raw[str(call_id)] = arguments
    for call in (item.get("additional_kwargs") or {}).get("tool_calls") or ():
        if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping):
            arguments = call["function"].get("arguments")
            if isinstance(arguments, str) and call.get("id"):
                raw[str(call["id"])] = arguments
    return raw


def _arguments_text(call: Mapping[str, Any], raw: str | None) -> str:
    """The call's arguments as the provider wrote them when they still say what ``args`` says.

    A re-serialised ``args`` may differ in spacing (and so in tokens) from what the model wrote
    and the budget was counted on; an edited ``args`` wins over a stale original.
    """
    args = call.get("args") or {}
    if raw is not None:
        try:
            if json.loads(raw) == args:
                return raw
        except ValueError:
            pass  # not JSON: the parsed args are what the call says
    return json.dumps(args, ensure_ascii=False)


def _from_llama_index(item: Mapping[str, Any], where: str, left_out: dict[str, int]
                      ) -> dict[str, Any]:
    """A LlamaIndex ``ChatMessage`` (dumped): text, and calls as blocks or in its kwargs.

    Calls come as ``ToolCallBlock``s (function-calling agents) or in ``additional_kwargs``, in
    OpenAI's shape or Anthropic's (LlamaIndex's Anthropic model keeps its ``tool_use`` blocks
    there). An assistant's Anthropic ``ThinkingBlock``s are its ``thinking_blocks``
    (``_llama_index_thinking``); other reasoning is left out. Text blocks are joined by a line
    break, as LlamaIndex's own ``ChatMessage.content`` joins them.
    """
    role = str(getattr(item["role"], "value", item["role"]))
    if role not in ("system", "developer", "user", "assistant", "tool"):
        raise InvalidInputError(f"{where}.role {role!r} has no chat equivalent")
    blocks = item.get("blocks") or []
    texts, calls, images = _llama_index_blocks(blocks, where, left_out)
    extra = item.get("additional_kwargs") or {}
    message: dict[str, Any] = {"role": "system" if role == "developer" else role,
                               "content": _joined(texts, images)}
    thinking = [read for read in (_llama_index_thinking(_as_block(block, where))
                                  for block in blocks) if read is not None]
    if thinking and role == "assistant":
        message["thinking_blocks"] = thinking
    if extra.get("tool_calls"):
        place = f"{where}.additional_kwargs.tool_calls"
        if not isinstance(extra["tool_calls"], Sequence):
            raise InvalidInputError(f"{place} must be a list of tool calls")
        calls = [_chat_call(call, f"{place}[{index}]")
                 for index, call in enumerate(extra["tool_calls"])] + calls
    if calls:
        message["tool_calls"] = calls
        message["content"] = message["content"] or None
    for key in ("tool_call_id", "name", "id"):
        if extra.get(key) is not None:
            message[key] = extra[key]
    return message


def _llama_index_blocks(blocks: Sequence[Mapping[str, Any]], where: str,
                        left_out: dict[str, int]
                        ) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """Text, tool calls (``ToolCallBlock``, as function-calling agents record them), images.

    A ``CachePoint`` block marks where a provider's prompt cache may end, not text: it is
    left out (counted in ``left_out``), as LlamaIndex's own ``ChatMessage.content`` does.
    """
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        block = _as_block(block, f"{where}.blocks[{index}]")
        kind = block.get("block_type")
        if kind == "text":
            texts.append(_block_text(block, f"{where}.blocks[{index}]"))
        elif kind == "tool_call":
            calls.append(_llama_index_call(block, f"{where}.blocks[{index}]"))
        elif kind == "image":
            images.append(_llama_index_image(block, f"{where}.blocks[{index}]").to_chat_part())
        elif kind == "cache":
            _leave_out(left_out, "cache")
        elif kind != "thinking":  # reasoning is not the text: ``_llama_index_thinking``
            raise InvalidInputError(f"{where}.blocks[{index}] is a {kind!r} block, which "
                                    "contextwright cannot carry (text, images and tool calls "
                                    "only)")
    return texts, calls, images


def _llama_index_thinking(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """A ``ThinkingBlock`` (dumped) as an Anthropic thinking block; None for another block.

    llama-index-llms-anthropic keeps the block's other fields in ``additional_information``
    (``type`` and ``signature``) and sends the signature back from there; a redacted block is
    written there the same way (``to_llama_index``). Reasoning of another provider (an OpenAI
    summary, a local model's thinking) has neither: no provider takes it back, so it is left
    out, as the Responses API's reasoning items are.
    """
    if block.get("block_type") != "thinking":
        return None
    info = block.get("additional_information") or {}
    kind = info.get("type")
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": info.get("data")}
    if kind != "thinking" and "signature" not in info:
        return None
    content = block.get("content")
    read: dict[str, Any] = {"type": "thinking", "thinking": "" if content is None else content}
    if info.get("signature") is not None:
        read["signature"] = info["signature"]
    return read


def _llama_index_image(block: Mapping[str, Any], where: str) -> ImagePart:
    """An ``ImageBlock`` (dumped): its data (kept as base64 bytes) or its URL."""
    try:
        detail = image_detail(block.get("detail"))
        if block.get("image") is not None:
            data = block["image"]
            text = data.decode("ascii") if isinstance(data, bytes) else data
            return ImagePart(data=text, media_type=block.get("image_mimetype"), detail=detail)
        if block.get("url") is not None:  # its guessed type is not kept: the URL tells
            return ImagePart(url=str(block["url"]), detail=detail)
    except UnicodeDecodeError:
        raise InvalidInputError(f"{where}: image data is not valid base64") from None
    except InvalidInputError as error:
        raise InvalidInputError(f"{where}: {error}") from None
    if block.get("path") is not None:
        raise InvalidInputError(f"{where} is an image on a local path; load it into the block "
                                "(ImageBlock(image=...)) so it can be sent")
    raise InvalidInputError(f"{where} is an image without data or a url")


def _llama_index_call(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    if not block.get("tool_call_id"):
        raise InvalidInputError(f"{where} is a tool call without an id, so no result can "
                                "answer it")
    arguments = block.get("tool_kwargs")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments or {}, ensure_ascii=False)
    return {"id": block["tool_call_id"], "type": "function",
            "function": {"name": block.get("tool_name", ""), "arguments": arguments or "{}"}}


def _images_of(content: Content, where: str) -> list[ImagePart]:
    if not isinstance(content, list):
        return []
    return [image_from_part(part, f"{where}.content[{index}]")
            for index, part in enumerate(content) if part.get("type") != "text"]


def _langchain_content(content: Content, where: str) -> str | list[str | dict[Any, Any]]:
    """Text, or text and OpenAI ``image_url`` parts (which LangChain reads for every model)."""
    images = _images_of(content, where)
    if not images:
        return _text_of(content)
    text = _text_of(content)
    parts: list[str | dict[Any, Any]] = [{"type": "text", "text": text}] if text else []
    for image in images:
        image_url: dict[str, Any] = {"url": image.source}
        if image.detail != "auto":
            image_url["detail"] = image.detail
        parts.append({"type": "image_url", "image_url": image_url})
    return parts


def to_langchain(messages: Sequence[Mapping[str, Any]]) -> list[Any]:
    """LangChain messages for OpenAI chat dicts (needs ``langchain-core``); ids are kept.

    An assistant's calls keep their argument text in ``additional_kwargs["tool_calls"]`` (as
    LangChain's OpenAI models keep what the API sent), so converting back gives it unchanged.
    Images are OpenAI ``image_url`` content parts (a URL's given width and height are not
    kept: LangChain's parts have no place for them).
    """
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    converted: list[Any] = []
    for index, message in enumerate(chat_messages(messages)):
        role = message.get("role")
        content = _langchain_content(message.get("content"), f"messages[{index}]")
        extra = {key: message[key] for key in ("id", "name") if message.get(key)}
        if role == "assistant":
            raw = message.get("tool_calls") or []
            calls = [{"name": c["function"]["name"], "id": c["id"],
                      "args": json.loads(c["function"]["arguments"] or "{}")} for c in raw]
            kwargs = {"tool_calls": [dict(c) for c in raw]} if raw else {}  # the exact text
            thinking = message.get("thinking_blocks") or []
            if thinking:  # content blocks, reasoning first, as ChatAnthropic sends them
                blocks: list[str | dict[Any, Any]] = [dict(block) for block in thinking]
                if isinstance(content, str):
                    blocks += [{"type": "text", "text": content}] if content else []
                else:
                    blocks += content
                content = blocks
            converted.append(AIMessage(content=content, tool_calls=calls,
                                       additional_kwargs=kwargs, **extra))
        elif role == "tool":
            failed = reports_failure(_text_of(message.get("content")))
            converted.append(ToolMessage(content=content, tool_call_id=message["tool_call_id"],
                                         status="error" if failed else "success", **extra))
        elif role == "system":
            converted.append(SystemMessage(content=content, **extra))
        elif role == "user":
            converted.append(HumanMessage(content=content, **extra))
        else:
            raise InvalidInputError(f"messages: role {role!r} has no LangChain message type")
    return converted


def to_llama_index(messages: Sequence[Mapping[str, Any]]) -> list[Any]:
    """LlamaIndex ``ChatMessage``s for OpenAI chat dicts (needs ``llama-index-core``).

    Images are ``ImageBlock``s after the text (data as bytes, or the URL, with the detail). An
    assistant's ``thinking_blocks`` are ``ThinkingBlock``s before its text, the other fields in
    ``additional_information`` as llama-index-llms-anthropic keeps them (which sends a block
    back with its ``signature`` from there, and a redacted one, without text, not at all).
    """
    from llama_index.core.base.llms.types import TextBlock
    from llama_index.core.llms import ChatMessage

    converted: list[Any] = []
    for index, message in enumerate(chat_messages(messages)):
        extra = {key: message[key] for key in ("tool_calls", "tool_call_id", "name", "id")
                 if message.get(key)}
        content = message.get("content")
        images = _images_of(content, f"messages[{index}]")
        thinking = message.get("thinking_blocks") if message.get("role") == "assistant" else None
        if thinking:  # an assistant message carries no image
            converted.append(ChatMessage(
                role="assistant", additional_kwargs=extra,
                blocks=[*map(_llama_index_thinking_block, thinking),
                        TextBlock(text=_text_of(content))]))
        elif images:
            converted.append(ChatMessage(role=message["role"],
                                         blocks=_llama_index_blocks_of(_text_of(content), images),
                                         additional_kwargs=extra))
        else:
            converted.append(ChatMessage(role=message["role"], content=_text_of(content),
                                         additional_kwargs=extra))
    return converted


def _llama_index_thinking_block(block: Mapping[str, Any]) -> Any:
    """A ``ThinkingBlock`` for an Anthropic thinking block (``_llama_index_thinking`` reads it)."""
    from llama_index.core.base.llms.types import ThinkingBlock

    if block.get("type") == "redacted_thinking":
        return ThinkingBlock(additional_information={"type": "redacted_thinking",
                                                     "data": block.get("data")})
    info = {"type": "thinking"}
    if block.get("signature") is not None:
        info["signature"] = block["signature"]
    return ThinkingBlock(content=block.get("thinking"), additional_information=info)


def _llama_index_blocks_of(text: str, images: list[ImagePart]) -> list[Any]:
    import base64

    from llama_index.core.base.llms.types import ImageBlock, TextBlock

    blocks: list[Any] = [TextBlock(text=text)] if text else []
    for image in images:
        detail = None if image.detail == "auto" else image.detail
        if image.data is not None:
            blocks.append(ImageBlock(image=base64.b64decode(image.data),
                                     image_mimetype=image.media_type, detail=detail))
        else:
            blocks.append(ImageBlock(url=image.url, image_mimetype=image.media_type,
                                     detail=detail))
    return blocks
