"""Provider request bodies: OpenAI Chat Completions, OpenAI Responses and Anthropic Messages.

Each renderer turns the built messages into keyword arguments that the provider's SDK call takes
as they are (``client.chat.completions.create(**body)``), following each API's documented rules.
Documents are fenced messages in the assistant's voice (``is_document``), so no document text is
ever in the user's or the system's role:

- Anthropic: system apart and left out when empty; roles alternate (same roles merged, tool
  results first in their user message); a lead user message when the history starts with the
  assistant; no empty content and no blank text block; every tool's ``input_schema`` is an object
  schema; ``tool_use`` / ``tool_result`` blocks only when the request defines tools (without
  tools, calls and their fenced results are shown as the assistant's text, and a note says so);
  documents as
  ``search_result`` blocks.
- OpenAI Responses: system as ``instructions``; calls and results as ``function_call`` /
  ``function_call_output`` items; documents as fenced user-side input.
- OpenAI Chat Completions: documents as fenced user-side messages.

What a format cannot carry is listed in the rendering's ``notes`` (never dropped silently).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from contextwright.core.fence import neutralise
from contextwright.core.items import Message
from contextwright.errors import InvalidInputError

ProviderFormat = Literal["openai", "openai-responses", "anthropic"]
PROVIDER_FORMATS: tuple[ProviderFormat, ...] = ("openai", "openai-responses", "anthropic")
ANTHROPIC_LEAD = "(earlier conversation omitted)"
DOCUMENT_NAME = "document"
"""``Message.name`` of a message that carries one document or passage."""


@dataclass(slots=True)
class Rendered:
    """A request body and what the format could not carry."""

    body: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    lead: bool = False
    """Anthropic: a lead user message was added (it costs tokens the build did not count)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSettings:
    """Call settings shared by every format, as the caller gave them (None: not sent)."""

    model: str | None = None
    max_output_tokens: int | None = None
    tool_choice: str | Mapping[str, Any] | None = None
    """OpenAI chat form: ``auto`` / ``none`` / ``required`` / ``{"type": "function",
    "function": {"name": ...}}`` (a bare tool name is taken as the last); translated per
    provider."""
    parallel_tool_calls: bool | None = None


def is_document(message: Message) -> bool:
    """Whether ``message`` carries a document (fenced data, not the user's words)."""
    return message.role == "assistant" and message.name == DOCUMENT_NAME


# --- OpenAI Chat Completions ---------------------------------------------------------------


