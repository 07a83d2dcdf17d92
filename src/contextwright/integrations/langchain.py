"""LangChain v1 / LangGraph: an agent middleware that lets contextwright decide what the model sees.

``ContextwrightMiddleware`` goes into ``create_agent(..., middleware=[...])``. Before every model
call it builds the context from the agent's messages, system prompt and tools (plan, budget,
tool-pair safety, fencing) and hands the model that instead; the agent's own state keeps the full
conversation. Each build's report lands in the state under ``contextwright_report`` (as its
plain dict, so every checkpointer can save it); ``report_from_state(state)`` gives the
``BuildReport`` back. It
is an alternative to ``trim_messages`` and ``SummarizationMiddleware``, not a companion: run one
of them, not both. ``to_langchain`` / ``from_langchain`` convert messages either way. Needs the
``langchain`` extra; importing this module imports LangChain.
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
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.types import Command

from contextwright.builder import ContextBuilder
from contextwright.convert import chat_messages, to_langchain
from contextwright.core.final import FinalContext
from contextwright.core.report import BuildReport
from contextwright.errors import InvalidInputError
from contextwright.integrations._core import (
    ContextShaper,
    ConversionMemo,
    PlanChoice,
    kept_tool_names,
    report_from_dict,
    system_and_rest,
)

__all__ = ["ContextwrightMiddleware", "ContextwrightState", "from_langchain", "report_from_state",
           "to_langchain"]

REPORT_KEY = "contextwright_report"
"""The state key the middleware writes each build's report to."""


class ContextwrightState(AgentState[Any]):
    """The agent state with the last build's report (``BuildReport.to_dict()``)."""

    contextwright_report: NotRequired[Annotated[dict[str, Any], OmitFromInput]]


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
    """What a message's conversion reads, by object (see ``ConversionMemo``)."""
    fields = message.__dict__  # a missing attribute is slow to ask a pydantic model for
    calls = fields.get("tool_calls")
    invalid = fields.get("invalid_tool_calls")
    return (fields.get("content"), fields.get("id"), fields.get("additional_kwargs"), calls,
            len(calls) if calls else 0, invalid, len(invalid) if invalid else 0,
            fields.get("status"))


class ContextwrightMiddleware(AgentMiddleware[ContextwrightState, Any, Any]):
    """Replaces each model call's messages with contextwright's build of them.

    ``plan`` is a ``BuildPlan``, a shipped plan's name or a function of the ``Request``
    (``None``: ``select_plan`` per call); ``budget`` caps the whole context in tokens (system
    prompt, tool schemas and messages; ``None``: the plan's budget for the builder's model).
    Tools the build leaves out (a plan with a tool budget) are not offered to the model.
    """

    state_schema = ContextwrightState

    def __init__(self, *, builder: ContextBuilder | None = None, plan: PlanChoice = None,
                 budget: int | None = None) -> None:
        super().__init__()
        self.shaper = ContextShaper(builder=builder or ContextBuilder(), plan=plan,
                                    budget=budget)
        self._chats = ConversionMemo(from_langchain, _fingerprint)

    def shape(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], FinalContext]:
        """The model request with the built messages, system prompt and tools, and the build."""
        schemas = [_tool_schema(tool, index) for index, tool in enumerate(request.tools)]
        system = request.system_message.text if request.system_message is not None else None
        context = self.shaper.build(self._chats(request.messages), system=system,
                                    tools=[schema for schema in schemas if schema is not None])
        # With their reasoning: the loop's thinking goes back to a ChatAnthropic model.
        system_text, rest = system_and_rest(context.to_messages("openai", reasoning=True))
        kept = kept_tool_names(context)
        tools = [tool for tool, schema in zip(request.tools, schemas, strict=True)
                 if schema is None or schema["function"]["name"] in kept]
        shaped = request.override(
            messages=to_langchain(rest),
            system_message=SystemMessage(content=system_text) if system_text else None,
            tools=tools)
        return shaped, context

    def wrap_model_call(
        self, request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """Build, call the model with the build, and put the report into the state."""
        shaped, context = self.shape(request)
        return _with_report(handler(shaped), context.report)

    async def awrap_model_call(
        self, request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """``wrap_model_call`` for an async agent (the build runs on a worker thread)."""
        shaped, context = await asyncio.to_thread(self.shape, request)
        return _with_report(await handler(shaped), context.report)


def _with_report(response: ModelResponse[Any] | AIMessage, report: BuildReport
                 ) -> ExtendedModelResponse[Any]:
    if isinstance(response, AIMessage):
        response = ModelResponse(result=[response])
    return ExtendedModelResponse(model_response=response,
                                 command=Command(update={REPORT_KEY: report.to_dict()}))


def _tool_schema(tool: object, index: int) -> dict[str, Any] | None:
    """The OpenAI function schema of a tool; ``None`` for a provider's built-in tool dict."""
    if isinstance(tool, Mapping) and tool.get("type") not in (None, "function"):
        return None  # e.g. {"type": "web_search"}: the provider's own, it has no schema to count
    try:
        return convert_to_openai_tool(tool)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"tools[{index}] has no function schema ({exc})") from None
