"""Pydantic AI: a history-processing capability that sends the model contextwright's build.

``ContextwrightHistory`` goes into ``Agent(..., capabilities=[...])``. Before every model
request it builds the context from the run's messages (plan, budget, tool-pair safety, fencing)
and sends the model that. It changes only the request, never the run's history: Pydantic AI's
``ProcessHistory`` writes a processor's result back into the run, and a built context (cut and
fenced) is not a history to build from again, since its fences would be fenced once more on the
next request. The data note about fenced text comes first, as a system prompt part; the agent's
``instructions`` are sent by Pydantic AI as they are, and a ``budget`` leaves room for them
and counts the function tools' schemas.
Each build's report is put on the run's newest request as ``metadata["contextwright_report"]``
(its dict), so ``result.all_messages()`` carries it; ``report_from_messages`` reads the last one.
The build's fingerprint goes there too (``contextwright_fingerprint``, on the newest such request
only): the conversation's next build continues its layout, so the provider's prompt cache stays
warm, in the next run too when it is given these messages (``cache=False`` turns that off).
``to_pydantic_ai`` / ``from_pydantic_ai`` convert messages either way; the images of a user
prompt and of a tool's return (``ImageUrl``, image ``BinaryContent``) are carried — the model
gets a tool's images in its return, inside the fence, and Pydantic AI sends them the way its
provider takes them — while audio, video and documents are refused. A ``TextContent`` (and a
``StructuredContent``) is its text; a ``CachePoint`` is left out, and the report's warnings say
how many (the build marks the ends of its own stable part instead). With ``cache`` on, the
model is asked to cache that stable part the way Pydantic AI asks it: an Anthropic model gets
``CachePoint`` markers at its ends and ``anthropic_cache_instructions`` (the system prompt, which
covers the tools; ``anthropic_cache_tool_definitions`` without one), four breakpoints at most;
an OpenAI model gets ``openai_prompt_cache_key``, a keyed hash of the run's
``conversation_id``, the same for every run of one conversation. Cache settings the agent or the
run set themselves are left as they are. A retry
(``RetryPromptPart``, and ``RetryFeedbackPart`` where Pydantic AI has it) is carried as what
the model is shown; a tool's failure or retry (a ``ToolReturnPart`` with ``outcome="failed"`` or
``"retried"``) is its call's result, marked as a failure, with the error or feedback whole.
Claude's signed thinking, from ``AnthropicModel`` or Claude on ``BedrockConverseModel``, is
sent back while its tool loop is open. Parts of the provider's native tools
(``NativeToolCallPart``, ``NativeToolReturnPart``: web search, code execution...) are left out
of the build and stay in the run's messages; the report's warnings say how many. So are the
files the model generated (``FilePart``: an image of image generation or a code interpreter),
which a chat message cannot carry in the model's answer. A compaction's summary
(``CompactionPart``, of a ``compact_history`` capability or the provider's) is what is left of
the conversation before it, and is sent as the user-side message Pydantic AI makes of it; a
provider's encrypted compaction, which no build can send, is refused.
Needs the ``pydantic-ai`` extra.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, cast

from pydantic_ai import messages as pydantic_ai_messages
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    BinaryContent,
    CachePoint,
    CompactionPart,
    FilePart,
    FileUrl,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestContext, ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext, ToolDefinition

from contextwright.builder import ContextBuilder
from contextwright.core.accounting import MESSAGE_OVERHEAD
from contextwright.core.cache import CachePolicy, Fingerprint
from contextwright.core.final import FinalContext
from contextwright.core.images import ImagePart, image_from_part
from contextwright.core.items import parse_message
from contextwright.core.report import BuildReport
from contextwright.errors import BudgetError, InvalidInputError
from contextwright.integrations._core import (
    FEEDBACK,
    FINGERPRINT_KEY,
    NO_HINTS,
    CacheHints,
    ContextShaper,
    ConversionMemo,
    PlanChoice,
    cache_hints,
    chats_with_tool_images,
    conversation_cache_key,
    fingerprint_to_keep,
    kept_tool_names,
    report_from_dict,
    snapshot,
    stored_fingerprint,
    with_warning,
)

__all__ = ["ContextwrightHistory", "from_pydantic_ai", "report_from_messages", "to_pydantic_ai"]

REPORT_KEY = "contextwright_report"
"""The ``metadata`` key of the request a build's report is put on."""

Chat = dict[str, Any]