def openai_message(message: Message) -> dict[str, Any]:
    """One message in OpenAI chat form."""
    rendered: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        rendered["content"] = message.content or None
        rendered["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.role == "tool":
        rendered["tool_call_id"] = message.tool_call_id
    return rendered


def openai_chat(messages: Sequence[Message], schemas: Sequence[Mapping[str, Any]],
                settings: CallSettings) -> Rendered:
    """Keyword arguments for ``client.chat.completions.create``."""
    body: dict[str, Any] = {}
    if settings.model is not None:
        body["model"] = settings.model
    body["messages"] = [openai_message(m) for m in messages]
    if schemas:
        body["tools"] = [dict(s) for s in schemas]
    if settings.max_output_tokens:
        body["max_completion_tokens"] = settings.max_output_tokens
    _tool_settings(body, schemas, settings, _openai_tool_choice)
    return Rendered(body)


def _openai_tool_choice(choice: str | Mapping[str, Any]) -> str | dict[str, Any]:
    name = _chosen_tool(choice)
    if name is None:
        return str(choice)
    return {"type": "function", "function": {"name": name}}


# --- OpenAI Responses ----------------------------------------------------------------------


def openai_responses(system: str, messages: Sequence[Message],
                     schemas: Sequence[Mapping[str, Any]], settings: CallSettings) -> Rendered:
    """Keyword arguments for ``client.responses.create``."""
    body: dict[str, Any] = {}
    if settings.model is not None:
        body["model"] = settings.model
    if system:
        body["instructions"] = system
    items: list[dict[str, Any]] = []
    for message in messages:
        items.extend(_response_items(message))
    body["input"] = items
    if schemas:
        body["tools"] = [_responses_tool(s) for s in schemas]
    if settings.max_output_tokens:
        body["max_output_tokens"] = settings.max_output_tokens
    _tool_settings(body, schemas, settings, _responses_tool_choice)
    return Rendered(body)


def _response_items(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [{"type": "function_call_output", "call_id": message.tool_call_id,
                 "output": message.content}]
    items: list[dict[str, Any]] = []
    if message.content or not message.tool_calls:
        items.append({"type": "message", "role": message.role, "content": message.content})
    items.extend({"type": "function_call", "call_id": c.id, "name": c.name,
                  "arguments": c.arguments} for c in message.tool_calls)
    return items


def _responses_tool(schema: Mapping[str, Any]) -> dict[str, Any]:
    function = schema.get("function", {})
    tool: dict[str, Any] = {"type": "function", "name": function.get("name"),
                            "parameters": object_schema(function.get("parameters")),
                            "strict": bool(function.get("strict", False))}
    if function.get("description"):
        tool["description"] = function["description"]
    return tool


def _responses_tool_choice(choice: str | Mapping[str, Any]) -> str | dict[str, Any]:
    name = _chosen_tool(choice)
    if name is None:
        return str(choice)
    return {"type": "function", "name": name}


# --- Anthropic Messages ----------------------------------------------------------------------


def anthropic(system: str, messages: Sequence[Message], labels: Sequence[str | None],
              schemas: Sequence[Mapping[str, Any]], settings: CallSettings) -> Rendered:
    """Keyword arguments for ``anthropic.Anthropic().messages.create``."""
    notes: list[str] = []
    native_tools = bool(schemas)
    merged: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = _anthropic_role(message, native_tools)
        blocks = _anthropic_blocks(message, labels[index] if index < len(labels) else None,
                                   native_tools)
        if not blocks:
            notes.append(f"an empty {message.role} message was left out (the Messages API "
                         "refuses empty content)")
            continue
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"].extend(blocks)
        else:
            merged.append({"role": role, "content": blocks})
    if not native_tools and any(m.tool_calls or m.role == "tool" for m in messages):
        notes.append("the request defines no tools, so earlier tool calls and results are shown "
                     "as text (the Messages API refuses tool blocks without tools)")
    for turn in merged:
        if turn["role"] == "user":  # tool results must open a user message
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    _strip_final_assistant(merged)
    lead = bool(merged) and merged[0]["role"] != "user"
    if lead:
        merged.insert(0, {"role": "user", "content": [{"type": "text", "text": ANTHROPIC_LEAD}]})
    body: dict[str, Any] = {}
    if settings.model is not None:
        body["model"] = settings.model
    if not settings.max_output_tokens:
        raise InvalidInputError("the Messages API needs max_tokens: the plan reserves no output "
                                "tokens, so pass max_tokens=")
    body["max_tokens"] = settings.max_output_tokens
    if system:
        body["system"] = system
    body["messages"] = merged
    if schemas:
        body["tools"] = [anthropic_tool(s) for s in schemas]
    check_tool_choice(schemas, settings)
    choice = _anthropic_tool_choice(settings) if schemas else None
    if choice is not None:
        body["tool_choice"] = choice
    return Rendered(body, notes, lead)


def _anthropic_role(message: Message, native_tools: bool) -> str:
    """The side a message is shown on.

    Results and documents go on the user side, in their own blocks; without tools a call's
    result is shown in the assistant's turn beside its call, so no tool output is ever text in
    the user's turn.
    """
    if message.role == "user" or is_document(message):
        return "user"
    if message.role == "tool":
        return "user" if native_tools else "assistant"
    return "assistant"


def _anthropic_blocks(message: Message, source_label: str | None,
                      native_tools: bool) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [_tool_result_block(message, native_tools)]
    if is_document(message):
        title = neutralise(" ".join((source_label or "document").split())) or "document"
        return [{"type": "search_result", "source": title, "title": title,
                 "content": [{"type": "text", "text": message.content}]}]
    blocks: list[dict[str, Any]] = []
    if message.content.strip():
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        if native_tools:
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                           "input": json.loads(call.arguments)})
        else:
            blocks.append({"type": "text", "text": f"→ {call.name}({call.arguments})"})
    return blocks


def _tool_result_block(message: Message, native_tools: bool) -> dict[str, Any]:
    if not native_tools:
        name = message.name or "tool"
        return {"type": "text", "text": f"{name} result:\n{message.content or '(empty)'}"}
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    if message.content:
        block["content"] = message.content
    return block


