"""What every framework integration shares: from a framework's message list to one build.

A framework hands over the conversation as it will send it (system prompt, earlier turns, the
current user message, this turn's tool calls and results). ``ContextShaper`` splits it the way
contextwright's sources read a turn, picks the plan, applies the budget and builds; each
integration only converts its framework's message types to OpenAI chat dicts and back. No I/O
happens here beyond what the builder's sources do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, cast

from contextwright.builder import ContextBuilder, session_cache_key
from contextwright.checks import whole_number
from contextwright.core.cache import (
    MAX_BREAKPOINTS,
    CachePolicy,
    Fingerprint,
    breakpoint_ends,
    cache_report_from_dict,
)
from contextwright.core.final import FinalContext
from contextwright.core.images import ImagePart
from contextwright.core.items import Message, parse_message
from contextwright.core.plan import BuildPlan
from contextwright.core.providers import image_segments, openai_image, prompt_cache_key
from contextwright.core.report import BuildReport, Decision, SourceReport
from contextwright.core.request import Request
from contextwright.errors import (
    ConfigurationError,
    InvalidInputError,
    PlanError,
    StoreUsageError,
)
from contextwright.plans import select_plan
from contextwright.session.flow import is_async_store
from contextwright.session.store import Store

PlanChoice: TypeAlias = BuildPlan | str | Callable[[Request], BuildPlan] | None
"""A plan, a shipped plan's name, a function of the request, or ``None`` for ``select_plan``."""

Chat: TypeAlias = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """A conversation split the way a build reads it."""

    system: str | None
    """The system messages' text, joined (``None`` when there is none)."""
    history: tuple[Mapping[str, Any], ...]
    """Messages before the last user message."""
    user_input: str
    """The last user message's text."""
    turn: tuple[Mapping[str, Any], ...]
    """Tool calls, results and replies after the last user message."""
    images: tuple[ImagePart, ...] = ()
    """The last user message's images."""


FEEDBACK = "contextwright_feedback"
"""Marks a user-role chat dict the framework wrote, not the user: a retry's feedback.

A framework that rejects an answer (an output validator's ``ModelRetry``) asks again in the
user's role; the question being answered is still the user's last own message, so the build
keeps choosing and recalling history for that, and the feedback is part of this turn.
"""


def split_turn(messages: Sequence[Mapping[str, Any]], system: str | None = None) -> Turn:
    """Split OpenAI chat dicts at the last user message; system messages join ``system``.

    A user message marked ``FEEDBACK`` does not start a turn: it follows the user's own
    message in ``turn`` (only a conversation with no message of the user's own is split at
    its last feedback). A conversation without a user message cannot be built (the build
    needs this turn's input), so it is an ``InvalidInputError``.
    """
    systems = [system] if system else []
    rest: list[Mapping[str, Any]] = []
    last = last_feedback = -1
    for message in messages:  # one pass: an agent's conversation may be 100,000 messages
        role = message.get("role")
        if role == "system":
            systems.append(str(message.get("content") or ""))
            continue
        if role == "user":
            if message.get(FEEDBACK):
                last_feedback = len(rest)
            else:
                last = len(rest)
        rest.append(message)  # the same object: the builder remembers its parse by object
    if last < 0:
        last = last_feedback
    if last < 0:
        raise InvalidInputError("messages: the conversation has no user message to answer")
    user = parse_message(rest[last], "messages[last user]")
    return Turn(system="\n\n".join(systems) if systems else None, history=tuple(rest[:last]),
                user_input=user.content, turn=tuple(rest[last + 1:]), images=user.images)


def resolve_plan(choice: PlanChoice, request: Request) -> BuildPlan:
    """The plan ``choice`` names for ``request``.

    A function may return a ``BuildPlan`` or a shipped plan's name, as ``plan=`` itself takes;
    anything else is a ``PlanError`` naming what it returned.
    """
    if choice is None:
        return select_plan(_as_asked(request))
    if isinstance(choice, BuildPlan):
        return choice
    if isinstance(choice, str):
        return BuildPlan.named(choice)
    chosen = choice(request)
    if isinstance(chosen, BuildPlan):
        return chosen
    if isinstance(chosen, str):
        return BuildPlan.named(chosen)
    raise PlanError(f"the plan function returned a {type(chosen).__name__}, not a BuildPlan "
                    "or a shipped plan's name")


def _as_asked(request: Request) -> Request:
    """``request`` as the plan is chosen for it: a retry's turn is no tool loop.

    A turn of the model's rejected answer and the framework's feedback has no tool activity:
    the retry is chosen the plan its first attempt had (``select_plan`` takes any turn for a
    tool loop), so it sees the history that attempt saw.
    """
    turn = request.turn
    if not turn or not any(message.get(FEEDBACK) for message in turn):
        return request
    if any(message.get("role") == "tool" or message.get("tool_calls") for message in turn):
        return request
    return dataclasses.replace(request, turn=())