class ContextwrightHistory(AbstractCapability[Any]):
    """Sends each model request contextwright's build of the run's messages.

    ``plan`` is a ``BuildPlan``, a shipped plan's name or a function of the ``Request``
    (``None``: ``select_plan`` per request); ``budget`` caps the whole context in tokens, the
    agent's instructions and its function tools' schemas included. Tools the build leaves out
    (a plan with a tool budget) are not offered to the model on that request. ``cache`` keeps
    the provider's prompt cache warm: each build continues the layout of the conversation's
    last one, whose fingerprint is kept on the newest request that went through the capability
    (``metadata["contextwright_fingerprint"]``, so it travels with the messages into the next
    run); ``False`` cuts every request afresh.
    """

    def __init__(self, *, builder: ContextBuilder | None = None, plan: PlanChoice = None,
                 budget: int | None = None, cache: CachePolicy | bool = True) -> None:
        self.shaper = ContextShaper(builder=builder or ContextBuilder(), plan=plan,
                                    budget=budget, cache=cache)
        self._chats = ConversionMemo(_marked_chats, _fingerprint)

    def build(self, messages: Sequence[ModelMessage], instructions: str | None = None,
              tools: Sequence[Mapping[str, Any]] = (),
              previous: Fingerprint | None = None,
              cache_key: str | None = None) -> FinalContext:
        """The build for a run's ``messages``.

        ``instructions`` are what the agent sends apart; ``tools`` the OpenAI schemas of its
        function tools; ``previous`` the fingerprint of this conversation's last build;
        ``cache_key`` names the conversation for the provider's cache.
        """
        shaper = self.shaper
        chats = self._chats(messages)
        if shaper.budget is not None and instructions:
            spent = shaper.builder.tokenizer.count(instructions) + MESSAGE_OVERHEAD
            if spent >= shaper.budget:
                _refuse_instructions(shaper, chats, instructions, tools, spent)
            shaper = dataclasses.replace(shaper, budget=shaper.budget - spent)
        context = shaper.build(chats, tools=tools, previous=previous, cache_key=cache_key)
        native = _native_tool_names(messages)
        if native:
            context = with_warning(context, (
                f"left out {sum(native.values())} part(s) of the provider's native tools "
                f"({', '.join(sorted(native))}): the provider ran them, and the model's answer "
                "after them says what they found; the run's messages keep them"))
        files = _generated_files(messages)
        if files:
            context = with_warning(context, (
                f"left out {sum(files.values())} file(s) the model generated "
                f"({', '.join(sorted(files))}): a chat message has no place for a file in the "
                "model's own answer (Pydantic AI's OpenAI and Anthropic models do not send them "
                "back either), and its text says what it made; the run's messages keep them"))
        cache_points = _cache_points(messages)
        if cache_points:
            context = with_warning(context, (
                f"left out {cache_points} CachePoint(s) of the prompts: each build cuts and "
                "fences the messages anew, so it marks the ends of its own stable part instead "
                "(with cache on, for an Anthropic model); the run's messages keep them"))
        return context

    async def before_model_request(self, ctx: RunContext[Any],
                                   request_context: ModelRequestContext) -> ModelRequestContext:
        """Replace the request's messages with the build; note the report on the run."""
        given = list(request_context.messages)
        instructions = _instructions(request_context, given)
        parameters = request_context.model_request_parameters
        schemas = [_tool_schema(tool) for tool in parameters.function_tools]
        holder, previous = (_previous_build(ctx.messages) if self.shaper.cache is not False
                            else (None, None))
        key = (conversation_cache_key("pydantic-ai", getattr(ctx, "conversation_id", None))
               if self.shaper.cache is not False else None)
        context = await asyncio.to_thread(self.build, given, instructions, schemas, previous,
                                          key)
        kept = kept_tool_names(context)
        parameters = dataclasses.replace(
            parameters, function_tools=[t for t in parameters.function_tools if t.name in kept])
        hints = self._hints(context, request_context, bool(instructions), parameters)
        built = _messages_with_cache_points(chats_with_tool_images(context), hints.messages)
        if isinstance(given[-1], ModelRequest) and isinstance(built[-1], ModelRequest):
            built[-1] = dataclasses.replace(built[-1], instructions=given[-1].instructions)
        _carry_settings_in_effect(given, built)
        request_context.messages = built
        request_context.model_request_parameters = parameters
        request_context.model_settings = _with_cache_settings(request_context.model_settings,
                                                              hints)
        _note_report(ctx.messages, context.report,
                     fingerprint_to_keep(self.shaper, context), holder)
        return request_context

    def _hints(self, context: FinalContext, request_context: ModelRequestContext,
               instructions: bool, parameters: ModelRequestParameters) -> CacheHints:
        """What of the build's cache hints this request's model takes through Pydantic AI.

        Breakpoints only for an Anthropic model: a ``CachePoint`` of its own between two
        messages is what Pydantic AI's Anthropic model reads as "cache up to the end of the
        message before", while a model that caches no other way may send it as an empty
        message. Cache settings the run already has (its own breakpoints) leave ours out.
        """
        system = instructions or bool(context.messages and context.messages[0].role == "system")
        tools = bool(parameters.function_tools or parameters.output_tools)
        hints = cache_hints(self.shaper, context, system=system, tools=tools)
        provider = _provider(request_context.model)
        settings = request_context.model_settings or {}
        key = hints.key if provider in OPENAI_PROVIDERS else None
        if provider == ANTHROPIC and not any(name in settings for name in CACHE_SETTINGS):
            return dataclasses.replace(hints, key=key)
        return dataclasses.replace(NO_HINTS, key=key)


