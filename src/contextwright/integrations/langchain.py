"""LangChain v1 / LangGraph: an agent middleware that lets contextwright decide what the model sees.

``ContextwrightMiddleware`` goes into ``create_agent(..., middleware=[...])``. Before every model
call it builds the context from the agent's messages, system prompt and tools (plan, budget,
tool-pair safety, fencing) and hands the model that instead; the agent's own state keeps the full
conversation. Each build continues the layout of the thread's last one (its fingerprint is kept
in the state under ``contextwright_fingerprint``), so the provider's prompt cache stays warm;
``cache=False`` turns that off. A tool result's images reach the model as images where its API
takes them, and as placeholders, warned of in the report, where it does not.
Each build's report lands in the state under ``contextwright_report`` (as its
plain dict, so every checkpointer can save it); ``report_from_state(state)`` gives the
``BuildReport`` back. Blocks of a tool the provider ran itself (``web_search_call``,
``server_tool_use`` and its results, ``server_tool_call``...) stay in the state and are left out
of the build, which the report's warnings count; a system prompt given as content blocks (a
``cache_control`` breakpoint on it) reaches the model as given, the build's additions after it. It
is an alternative to ``trim_messages`` and ``SummarizationMiddleware``, not a companion: run one
of them, not both. ``to_langchain`` / ``from_langchain`` convert messages either way. Needs the
``langchain`` extra; importing this module imports LangChain.

With ``cache`` on, the model is also asked to cache that stable prefix, the way its LangChain
model takes it: a ``ChatAnthropic`` model gets ``cache_control`` breakpoints on the content
blocks that end the stable parts (the system prompt's last block, history's last message...),
four at most with those the system prompt or tools already carry; a ``ChatOpenAI`` model gets
``prompt_cache_key``, a keyed hash of the LangGraph thread's id (none without a ``thread_id``),
unless the model or the agent already sends one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    OmitFromInput,
)
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config
from langgraph.types import Command

from contextwright.builder import ContextBuilder
from contextwright.convert import chat_messages, is_hosted_tool_part, to_langchain
from contextwright.core.cache import CachePolicy
from contextwright.core.final import FinalContext
from contextwright.core.images import ImagePart
from contextwright.core.providers import CACHE_CONTROL
from contextwright.core.report import BuildReport
from contextwright.errors import InvalidInputError
from contextwright.integrations._core import (
    FINGERPRINT_KEY,
    CacheHints,
    ContextShaper,
    ConversionMemo,
    PlanChoice,
    cache_hints,
    conversation_cache_key,
    fingerprint_to_keep,
    kept_tool_names,
    report_from_dict,
    snapshot,
    stored_fingerprint,
    system_and_rest,
    tool_image_parts,
    with_warning,
)

__all__ = ["ContextwrightMiddleware", "ContextwrightState", "from_langchain", "report_from_state",
           "to_langchain"]

REPORT_KEY = "contextwright_report"
"""The state key the middleware writes each build's report to."""


class ContextwrightState(AgentState[Any]):
    """The agent state with the last build's report (``BuildReport.to_dict()``)."""

    contextwright_report: NotRequired[Annotated[dict[str, Any], OmitFromInput]]
    contextwright_fingerprint: NotRequired[Annotated[dict[str, Any], OmitFromInput]]
    """The last build's fingerprint, which the thread's next build continues (its dict)."""


def report_from_state(state: Mapping[str, Any]) -> BuildReport:
    """The last build's ``BuildReport`` from an agent's state or ``invoke`` result."""
    if REPORT_KEY not in state:
        raise InvalidInputError(f"the state has no {REPORT_KEY!r}: no model call went through "
                                "ContextwrightMiddleware")
    return report_from_dict(state[REPORT_KEY])