def _strip_final_assistant(merged: list[dict[str, Any]]) -> None:
    """A final assistant turn (a prefill) may not end with white space; the API refuses it."""
    if not merged or merged[-1]["role"] != "assistant":
        return
    last = merged[-1]["content"][-1]
    if last["type"] == "text":
        stripped = last["text"].rstrip()
        if stripped:
            last["text"] = stripped
        else:
            merged[-1]["content"].pop()
            if not merged[-1]["content"]:
                merged.pop()


def object_schema(parameters: object) -> dict[str, Any]:
    """A JSON schema for tool input that providers accept: an object schema.

    ``{}`` or a missing schema means "no arguments"; a schema without ``type`` gets
    ``"type": "object"``. Anything else (an array or string schema) cannot be a tool's input.
    """
    if parameters is None:
        return {"type": "object", "properties": {}}
    if not isinstance(parameters, Mapping):
        raise InvalidInputError("a tool's parameters must be a JSON schema object")
    schema = dict(parameters)
    kind = schema.setdefault("type", "object")
    if kind != "object":
        raise InvalidInputError(f"a tool's parameters must be an object schema, not {kind!r}")
    return schema


def anthropic_tool(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI tool schema as an Anthropic tool."""
    function = schema.get("function", {})
    tool: dict[str, Any] = {"name": function.get("name"),
                            "input_schema": object_schema(function.get("parameters"))}
    if function.get("description"):
        tool["description"] = function["description"]
    return tool


def _anthropic_tool_choice(settings: CallSettings) -> dict[str, Any] | None:
    choice, parallel = settings.tool_choice, settings.parallel_tool_calls
    if choice is None and parallel is None:
        return None
    name = _chosen_tool(choice) if choice is not None else None
    if name is not None:
        rendered: dict[str, Any] = {"type": "tool", "name": name}
    else:
        kinds = {None: "auto", "auto": "auto", "required": "any", "none": "none"}
        if choice not in kinds:
            raise InvalidInputError(f"tool_choice {choice!r} is not auto, none, required or a "
                                    "tool")
        rendered = {"type": kinds[choice]}
    if parallel is False and rendered["type"] != "none":
        rendered["disable_parallel_tool_use"] = True
    return rendered


# --- shared ---------------------------------------------------------------------------------


def _chosen_tool(choice: str | Mapping[str, Any]) -> str | None:
    """The tool a ``tool_choice`` names, or None for ``auto`` / ``none`` / ``required``."""
    if isinstance(choice, str):
        return None if choice in ("auto", "none", "required") else choice
    if not isinstance(choice, Mapping):
        raise InvalidInputError("tool_choice must be a string or an object")
    function = choice.get("function")
    name = function.get("name") if isinstance(function, Mapping) else choice.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInputError("tool_choice names no tool")
    return name


def _tool_settings(body: dict[str, Any], schemas: Sequence[Mapping[str, Any]],
                   settings: CallSettings,
                   translate: Callable[[str | Mapping[str, Any]], str | dict[str, Any]]) -> None:
    """tool_choice and parallel_tool_calls, sent only with tools (the APIs refuse them else)."""
    check_tool_choice(schemas, settings)
    if not schemas:
        return
    if settings.tool_choice is not None:
        body["tool_choice"] = translate(settings.tool_choice)
    if settings.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = settings.parallel_tool_calls


def check_tool_choice(schemas: Sequence[Mapping[str, Any]], settings: CallSettings) -> None:
    """A ``tool_choice`` that names a tool must name one of the request's tools.

    Without tools, ``auto`` / ``none`` and ``parallel_tool_calls`` mean nothing and are not
    sent (the APIs refuse them there); ``required`` or a named tool contradict the request and
    are refused.
    """
    if settings.tool_choice is None:
        return
    chosen = _chosen_tool(settings.tool_choice)
    if not schemas:
        if chosen is not None or settings.tool_choice == "required":
            raise InvalidInputError(f"tool_choice {settings.tool_choice!r} needs tools, and "
                                    "this request has none")
        return
    names = {s.get("function", {}).get("name") for s in schemas}
    if chosen is not None and chosen not in names:
        raise InvalidInputError(f"tool_choice names {chosen!r}, which is not among the tools")