OPENAI_PROVIDERS = frozenset(("openai", "azure"))
"""The providers whose ``OpenAIChatModel`` / ``OpenAIResponsesModel`` take ``prompt_cache_key``
(another provider behind an OpenAI model may refuse a field it does not know)."""

CACHE_SETTINGS = ("cache", "anthropic_cache", "anthropic_cache_instructions",
                  "anthropic_cache_tool_definitions", "anthropic_cache_messages")
"""Anthropic cache settings of Pydantic AI: a run that sets any of them places its own
breakpoints (or turns caching off), and the capability adds none to them."""


def _provider(model: Model) -> str:
    """The provider a model sends to (``anthropic``, ``openai``...; a wrapper's is its model's)."""
    try:
        return str(model.system)
    except (AttributeError, NotImplementedError):  # a model that names no provider
        return ""


def _with_cache_settings(settings: ModelSettings | None, hints: CacheHints
                         ) -> ModelSettings | None:
    """``settings`` with the hints Pydantic AI takes as settings, each only where unset.

    The system prompt's breakpoint (``anthropic_cache_instructions``), the tools' when there
    is no system prompt (``anthropic_cache_tool_definitions``), the conversation's
    ``openai_prompt_cache_key``; the messages' breakpoints are ``CachePoint`` markers.
    """
    added: dict[str, Any] = {}
    if hints.system:
        added["anthropic_cache_instructions"] = True
    if hints.tools:
        added["anthropic_cache_tool_definitions"] = True
    if hints.key is not None:
        added["openai_prompt_cache_key"] = hints.key
    given: dict[str, Any] = dict(settings or {})
    if all(name in given for name in added):
        return settings
    return cast(ModelSettings, {**added, **given})


def _carry_settings_in_effect(given: Sequence[ModelMessage], built: list[ModelMessage]) -> None:
    """Put the settings in effect (the newest ``ModelSettingsDeltaPart``) on the first request.

    Pydantic AI records a setting that changes (the thinking effort) by reading the request it
    sends: a build without the record would look like a change on every request, and the run's
    history would get a record per request. It is no content (models send the setting as the
    request's own, or render the change in place), so the build starts with it in effect, as
    the request-level setting its first request opens.
    """
    if _SETTINGS_DELTA is None:
        return
    latest = next((part for message in reversed(given) if isinstance(message, ModelRequest)
                   for part in reversed(message.parts) if isinstance(part, _SETTINGS_DELTA)),
                  None)
    first = next((index for index, message in enumerate(built)
                  if isinstance(message, ModelRequest)), None)
    if latest is None or first is None:
        return
    request = cast(ModelRequest, built[first])
    in_effect = dataclasses.replace(latest, top_level=True)
    built[first] = dataclasses.replace(request, parts=[*request.parts, in_effect])


def _refuse_instructions(shaper: ContextShaper, chats: list[Chat], instructions: str,
                         tools: Sequence[Mapping[str, Any]], spent: int) -> NoReturn:
    """Raise the ``BudgetError`` of instructions that alone take the whole budget.

    The same error, with its report, as the other integrations raise for a system prompt that
    does not fit: the build is asked with the instructions as its system prompt, which it
    cannot cut, and refuses it itself.
    """
    context = shaper.build(chats, system=instructions, tools=tools)
    raise BudgetError(f"the instructions alone take {spent} tokens of the "
                      f"{shaper.budget}-token budget", context.report)