def from_langchain(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """OpenAI chat dicts for LangChain messages (ids, names and tool-call ids kept)."""
    return chat_messages(list(messages), "messages")


def _fingerprint(message: BaseMessage) -> tuple[Any, ...]:
    """What a message's conversion reads, copied (see ``ConversionMemo``).

    Empty containers count as ``None``: kept as they are, the fingerprint would share them
    with the message and miss what is added to them later.
    """
    get = message.__dict__.get  # a missing attribute is slow to ask a pydantic model for
    content, extra = get("content"), get("additional_kwargs")
    calls, invalid = get("tool_calls"), get("invalid_tool_calls")
    return (get("type"), content if type(content) is str else snapshot(content), get("id"),
            get("name"), snapshot(extra) if extra else None,
            snapshot(calls) if calls else None, snapshot(invalid) if invalid else None,
            get("tool_call_id"), get("status"))


def _hosted_tool_blocks(messages: Sequence[BaseMessage]) -> dict[str, int]:
    """How many blocks of each type of the provider's own tools ``messages`` hold."""
    counts: dict[str, int] = {}
    for message in messages:
        content = message.content
        if isinstance(content, list):
            for block in content:
                kind = block.get("type") if isinstance(block, dict) else None
                if is_hosted_tool_part(kind):
                    counts[str(kind)] = counts.get(str(kind), 0) + 1
    return counts


class ContextwrightMiddleware(AgentMiddleware[ContextwrightState, Any, Any]):
    """Replaces each model call's messages with contextwright's build of them.

    ``plan`` is a ``BuildPlan``, a shipped plan's name or a function of the ``Request``
    (``None``: ``select_plan`` per call); ``budget`` caps the whole context in tokens (system
    prompt, tool schemas and messages; ``None``: the plan's budget for the builder's model).
    Tools the build leaves out (a plan with a tool budget) are not offered to the model.
    ``cache`` keeps the provider's prompt cache warm: each build continues the layout of the
    thread's last one (its fingerprint is kept in the state under
    ``contextwright_fingerprint``, so each thread continues its own); ``False`` cuts every
    call afresh.
    """

    state_schema = ContextwrightState

    def __init__(self, *, builder: ContextBuilder | None = None, plan: PlanChoice = None,
                 budget: int | None = None, cache: CachePolicy | bool = True) -> None:
        super().__init__()
        self.shaper = ContextShaper(builder=builder or ContextBuilder(), plan=plan,
                                    budget=budget, cache=cache)
        self._chats = ConversionMemo(from_langchain, _fingerprint)

    def shape(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], FinalContext]:
        """The model request with the built messages, system prompt and tools, and the build."""
        schemas = [_tool_schema(tool, index) for index, tool in enumerate(request.tools)]
        given = request.system_message
        system = given.text if given is not None else None
        cached = self.shaper.cache is not False
        previous = (stored_fingerprint((request.state or {}).get(FINGERPRINT_KEY))
                    if cached else None)
        key = conversation_cache_key("langchain", _thread_id()) if cached else None
        context = self.shaper.build(self._chats(request.messages), system=system,
                                    tools=[schema for schema in schemas if schema is not None],
                                    previous=previous, cache_key=key)
        hosted = _hosted_tool_blocks(request.messages)
        if hosted:
            context = with_warning(context, (
                f"left out {sum(hosted.values())} block(s) of the provider's own tools "
                f"({', '.join(sorted(hosted))}): the provider ran them, and the model's answer "
                "after them says what they found; the agent's state keeps them"))
        context, tool_contents = _tool_images(context, request)
        # With their reasoning: the loop's thinking goes back to a ChatAnthropic model.
        system_text, rest = system_and_rest(context.to_messages("openai", reasoning=True))
        system_message, dropped = _system_message(given, system_text)
        if dropped:
            context = with_warning(context, dropped)
        kept = kept_tool_names(context)
        tools = [tool for tool, schema in zip(request.tools, schemas, strict=True)
                 if schema is None or schema["function"]["name"] in kept]
        messages = _with_contents(to_langchain(rest), tool_contents)
        # The tools take no breakpoint of their own: one on the system prompt or a message
        # caches them too, as they come first.
        placed = _cache_controls(system_message) + sum(
            1 for tool in tools if isinstance(tool, Mapping) and "cache_control" in tool)
        hints = cache_hints(self.shaper, context, system=system_message is not None,
                            tools=False, placed=placed)
        model = _model_kind(request.model)
        if model == "anthropic":
            system_message, messages = _with_breakpoints(
                hints, system_message, messages, len(context.messages) - len(rest))
        settings = request.model_settings
        if model == "openai" and hints.key is not None and not _sends_cache_key(request):
            settings = {**settings, "prompt_cache_key": hints.key}
        shaped = request.override(messages=messages, system_message=system_message,
                                  tools=tools, model_settings=settings)
        return shaped, context

    def wrap_model_call(
        self, request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """Build, call the model with the build, and put the report into the state."""
        shaped, context = self.shape(request)
        return self._with_build(handler(shaped), context)

    async def awrap_model_call(
        self, request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """``wrap_model_call`` for an async agent (the build runs on a worker thread)."""
        shaped, context = await asyncio.to_thread(self.shape, request)
        return self._with_build(await handler(shaped), context)

    def _with_build(self, response: ModelResponse[Any] | AIMessage, context: FinalContext
                    ) -> ExtendedModelResponse[Any]:
        """The model's response, with the build's report (and fingerprint) put into the state."""
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        update: dict[str, Any] = {REPORT_KEY: context.report.to_dict()}
        fingerprint = fingerprint_to_keep(self.shaper, context)
        if fingerprint is not None:
            update[FINGERPRINT_KEY] = fingerprint
        return ExtendedModelResponse(model_response=response, command=Command(update=update))


def _thread_id() -> object:
    """The LangGraph thread's id of the running agent (None outside a run or without one)."""
    try:
        config = get_config()
    except RuntimeError:  # called outside a graph run (a test calling ``shape`` itself)
        return None
    return (config.get("configurable") or {}).get("thread_id")


_OPENAI_MODELS = frozenset(("openai-chat", "azure-openai-chat"))
"""``_llm_type`` of the LangChain models that send OpenAI's own API (``ChatOpenAI``,
``AzureChatOpenAI``), which takes ``prompt_cache_key``; the models of other providers built on
them name themselves otherwise, and may refuse a field they do not know."""


def _model_kind(model: object) -> str | None:
    """``anthropic`` or ``openai`` for a model whose cache hints the middleware sends, else None.

    A ``ChatAnthropic`` (and the models built on its message format, ``anthropic-chat...``)
    reads ``cache_control`` on content blocks; ``ChatOpenAI`` takes ``prompt_cache_key``.
    """
    model = getattr(model, "bound", model)  # a model with bound settings
    kind = getattr(model, "_llm_type", None)
    if not isinstance(kind, str):
        return None
    if kind.startswith("anthropic-chat"):
        return "anthropic"
    return "openai" if kind in _OPENAI_MODELS else None


def _sends_cache_key(request: ModelRequest[Any]) -> bool:
    """Whether the agent or its model already sends a ``prompt_cache_key`` of its own."""
    model = request.model
    bound = getattr(model, "kwargs", None)  # ``model.bind(prompt_cache_key=...)``
    inner = getattr(model, "bound", model)
    given = getattr(inner, "model_kwargs", None)  # ``ChatOpenAI(model_kwargs={...})``
    return any(isinstance(where, Mapping) and "prompt_cache_key" in where
               for where in (request.model_settings, bound, given))


def _cache_controls(message: SystemMessage | None) -> int:
    """How many ``cache_control`` breakpoints the system message's blocks already carry.

    Its last block's is not counted: the system prompt's own breakpoint goes there anyway.
    """
    if message is None or not isinstance(message.content, list):
        return 0
    return sum(1 for block in message.content[:-1]
               if isinstance(block, dict) and "cache_control" in block)


def _with_breakpoints(hints: CacheHints, system: SystemMessage | None, messages: list[Any],
                      offset: int) -> tuple[SystemMessage | None, list[Any]]:
    """The system message and messages with ``cache_control`` on the hints' last blocks.

    ``offset``: the build's messages before ``messages`` (its system message). An assistant
    message whose calls end it takes none: ChatAnthropic sends its calls from ``tool_calls``,
    which carry no ``cache_control``.
    """
    if hints.system and system is not None:
        system = _marked(system) or system
    marked = list(messages)
    for index in hints.messages:
        position = index - offset
        if 0 <= position < len(marked):
            marked[position] = _marked(marked[position]) or marked[position]
    return system, marked


def _marked(message: Any) -> Any | None:
    """``message`` with ``cache_control`` on its last content block (None: it takes none).

    None for an assistant message that ends with its calls, and for a message whose last
    block is blank text or thinking (the Messages API takes no breakpoint there).
    """
    if isinstance(message, AIMessage) and message.tool_calls:
        return None
    content = message.content
    blocks: list[Any] = ([{"type": "text", "text": content}] if isinstance(content, str)
                         else list(content))
    if not blocks:
        return None
    last = blocks[-1]
    last = {"type": "text", "text": last} if isinstance(last, str) else last
    if not isinstance(last, dict) or last.get("type") in ("thinking", "redacted_thinking") \
            or (last.get("type") == "text" and not str(last.get("text") or "").strip()):
        return None
    if "cache_control" in last:  # the caller's own (its ttl kept)
        return message
    blocks[-1] = {**last, "cache_control": dict(CACHE_CONTROL)}
    return message.model_copy(update={"content": blocks})


def _tool_images(context: FinalContext, request: ModelRequest[Any]
                 ) -> tuple[FinalContext, dict[str, list[dict[str, Any]]]]:
    """The content of each tool result that carries images, by call id, and what is warned.

    A tool result's images stay images, inside its fence, where the model's API takes them in
    a tool's result (the Responses API, Anthropic); a model that sends Chat Completions, whose
    tool messages carry text only, gets the build's placeholders, and the report's warnings
    say how many.
    """
    with_images = [message for message in context.messages
                   if message.role == "tool" and message.images and message.tool_call_id]
    if not with_images:
        return context, {}
    if _takes_tool_images(request):
        return context, {str(message.tool_call_id): tool_image_parts(message, _image_url)
                         for message in with_images}
    shown = sum(len(message.images) for message in with_images)
    return with_warning(context, (
        f"{shown} image(s) of tool results shown as placeholders: the model sends Chat "
        "Completions, whose tool messages carry text only (the Responses API and Anthropic "
        "take them); the agent's state keeps them")), {}


def _with_contents(messages: list[Any], contents: Mapping[str, list[dict[str, Any]]]
                   ) -> list[Any]:
    """``messages`` with the tool results named in ``contents`` given that content."""
    if not contents:
        return messages
    return [message.model_copy(update={"content": contents[message.tool_call_id]})
            if isinstance(message, ToolMessage) and message.tool_call_id in contents
            else message for message in messages]


def _takes_tool_images(request: ModelRequest[Any]) -> bool:
    """Whether the request's model sends a tool result's images as images.

    An OpenAI chat model (``ChatOpenAI`` and the models built on it) says itself whether it
    sends this request to the Responses API, whose ``function_call_output`` takes images, or to
    Chat Completions, which does not. Any other model gets them as LangChain gives a tool's
    images, and renders them its own way (ChatAnthropic in its ``tool_result``).
    """
    model = getattr(request.model, "bound", request.model)  # a model with bound settings
    uses_responses = getattr(model, "_use_responses_api", None)
    if not callable(uses_responses):
        return True
    payload = {**(request.model_settings or {}),
               "tools": [tool for tool in request.tools if isinstance(tool, Mapping)]}
    try:
        return bool(uses_responses(payload))
    except (AttributeError, TypeError, ValueError):  # a model that is not quite ChatOpenAI
        return False


def _image_url(image: ImagePart) -> dict[str, Any]:
    """An ``image_url`` part with its ``detail`` always given, as the Responses API wants it."""
    return {"type": "image_url", "image_url": {"url": image.source, "detail": image.detail}}


def _system_message(given: SystemMessage | None, built: str | None
                    ) -> tuple[SystemMessage | None, str | None]:
    """The system message to send for the build's system text, and a warning when needed.

    A system prompt given as content blocks may carry what its text does not: a
    ``cache_control`` breakpoint (Anthropic's prompt cache), a block of another type. While the
    build's text begins with the given text, those blocks are sent as given and what the build
    added (the data note...) follows as one more text block; otherwise (a plan that puts another
    system part first) the build's text goes alone, and the warning says what was not carried.
    """
    if not built:
        return None, None
    if given is None or not isinstance(given.content, list):
        return SystemMessage(content=built), None
    text = given.text
    if not built.startswith(text):
        return SystemMessage(content=built), (
            "the system prompt's content blocks (and any cache_control on them) were not "
            "carried: the build does not begin with the system prompt, so its text was sent "
            "as one string")
    blocks: list[str | dict[Any, Any]] = list(given.content)
    added = built[len(text):].lstrip("\n")
    if added:
        blocks.append({"type": "text", "text": added})
    return SystemMessage(content=blocks), None


def _tool_schema(tool: object, index: int) -> dict[str, Any] | None:
    """The OpenAI function schema of a tool; ``None`` for a provider's built-in tool dict."""
    if isinstance(tool, Mapping) and tool.get("type") not in (None, "function"):
        return None  # e.g. {"type": "web_search"}: the provider's own, it has no schema to count
    try:
        return convert_to_openai_tool(tool)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"tools[{index}] has no function schema ({exc})") from None