def checked_plan(choice: object) -> PlanChoice:
    """``choice`` as a shaper keeps it: a plan's name resolved now, a wrong kind refused now.

    Refused when the integration is made, so a misconfigured agent fails at once instead of at
    its first model call with a plain Python error.
    """
    if choice is None or isinstance(choice, BuildPlan):
        return choice
    if isinstance(choice, str):
        return BuildPlan.named(choice)  # an unknown name is a PlanError naming the shipped ones
    if callable(choice):
        return cast(Callable[[Request], BuildPlan], choice)
    raise ConfigurationError(
        f"plan must be a BuildPlan, a shipped plan's name, a function of the Request or None, "
        f"not {type(choice).__name__}")


def checked_builder(builder: object) -> ContextBuilder:
    """``builder``, refused with ``ConfigurationError`` when it is not a ``ContextBuilder``."""
    if isinstance(builder, ContextBuilder):
        return builder
    hint = (f" (for a model's name: builder=ContextBuilder(model={builder!r}))"
            if isinstance(builder, str) else "")
    raise ConfigurationError(f"builder must be a ContextBuilder, not "
                             f"{type(builder).__name__}{hint}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextShaper:
    """Builds the context of one model call from a framework's messages.

    Immutable and shared by every call of an agent, so it is safe across threads and runs.
    """

    builder: ContextBuilder = field(default_factory=ContextBuilder)
    """Counts and builds (its model, window and fence secret apply)."""
    plan: PlanChoice = None
    """The plan of every call; ``None`` picks one per call with ``select_plan``."""
    budget: int | None = None
    """Tokens the whole context may use (system, tools and messages); ``None``: the plan's."""
    cache: CachePolicy | bool = True
    """Keep a stable prefix across the calls of one conversation (``True`` or a
    ``CachePolicy``: each build continues the ``previous`` one it is given); ``False``: every
    build is cut afresh, as a build without ``previous`` is."""

    def __post_init__(self) -> None:
        """Refuse a wrong builder, plan, budget or cache setting now, not at the first call."""
        checked_builder(self.builder)
        object.__setattr__(self, "plan", checked_plan(self.plan))  # frozen: set once, here
        if not isinstance(self.cache, bool | CachePolicy):
            raise ConfigurationError(f"cache must be True, False or a CachePolicy, not "
                                     f"{type(self.cache).__name__}")
        budget = self.budget
        if budget is not None:
            whole_number(budget, "budget", minimum=1)

    def request(self, messages: Sequence[Mapping[str, Any]], *, system: str | None = None,
                tools: Sequence[Mapping[str, Any]] = ()) -> Request:
        """The request for ``messages`` (OpenAI chat dicts) with ``system`` and tool schemas."""
        turn = split_turn(messages, system)
        return Request(user_input=turn.user_input, system=turn.system, history=turn.history,
                       turn=turn.turn, tools=tuple(tools), images=turn.images)

    def plan_for(self, request: Request) -> BuildPlan:
        """The plan this shaper builds ``request`` with, its budget applied."""
        plan = resolve_plan(self.plan, request)
        return plan.with_budget(available_override=self.budget) if self.budget else plan

    def build(self, messages: Sequence[Mapping[str, Any]], *, system: str | None = None,
              tools: Sequence[Mapping[str, Any]] = (),
              previous: Fingerprint | None = None,
              cache_key: str | None = None) -> FinalContext:
        """Build the context for ``messages`` (OpenAI chat dicts).

        ``previous`` is the fingerprint of the same conversation's last build, which this one
        continues while ``cache`` is on (see ``stored_fingerprint``); it never comes from
        another conversation. ``cache_key`` names the conversation for the provider's cache
        routing (``conversation_cache_key``); with ``cache`` off it is not kept.
        """
        request = self.request(messages, system=system, tools=tools)
        plan = self.plan_for(request)
        if self.cache is False:
            return self.builder.build(plan, request)
        return self.builder.build(plan, request, previous=previous, cache=self.cache,
                                  cache_key=cache_key)


def conversation_cache_key(framework: str, conversation_id: object) -> str | None:
    """The provider cache key of one conversation of a framework (None: it names none).

    ``conversation_id`` is the id the framework gives the conversation (a LangGraph thread, a
    Pydantic AI conversation): a keyed hash of it (``session_cache_key``), so two
    conversations never share a key and the provider never sees the id itself. A framework
    that names no conversation gets no key: a key made of the messages would group different
    users' conversations that start alike.
    """
    if conversation_id is None or conversation_id == "":
        return None
    return session_cache_key(framework, str(conversation_id))


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheHints:
    """Where one model call asks its provider to cache, and the conversation's cache key.

    An integration puts these through its framework's own mechanism: Anthropic caches only up
    to its request's ``cache_control`` breakpoints, so without them the stable prefix a build
    keeps is written and read by no one; OpenAI caches by itself, and ``prompt_cache_key``
    sends the calls of one conversation to the same cache.
    """

    messages: tuple[int, ...] = ()
    """Indexes of the build's messages (its system message 0) whose last block ends a
    stable part: a breakpoint goes there."""
    system: bool = False
    """A breakpoint at the end of the system prompt (which caches the tools before it)."""
    tools: bool = False
    """A breakpoint on the last tool (only when there is no system prompt)."""
    key: str | None = None
    """The conversation's ``prompt_cache_key``, as OpenAI takes it."""


NO_HINTS = CacheHints()


def cache_hints(shaper: ContextShaper, context: FinalContext, *, system: bool, tools: bool,
                placed: int = 0) -> CacheHints:
    """The cache hints of ``context`` (none when the shaper's cache is off).

    The breakpoints are a direct build's (``FinalContext.to_request("anthropic")``): the system
    prompt's end (else the last tool's) and the ends of the stable parts (``cache_points``),
    the latest kept when there are more than Anthropic takes. ``system`` and ``tools`` say
    what the framework's request will carry (its own instructions count as system prompt);
    ``placed`` is how many breakpoints the request has already (the caller's own), which the
    earliest of ours make room for.
    """
    if shaper.cache is False:
        return NO_HINTS
    ends = breakpoint_ends(context.cache_points, system=system, tools=tools)
    marked = [end for end in ends if end > 0]
    fixed = placed < MAX_BREAKPOINTS  # the system prompt's (or the tools') comes first
    room = max(0, MAX_BREAKPOINTS - placed - (len(ends) - len(marked)))
    return CacheHints(messages=tuple(marked[max(0, len(marked) - room):]) if room else (),
                      system=fixed and 0 in ends, tools=fixed and -1 in ends,
                      key=prompt_cache_key(context.cache_key) if context.cache_key else None)


FINGERPRINT_KEY = "contextwright_fingerprint"
"""Where an integration keeps a conversation's last build's fingerprint (its dict)."""


def stored_fingerprint(data: object) -> Fingerprint | None:
    """The fingerprint kept as ``data`` (its ``to_dict()``); ``None`` starts a new cache line.

    A missing or unreadable one (written by another version, edited) only costs the cached
    prefix of one call, so it is not an error.
    """
    if data is None:
        return None
    try:
        return Fingerprint.from_dict(data)
    except InvalidInputError:
        return None


def fingerprint_to_keep(shaper: ContextShaper, context: FinalContext) -> dict[str, Any] | None:
    """What the conversation keeps of ``context`` for its next build (``None``: cache off)."""
    if shaper.cache is False:
        return None
    return context.fingerprint.to_dict()


def with_warning(context: FinalContext, warning: str) -> FinalContext:
    """``context`` whose report also warns ``warning`` (for what an integration left out)."""
    report = dataclasses.replace(context.report, warnings=(*context.report.warnings, warning))
    return dataclasses.replace(context, report=report)


def chats_with_tool_images(context: FinalContext,
                           image_part: Callable[[ImagePart], Chat] = openai_image) -> list[Chat]:
    """The build as chat dicts, each tool result's images as parts inside its fence.

    Chat Completions tool messages take text only, so ``to_messages("openai")`` shows their
    images as placeholders; a framework whose model sends a tool's images the way its provider
    takes them (the Responses API's ``function_call_output``, Anthropic's ``tool_result``) is
    given them back as ``image_part`` parts, in the order and place the build put them.
    """
    # One dict per message of the build, in order, with the open loop's reasoning.
    chats = context.to_messages("openai", reasoning=True)
    for chat, message in zip(chats, context.messages, strict=True):
        if message.role == "tool" and message.images:
            chat["content"] = tool_image_parts(message, image_part)
    return chats


def tool_image_parts(message: Message, image_part: Callable[[ImagePart], Chat]) -> list[Chat]:
    """A built tool message's text and images as content parts, the images inside its fence."""
    return [image_part(segment) if isinstance(segment, ImagePart)
            else {"type": "text", "text": segment}
            for segment in image_segments(message, lambda image: True)]


def kept_tool_names(context: FinalContext) -> frozenset[str]:
    """Names of the tool schemas the build kept."""
    return frozenset(str(schema.get("function", {}).get("name"))
                     for schema in context.tool_schemas)


def system_and_rest(messages: list[Chat]) -> tuple[str | None, list[Chat]]:
    """The leading system message's text (the build puts at most one, first) and the rest."""
    if messages and messages[0].get("role") == "system":
        return str(messages[0].get("content") or ""), messages[1:]
    return None, messages


def report_from_dict(data: Mapping[str, Any]) -> BuildReport:
    """The ``BuildReport`` back from its ``to_dict()`` form (as frameworks' checkpoints keep it).

    Framework state is saved by the framework's serializer, which takes plain JSON everywhere
    and our dataclasses nowhere (LangGraph's msgpack refuses unregistered types), so the
    integrations keep the report's dict in state and this reads it back, its cache report a
    ``CacheReport`` again.
    """
    cache = data.get("cache")
    try:
        return BuildReport(
            **{**data,
               "sources": tuple(SourceReport(**row) for row in data["sources"]),
               "decisions": tuple(Decision(**row) for row in data["decisions"]),
               "warnings": tuple(data.get("warnings") or ()),
               "cache": cache_report_from_dict(cache) if cache else None})
    except (KeyError, TypeError) as exc:
        raise InvalidInputError(f"not a build report ({exc})") from None


def snapshot(value: object) -> object:
    """``value`` with its list or dict copied, and the lists and dicts right inside it, to compare.

    A fingerprint that held a message's own content list would compare equal to it after any
    change made in place (a part appended, a key set): it is the same object. Two levels cover
    what is edited in place — a part appended or a block's text set, a call added or its
    arguments replaced — at little cost per call of a long conversation; a change deeper in
    (one argument's value inside a call's arguments) is not seen.
    """
    kind = type(value)
    if kind is list or kind is tuple:
        return tuple([_copied(item) for item in value])  # type: ignore[attr-defined]
    if kind is dict:
        return {key: _copied(item) for key, item in value.items()}  # type: ignore[attr-defined]
    if isinstance(value, Mapping):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return tuple([_copied(item) for item in value])
    return value


def _copied(value: object) -> object:
    """``value``, a copy of it when it is a list or a dict."""
    kind = type(value)
    return value.copy() if kind is dict or kind is list else value  # type: ignore[attr-defined]


class ConversionMemo:
    """Converts framework messages to chat dicts, each message object once.

    An agent's conversation is the same message objects call after call, so converting only
    the new ones keeps a 10,000-message conversation cheap, and handing the builder the same
    dicts lets it reuse what it parsed and counted. ``fingerprint`` gives what a message's
    conversion depends on (its content, its calls, its id...) as a ``snapshot``: a remembered
    conversion is used only while the fingerprint is equal, so a message changed by
    reassignment or in place (an appended part, an edited block) is converted again. It
    forgets everything past ``limit`` objects.
    """

    def __init__(self, convert_all: Callable[[Sequence[Any]], list[Chat]],
                 fingerprint: Callable[[Any], tuple[Any, ...]], limit: int = 200_000) -> None:
        self._convert_all = convert_all
        self._fingerprint = fingerprint
        self._limit = limit
        self._memo: dict[int, tuple[Any, tuple[Any, ...], list[Chat]]] = {}

    def __call__(self, items: Sequence[Any]) -> list[Chat]:
        """The chat dicts of ``items``, in order."""
        converted: list[Chat] = []
        memo, fingerprint = self._memo, self._fingerprint
        try:
            for item in items:
                hit = memo.get(id(item))
                if hit is not None and hit[0] is item and hit[1] == fingerprint(item):
                    converted.extend(hit[2])
                else:
                    converted.extend(self._remember(item))
        except InvalidInputError:
            self._convert_all(items)  # raises the same error, naming the item's position
            raise
        return converted

    def _remember(self, item: Any) -> list[Chat]:
        chats = self._convert_all([item])
        if len(self._memo) >= self._limit:
            self._memo.clear()
        self._memo[id(item)] = (item, self._fingerprint(item), chats)  # holding it keeps its id
        return chats


SYNC_STORES = "MemoryStore, SqliteStore, RedisStore, PostgresStore"
"""The sync stores shipped, as the integrations' errors name them."""


def sync_store(store: object, who: str) -> Store:
    """``store``, refused when it is an async store or no store at all.

    An integration calls its store's methods as plain calls (on a worker thread where the
    framework is async): an async store's would return coroutines never awaited, so its writes
    would be lost without an error (``StoreUsageError``). Anything that is not a store (a URL,
    ``None``) is a ``ConfigurationError`` now rather than a plain Python error at the first
    write.
    """
    if is_async_store(store):
        raise StoreUsageError(
            f"{who} takes a sync store ({SYNC_STORES}), "
            f"not {type(store).__name__}: it runs the store's calls on a worker thread itself")
    if not isinstance(store, Store):
        hint = (": for a URL, open the store with contextwright.open_store(url)"
                if isinstance(store, str) else "")
        raise ConfigurationError(f"{who} takes a store ({SYNC_STORES}), not "
                                 f"{type(store).__name__}{hint}")
    return store