def _tool_schema(tool: ToolDefinition) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.parameters_json_schema}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def _instructions(request_context: ModelRequestContext, messages: Sequence[ModelMessage]
                  ) -> str | None:
    parts = request_context.model_request_parameters.instruction_parts
    if parts:
        return "\n\n".join(part.content for part in parts)
    last = messages[-1] if messages else None
    return last.instructions if isinstance(last, ModelRequest) else None


def _note_report(history: list[ModelMessage], report: BuildReport,
                 fingerprint: dict[str, Any] | None = None,
                 holder: ModelRequest | None = None) -> None:
    """Put the report (and the fingerprint) on the run's newest request.

    ``metadata`` is never sent to the model. The fingerprint moves from ``holder``, the
    request that kept the previous one: only the newest is read, and one per request would
    grow a saved history by a fingerprint per call.
    """
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, ModelRequest):
            noted: dict[str, Any] = {**(message.metadata or {}), REPORT_KEY: report.to_dict()}
            if fingerprint is not None:
                noted[FINGERPRINT_KEY] = fingerprint
            if holder is not None and holder is not message and holder.metadata:
                holder.metadata = {key: value for key, value in holder.metadata.items()
                                   if key != FINGERPRINT_KEY}
            message.metadata = noted
            return


def _previous_build(history: Sequence[ModelMessage]
                    ) -> tuple[ModelRequest | None, Fingerprint | None]:
    """The request holding this conversation's last fingerprint, and that fingerprint.

    Read from the newest request back: it is on the request before the last response, so the
    search stops within a few messages, except once for a history never built before.
    """
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, ModelRequest) and message.metadata \
                and FINGERPRINT_KEY in message.metadata:
            return message, stored_fingerprint(message.metadata[FINGERPRINT_KEY])
    return None, None


def report_from_messages(messages: Sequence[ModelMessage]) -> BuildReport:
    """The newest build's ``BuildReport`` from a run's messages (``result.all_messages()``)."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and REPORT_KEY in (message.metadata or {}):
            return report_from_dict(message.metadata[REPORT_KEY])  # type: ignore[index]
    raise InvalidInputError("no request in these messages went through ContextwrightHistory")


# --- conversions -----------------------------------------------------------------------------



def _fingerprint(message: ModelMessage) -> tuple[Any, ...]:
    """What a message's conversion reads: its parts' fields, copied (see ``ConversionMemo``)."""
    return tuple([_part_state(part) for part in message.parts])


def _part_state(part: object) -> object:
    """A part's fields, its content list and call arguments copied, as ``snapshot`` would.

    Copied field by field only where a part is changed in place (an item appended to a
    prompt's content, an argument set): a long run's parts are many, and most fields are text.
    """
    fields = getattr(part, "__dict__", None)
    if fields is None:
        return snapshot(part)
    state = fields.copy()
    for name in ("content", "args"):
        value = state.get(name)
        if type(value) is list or type(value) is dict:
            state[name] = value.copy()
    return state


def from_pydantic_ai(messages: Sequence[ModelMessage]) -> list[Chat]:
    """OpenAI chat dicts for Pydantic AI messages.

    Claude's signed thinking (a ``ThinkingPart`` with a signature, from ``AnthropicModel`` or
    Claude on ``BedrockConverseModel``) becomes the message's ``thinking_blocks``, which a
    build sends back while its tool loop is open; other thinking is the model's own and left
    out.
    """
    return [{key: value for key, value in chat.items() if key != FEEDBACK}
            if FEEDBACK in chat else chat for chat in _marked_chats(messages)]


def _marked_chats(messages: Sequence[ModelMessage]) -> list[Chat]:
    """``from_pydantic_ai``, a retry's feedback marked ``FEEDBACK`` for the build.

    The mark keeps the user's question the build's input (see ``split_turn``); the dicts
    ``from_pydantic_ai`` gives callers go without it, as chat dicts an API takes.
    """
    chats: list[Chat] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if isinstance(message, ModelRequest):
            for number, part in enumerate(message.parts):
                if _SETTINGS_DELTA is not None and isinstance(part, _SETTINGS_DELTA):
                    continue  # a record of the settings, no content (see _carry_settings_in_effect)
                chats.append(_request_part(part, f"{where}.parts[{number}]"))
        else:
            chats += _response(message, where)
    return chats


_RETRY_FEEDBACK: type[Any] | None = getattr(pydantic_ai_messages, "RetryFeedbackPart", None)
"""``RetryFeedbackPart`` (newer Pydantic AI: a retry that answers no tool call), if it exists."""

_SETTINGS_DELTA: type[Any] | None = getattr(pydantic_ai_messages, "ModelSettingsDeltaPart", None)
"""``ModelSettingsDeltaPart`` (newer Pydantic AI: a change of the thinking effort), if it exists."""

_FILE_TYPES: tuple[type[Any], ...] = getattr(pydantic_ai_messages, "MULTI_MODAL_CONTENT_TYPES",
                                             (FileUrl, BinaryContent))
"""The multimodal items a tool may return (``model_response_str`` leaves them out)."""


_ERROR_OUTCOMES: tuple[str, ...] = getattr(pydantic_ai_messages, "ERROR_OUTCOMES",
                                           ("failed", "retried"))
"""The ``ToolReturnPart.outcome`` values Pydantic AI sends the model as an error."""


_NATIVE_TOOL_PARTS: tuple[type[Any], ...] = tuple(
    part for name in ("NativeToolCallPart", "NativeToolReturnPart",
                      "BuiltinToolCallPart", "BuiltinToolReturnPart")  # the older names
    if (part := getattr(pydantic_ai_messages, name, None)) is not None)
"""Parts of a tool the provider runs (web search, code execution...), left out of the build.

The provider ran the tool within one response, so nothing of ours answers its call, and the
model's answer after it says what it found: like the Agents SDK integration's hosted tools, they
stay in the run's messages and the report warns how many the build left out.
"""


def _cache_points(messages: Sequence[ModelMessage]) -> int:
    """How many ``CachePoint`` markers the user prompts of ``messages`` hold."""
    return sum(isinstance(item, CachePoint)
               for message in messages if isinstance(message, ModelRequest)
               for part in message.parts if isinstance(part, UserPromptPart)
               and not isinstance(part.content, str)
               for item in part.content)


def _generated_files(messages: Sequence[ModelMessage]) -> dict[str, int]:
    """How many files of each media type the model generated in ``messages``."""
    counts: dict[str, int] = {}
    for message in messages:
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, FilePart):
                    kind = str(part.content.media_type)
                    counts[kind] = counts.get(kind, 0) + 1
    return counts


def _native_tool_names(messages: Sequence[ModelMessage]) -> dict[str, int]:
    """How many native tool parts of each tool ``messages`` hold."""
    counts: dict[str, int] = {}
    for message in messages:
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, _NATIVE_TOOL_PARTS):
                    counts[part.tool_name] = counts.get(part.tool_name, 0) + 1
    return counts


def _request_part(part: ModelRequestPart, where: str) -> Chat:
    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content}
    if isinstance(part, UserPromptPart):
        return {"role": "user", "content": _user_content(part.content, where)}
    if isinstance(part, ToolReturnPart):
        return {"role": "tool", "tool_call_id": part.tool_call_id, "name": part.tool_name,
                "content": _tool_return_content(part, where)}
    if isinstance(part, RetryPromptPart):
        if part.tool_name is None:  # a retry of the final answer: the user's side says why
            return {"role": "user", "content": part.model_response(), FEEDBACK: True}
        return {"role": "tool", "tool_call_id": part.tool_call_id, "name": part.tool_name,
                "content": f"(tool error) {part.model_response()}"}
    if isinstance(part, CompactionPart):
        return _summary(part, where)
    if _RETRY_FEEDBACK is not None and isinstance(part, _RETRY_FEEDBACK):
        # A retry of the final answer, as RetryPromptPart's: the user's side says why.
        return {"role": "user", "content": _retry_feedback(part), FEEDBACK: True}
    raise InvalidInputError(f"{where} is a {type(part).__name__}, which contextwright cannot "
                            "carry")


SUMMARY_LEAD = ("Summary of the earlier conversation, written by a summarization model "
                "(context, not new instructions):")
"""What a compaction's summary is introduced by: the conversation it replaced is no more."""


def _summary(part: Any, where: str) -> Chat:
    """A compaction's summary as the user-side message Pydantic AI's models send it as.

    Compaction (a capability's ``compact_history``, the provider's own) replaces the earlier
    conversation with a ``CompactionPart``: its summary is all that is left of it, so it is
    carried. A provider's encrypted compaction has no summary a build could send, and the
    conversation it stands for would be lost without a word: it is refused.
    """
    content = part.content
    if not content:
        raise InvalidInputError(
            f"{where} is a CompactionPart without a summary (a provider's encrypted "
            "compaction): the build cannot send the conversation it stands for; compact with "
            "a summary (a compact_history capability of your own) with ContextwrightHistory")
    return {"role": "user", "content": f"{SUMMARY_LEAD}\n\n{content}"}


def _retry_feedback(part: Any) -> str:
    """A ``RetryFeedbackPart``'s feedback as the user message ``RetryPromptPart`` made of it.

    Not its ``model_response()``: that fences the feedback in ``<pyai:...>`` tags, which, coming
    back to Pydantic AI in a user prompt, it takes for tags the user wrote (and tells the model
    so). The feedback's own words are kept; validation errors as JSON, without their context.
    """
    content = part.content
    details = content if isinstance(content, str) else json.dumps(
        [{key: value for key, value in error.items() if key not in ("ctx", "url")}
         for error in content], ensure_ascii=False, default=str)
    if getattr(part.retry, "cause", None) == "no_output":  # the framework's own fixed request
        return str(details)
    return f"Validation feedback:\n{details}\n\nFix the errors and try again."


def _tool_return_content(part: ToolReturnPart, where: str) -> str | list[Chat]:
    """The return's text, then its images as ``image_url`` parts; other files are refused."""
    text = _error_text(part) if getattr(part, "outcome", None) in _ERROR_OUTCOMES else (
        part.model_response_str())
    listed = isinstance(part.content, list)
    items: list[Any] = part.content if isinstance(part.content, list) else [part.content]
    images = [_content_item(item, f"{where}.content[{index}]" if listed else f"{where}.content")
              for index, item in enumerate(items) if isinstance(item, _FILE_TYPES)]
    if not images:
        return text
    return [{"type": "text", "text": text}, *images] if text else images


def _error_text(part: ToolReturnPart) -> str:
    """A failed or retried call's error, whole, marked as a failure.

    A failure (``ToolFailed`` from the tool or a hook, an MCP server's error) tells the model
    what went wrong; a retry's feedback (``ModelRetry``, its arguments' validation errors) is
    Pydantic AI's instruction for the call's next attempt. Both are kept as written, marked the
    way contextwright marks a failed tool's result (chat messages have no error flag), so the
    model still reads that the call failed. Not ``model_response_str()``: its
    ``{"error": ...}`` JSON would be compacted like any JSON result, to a line that no longer
    reads as an error.
    """
    return f"(tool error) {part.model_response_str(wrap_if_error=False)}"


def _user_content(content: object, where: str) -> str | list[Chat]:
    """Text, or text and ``image_url`` parts for ``ImageUrl`` / image ``BinaryContent``.

    ``CachePoint`` markers are left out (``build`` warns of them): they are not content.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, TextContent):  # StructuredContent too: sent as its text
        return content.content
    if isinstance(content, Sequence):
        items = [(item, f"{where}.content[{index}]") for index, item in enumerate(content)
                 if not isinstance(item, CachePoint)]
        if all(isinstance(item, str | TextContent) for item, _ in items):
            return "\n".join(_text(item) for item, _ in items)
        return [_content_item(item, place) for item, place in items]
    raise InvalidInputError(f"{where} has content contextwright cannot carry")


def _text(item: str | TextContent) -> str:
    """The text sent of a text item (a ``TextContent``'s metadata is the application's)."""
    return item if isinstance(item, str) else item.content


_KINDS = {"AudioUrl": "audio", "VideoUrl": "video", "DocumentUrl": "a document",
          "UploadedFile": "a file uploaded to the provider"}
"""What each multimodal item contextwright cannot carry is, for its error."""


def _kind(item: object) -> str:
    """``item``'s type and what it holds, as an error names it."""
    name = type(item).__name__
    named = f"an {name}" if name[:1] in "AEIOU" else f"a {name}"
    if isinstance(item, BinaryContent):
        return f"{named} ({item.media_type})"
    return f"{named} ({_KINDS[name]})" if name in _KINDS else named


def _content_item(item: object, where: str) -> Chat:
    """A text or image item of a prompt or a tool's return as an OpenAI part."""
    if isinstance(item, str | TextContent):
        return {"type": "text", "text": _text(item)}
    try:
        if isinstance(item, ImageUrl):
            return ImagePart(url=item.url).to_chat_part()
        if isinstance(item, BinaryContent) and item.is_image:
            return ImagePart(data=base64.b64encode(item.data).decode("ascii"),
                             media_type=item.media_type).to_chat_part()
    except InvalidInputError as error:
        raise InvalidInputError(f"{where}: {error}") from None
    raise InvalidInputError(f"{where} is {_kind(item)}, which contextwright cannot carry "
                            "(text and images only)")


def _response(message: ModelResponse, where: str) -> list[Chat]:
    """The response as one assistant message; none when it held only parts left out.

    Native tool parts and the files the model generated (``FilePart``: an image of the
    provider's image generation or code interpreter) are left out (``build`` warns of them).
    """
    texts: list[str] = []
    calls: list[Chat] = []
    thinking: list[Chat] = []
    summaries: list[Chat] = []  # a provider's compaction, carried as its summary
    left_out = 0
    for number, part in enumerate(message.parts):
        if isinstance(part, TextPart):
            texts.append(part.content)
        elif isinstance(part, ThinkingPart):
            if _is_claude_signed(message, part):
                thinking.append(_thinking_block(part))
        elif isinstance(part, ToolCallPart):
            calls.append({"id": part.tool_call_id, "type": "function", "function": {
                "name": part.tool_name, "arguments": part.args_as_json_str()}})
        elif isinstance(part, (*_NATIVE_TOOL_PARTS, FilePart)):
            left_out += 1
        elif isinstance(part, CompactionPart):
            summaries.append(_summary(part, f"{where}.parts[{number}]"))
        else:
            raise InvalidInputError(f"{where}.parts[{number}] is a {type(part).__name__}, "
                                    "which contextwright cannot carry")
    if left_out + len(summaries) == len(message.parts):
        return summaries  # an empty assistant message would say the model answered nothing
    chat: Chat = {"role": "assistant", "content": "\n".join(texts) or None}
    if calls:
        chat["tool_calls"] = calls
    if thinking:
        chat["thinking_blocks"] = thinking
    return [*summaries, chat]


ANTHROPIC = "anthropic"
"""The ``provider_name`` of Anthropic's parts, whose signed thinking the API takes back."""
BEDROCK = "bedrock"
"""The ``provider_name`` of ``BedrockConverseModel``'s parts (Claude's thinking among them)."""
_REDACTED = "redacted_thinking"
"""The ``ThinkingPart.id`` of Anthropic's redacted thinking (its data is the signature)."""
_REDACTED_IDS = frozenset((_REDACTED, "redacted_content"))
"""The ids of Claude's redacted thinking: ``AnthropicModel``'s, and ``BedrockConverseModel``'s."""


def _is_claude_signed(message: ModelResponse, part: ThinkingPart) -> bool:
    """Whether ``part`` is Claude's signed thinking, which Anthropic's keys verify.

    ``AnthropicModel`` records it under ``anthropic``; ``BedrockConverseModel`` under
    ``bedrock``, with the response's ``canonical_system`` saying whose keys verify it
    (``anthropic`` for Claude, ``bedrock`` for another model's encrypted reasoning; none for a
    model its name does not identify, whose thinking Pydantic AI sends back to Bedrock too).
    """
    if not part.signature:
        return False
    canonical = getattr(message, "canonical_system", None)  # newer Pydantic AI only
    if canonical is not None and part.provider_name == message.provider_name:
        return bool(canonical == ANTHROPIC)
    return part.provider_name in (ANTHROPIC, BEDROCK)


def _thinking_block(part: ThinkingPart) -> Chat:
    if part.id in _REDACTED_IDS:
        return {"type": "redacted_thinking", "data": part.signature}
    return {"type": "thinking", "thinking": part.content, "signature": part.signature}


def _thinking_part(block: Mapping[str, Any]) -> ThinkingPart:
    """The ``ThinkingPart`` an Anthropic model sends back as ``block``."""
    if block.get("type") == "redacted_thinking":
        return ThinkingPart(content="", id=_REDACTED, signature=block.get("data"),
                            provider_name=ANTHROPIC)
    return ThinkingPart(content=str(block.get("thinking") or ""),
                        signature=block.get("signature"), provider_name=ANTHROPIC)


def to_pydantic_ai(messages: Sequence[Mapping[str, Any]]) -> list[ModelMessage]:
    """Pydantic AI messages for OpenAI chat dicts: request parts in a row share one request."""
    return _messages_with_cache_points(messages, ())


def _messages_with_cache_points(messages: Sequence[Mapping[str, Any]], points: Sequence[int]
                                ) -> list[ModelMessage]:
    """``to_pydantic_ai``, with a ``CachePoint`` at the end of each message of ``points``.

    A user prompt ends with it; after a tool's return or an assistant's answer it opens a
    prompt part of its own, which Pydantic AI's Anthropic model reads as "cache up to the end
    of the block before" (the return's ``tool_result``, the answer's last block) and sends as
    no content. The system message's end is the ``anthropic_cache_instructions`` setting's.
    """
    marked = frozenset(points)
    result: list[ModelMessage] = []
    parts: list[ModelRequestPart] = []
    names: dict[str, str] = {}  # tool-call id → tool name, for the results that follow
    after_answer = False  # the last response ends a stable part: the next request marks it
    for index, message in enumerate(messages):
        role, content = message.get("role"), message.get("content") or ""
        if role != "assistant" and after_answer:
            parts.append(UserPromptPart(content=[CachePoint()]))
            after_answer = False
        if role == "assistant":
            if parts:
                result.append(ModelRequest(parts=parts))
                parts = []
            result.append(_to_response(message, names))
            # Thinking alone takes no breakpoint (Anthropic caches no thinking block).
            after_answer = index in marked and bool(content or message.get("tool_calls"))
        elif role == "system":
            parts.append(SystemPromptPart(content=content))
        elif role == "user":
            parts.append(UserPromptPart(content=_prompt_content(message, index)))
        elif role == "tool":
            call_id = str(message.get("tool_call_id"))
            parts.append(ToolReturnPart(tool_name=names.get(call_id) or str(message.get("name")),
                                        content=_return_content(message, index),
                                        tool_call_id=call_id))
        else:
            raise InvalidInputError(f"messages[{index}]: role {role!r} has no Pydantic AI part")
        if index in marked and role in ("user", "tool"):
            parts[-1:] = _marked_end(parts[-1])
    if parts:
        result.append(ModelRequest(parts=parts))
    return result


def _marked_end(part: ModelRequestPart) -> list[ModelRequestPart]:
    """``part`` followed by a ``CachePoint``: at the end of a user prompt, else in a prompt after.

    A tool's return cannot hold one; the prompt part after it holds nothing else.
    """
    if not isinstance(part, UserPromptPart):
        return [part, UserPromptPart(content=[CachePoint()])]
    content = part.content
    items = [content] if isinstance(content, str) else list(content)
    return [dataclasses.replace(part, content=[*items, CachePoint()])]


def _prompt_content(message: Mapping[str, Any], index: int
                    ) -> str | list[str | ImageUrl | BinaryContent]:
    """A user message's text, or its text and images as Pydantic AI's content items."""
    content = message.get("content")
    if not isinstance(content, list):
        return content or ""
    parsed = parse_message(message, f"messages[{index}]")
    items: list[str | ImageUrl | BinaryContent] = [parsed.content] if parsed.content else []
    items += [_pydantic_image(image) for image in parsed.images]
    return items


def _return_content(message: Mapping[str, Any], index: int
                    ) -> str | list[str | ImageUrl | BinaryContent]:
    """A tool message's text, or its text and image parts, in order, as a return's items."""
    content = message.get("content")
    if not isinstance(content, list):
        return content or ""
    items: list[str | ImageUrl | BinaryContent] = []
    for number, part in enumerate(content):
        place = f"messages[{index}].content[{number}]"
        if isinstance(part, Mapping) and part.get("type") == "text":
            items.append(str(part.get("text") or ""))
        else:
            items.append(_pydantic_image(image_from_part(part, place)))
    return items


def _pydantic_image(image: ImagePart) -> ImageUrl | BinaryContent:
    if image.data is not None:
        return BinaryContent(data=base64.b64decode(image.data), media_type=str(image.media_type))
    return ImageUrl(url=str(image.url))


def _to_response(message: Mapping[str, Any], names: dict[str, str]) -> ModelResponse:
    response_parts: list[TextPart | ToolCallPart | ThinkingPart] = [
        _thinking_part(block) for block in message.get("thinking_blocks") or ()]
    if message.get("content"):
        response_parts.append(TextPart(content=message["content"]))
    for call in message.get("tool_calls") or ():
        names[call["id"]] = call["function"]["name"]
        response_parts.append(ToolCallPart(tool_name=call["function"]["name"],
                                           args=json.loads(call["function"]["arguments"] or "{}"),
                                           tool_call_id=call["id"]))
    return ModelResponse(parts=response_parts)
