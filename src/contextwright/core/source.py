"""The ``ContextSource`` protocol: the seam through which anything contributes context.

A source's class declares what it is (``traits``, a ``SourceTraits``: cut as a run, fenced, how
it offers units, digestible, volatile, its label, how a build adds it) and the options it takes
(``options_model``, extending ``SourceOptions``). The builder reads those, never a source's
name, so a source of the user's own behaves like a built-in one.

A source declares what it can contribute; it never touches the message list. It yields items in
*keep order* — the item it would keep first comes first (history: newest round first; documents:
best first) — and the builder reads only as far as the budget can reach, so a source over a
100,000-message history costs what fits, not what exists. Items of one unit (a tool call and its
results) share a ``group`` and are yielded together in render order.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType, UnionType
from typing import (
    Any,
    Literal,
    Protocol,
    TypeVar,
    Union,
    get_args,
    get_origin,
    runtime_checkable,
)

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from contextwright.core.caches import register_cache
from contextwright.core.items import ContextItem
from contextwright.core.request import Request
from contextwright.errors import PlanError

S = TypeVar("S", bound=type)


@runtime_checkable
class ContextSource(Protocol):
    """Anything that contributes context items. Must be safe to call from many threads."""

    @property
    def namespace(self) -> str:
        """The key prefix this source owns (``history`` owns ``history.*``)."""
        ...

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterable[ContextItem]:
        """Items for ``request`` in keep order; ``options`` come from the plan entry."""
        ...


@runtime_checkable
class DigestingSource(Protocol):
    """A source that can stand in for what a build left out with one compact item (a digest).

    Used when the plan sets the source's ``digest_share`` option: the builder keeps that share
    of the source's grant free while pruning, then, if something was left out, asks for a digest
    of it (see ``core.digest``).
    """

    def digest(self, request: Request, options: Mapping[str, Any],
               kept: Sequence[ContextItem], max_tokens: int,
               cost: Callable[[ContextItem], int]) -> ContextItem | None:
        """One item standing for what is not in ``kept``, costing at most ``max_tokens``.

        ``cost`` gives an item's exact cost as it would render. None when there is nothing
        worth saying.
        """
        ...


Offers = Literal["messages", "items", "block"]
"""How a source offers its units: messages read from one of the request's message lists
(kept whole per call block, in rounds), separate items (documents, tools, examples), or one
block (the system prompt, the user's input, environment facts)."""
PartialRounds = bool | Literal["tool_rounds"]
"""Whether the newest units of the oldest round that does not fit whole may be kept: always,
never, or (``tool_rounds``) only for a round with tool calls or results."""


class SourceOptions(BaseModel):
    """Options every source takes; a source's own options model extends it.

    Strict: ``"0.3"`` is not a number and ``"false"`` is not a boolean, and an option the model
    does not name is an error (``check_options``), so a misspelt option never passes unnoticed.
    The model checks a plan's options; a source's ``build`` receives them as the plan wrote
    them (read-only, an option the plan does not set absent), so it reads each with its
    default (``options.get("limit", 3)``) or validates them itself for typed values.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    contiguous: bool | None = None
    """Keep a newest-first run and drop everything older than the first unit that does not
    fit (None: as the source's ``traits`` say)."""
    max_item_share: float | None = Field(default=None, ge=0)
    """A unit larger than this share of the grant is cut down to it first (None: as the
    source's ``traits`` say)."""
    partial_rounds: PartialRounds = "tool_rounds"
    """For a contiguous source: may the oldest round that does not fit whole be kept in part."""
    digest_share: float = Field(default=0, ge=0, lt=1)
    """Share of the source's grant kept for its digest when it cannot keep everything (0: off;
    only a digestible source makes one, and a plan may not know which source it will get)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AddedSource:
    """How a build adds a source for a request part its plan has none for (``core.covering``)."""

    weight: float
    """The added source's weight in a plan whose weights sum to 1 (scaled to the plan's sum:
    ``covering.added_weight``)."""
    max_tokens: int | None = None
    """Its cap."""
    before: tuple[str, ...] = ()
    """It goes before the first of these sources the plan has (at the end otherwise)."""
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """Its options."""
    rank: int = 0
    """Where it comes among added sources: in the plan's name, the notes, insertion order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """How a message source's options shape what a stable-prefix build offers (``core.stable``).

    Between cuts the build asks the source for its plain newest-first stream as of the last
    cut, so what it shows of its older messages does not change call after call; these name
    the source's options that build sets or reads to do that.
    """

    anchor_option: str | None = None
    """The option set to the list's length at the last cut (tiers are computed as of it)."""
    recall_option: str | None = None
    """The option set to 0 for the plain stream (no recalled turns)."""
    window_option: str | None = None
    """The option that caps the source's rounds; it may hold twice as many between cuts."""
    shaping_options: tuple[str, ...] = ()
    """Options under which what the source offers is not its plain stream as of the last cut."""
    recalls_always: bool = False
    """Its stream holds turns recalled for the input whatever its options say (a session's
    stored turns): continuing a layout, it is read as far as the budget reaches, not only back
    to the layout's messages, since the turns this input recalls may come later in it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceTraits:
    """What a source is, as the builder needs to know it; declared on the source's class.

    The builder reads these, never a source's name, so a user's own source can be cut,
    fenced, digested and laid out like a built-in one.
    """

    offers: Offers = "items"
    """How its units come (``Offers``)."""
    message_list: str | None = None
    """With ``offers="messages"``: the ``Request`` field it reads (``history``, ``turn``).
    Its items carry their message's index as ``order``, and a stable-prefix build keeps its
    layout from call to call."""
    contiguous: bool = False
    """Cut as a newest-first run (oldest rounds go first, no holes) rather than item by item."""
    max_item_share: float | None = None
    """Default of the ``max_item_share`` option."""
    fenced: bool = False
    """Its items are data: each renders fenced (with the note saying so) whatever its
    ``untrusted`` flag. For a source of the request's messages (``offers="messages"``) that is
    its tool results: its user and assistant messages are the conversation itself."""
    digestible: bool = False
    """It can stand in for what it left out (it implements ``DigestingSource``)."""
    volatile: bool = False
    """Its content changes from call to call: a stable-prefix build renders it last."""
    layout: Layout = field(default_factory=Layout)
    """With ``message_list``: how a stable-prefix build lays it out (``Layout``)."""
    keep_option: str | None = None
    """The option a stable-prefix build sets to the keys (after the namespace) of what it showed
    last call, for the source to offer them again first (the tools source's ``keep``), in the
    order they were shown."""
    keep_compacted_option: str | None = None
    """With ``keep_option``: the option a stable-prefix build sets to the keys of what it showed
    last call in a compacted form (``metadata["compaction"]``), for the source to show them so
    again (the tools source's ``keep_compacted``): a kept item keeps its bytes."""
    recalls: bool = False
    """It may offer older units out of order, marked (``metadata["keep_head"]``); the marker is
    dropped when the unit ends up in its place (``core.sequence``)."""
    never_cut: bool = False
    """A plan entry of it is neither cuttable nor optional unless the plan says otherwise."""
    prompt: bool = False
    """It renders the request's system prompt (whose message frame every build pays)."""
    question: bool = False
    """It renders the user's input: the question a build must show."""
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Its part's label by language (``en``, ``zh``): headings, separators, fence heads."""
    request_part: str | None = None
    """The ``Request`` field it renders (a build warns, or adds it, when a plan lacks it)."""
    added: AddedSource | None = None
    """How a build adds it for its request part (None: it is never added)."""

    def __post_init__(self) -> None:
        if (self.offers == "messages") != (self.message_list is not None):
            raise ValueError("a source offers messages exactly when it names its message_list")


DEFAULT_TRAITS = SourceTraits()
"""The traits of a source that declares none (and replaces no registered source)."""

_CATALOG: dict[str, type] = {}


def register_source(cls: S) -> S:
    """Register a source class under its ``namespace`` (usable as a class decorator).

    A plan naming that source has its options checked against the class's ``options_model``
    when it loads, and a source of another class given the same namespace without traits of its
    own (a replacement) is built with this class's traits and options. Re-registering a name
    with another class replaces it.
    """
    namespace = getattr(cls, "namespace", None)
    if not isinstance(namespace, str) or not namespace:
        raise TypeError(f"{cls.__name__} has no class-level namespace to register it under")
    traits = getattr(cls, "traits", None)
    if traits is not None and not isinstance(traits, SourceTraits):
        raise TypeError(f"{cls.__name__}.traits must be SourceTraits")
    model = getattr(cls, "options_model", None)
    if model is not None and not (isinstance(model, type) and issubclass(model, SourceOptions)):
        raise TypeError(f"{cls.__name__}.options_model must extend SourceOptions")
    if traits is not None and traits.digestible and not callable(getattr(cls, "digest", None)):
        raise TypeError(f"{cls.__name__} declares digestible but has no digest method")
    _CATALOG[namespace] = cls
    _DERIVED_TRAITS.clear()
    return cls


def registered_sources() -> Mapping[str, type]:
    """The registered source classes by namespace."""
    return MappingProxyType(_CATALOG)


def traits_of(source: object) -> SourceTraits:
    """The traits ``source`` is built with.

    Its own (class-level ``traits``); else, for a replacement of a registered source, that
    source's, with ``digestible`` and ``volatile`` as the replacement itself is; else the
    defaults, with ``volatile`` as the source says.
    """
    own = getattr(source, "traits", None)
    if isinstance(own, SourceTraits):
        return own
    volatile = getattr(source, "volatile", None)
    namespace = str(getattr(source, "namespace", ""))
    # Derived once per kind of source: a build asks dozens of times, and the protocol check
    # (``isinstance`` of a runtime-checkable protocol) and ``replace`` are slow. What they read
    # is the class, the namespace's registered source, ``volatile`` and whether there is a
    # ``digest`` (all the protocol looks for).
    key = (type(source), namespace, None if volatile is None else bool(volatile),
           getattr(source, "digest", None) is not None)
    derived = _DERIVED_TRAITS.get(key)
    if derived is None:
        derived = _DERIVED_TRAITS[key] = _derived_traits(source, namespace, volatile)
    return derived


def _derived_traits(source: object, namespace: str, volatile: object) -> SourceTraits:
    inherited = getattr(_CATALOG.get(namespace), "traits", None)
    if isinstance(inherited, SourceTraits):
        return replace(inherited, digestible=isinstance(source, DigestingSource),
                       volatile=inherited.volatile if volatile is None else bool(volatile))
    return replace(DEFAULT_TRAITS, volatile=bool(volatile),
                   digestible=isinstance(source, DigestingSource))


_DERIVED_TRAITS: dict[tuple[type, str, bool | None, bool], SourceTraits] = register_cache(
    "core.source.derived_traits", {})
"""``traits_of``'s answers for sources without traits of their own (emptied when a source is
registered: a namespace's traits may change)."""


def conversation_order_error(plan_name: str, named: Sequence[tuple[str, SourceTraits]]
                             ) -> PlanError | None:
    """A ``PlanError`` when a plan lists the conversation out of the order it happened.

    ``named``: (source, traits) in plan order. Messages render in plan order, so older
    messages (a source reading ``history``) must come before the question, and the question
    before this turn's calls and results (a source reading ``turn``); otherwise the request
    reads the question before the conversation it follows, or ends in an old reply. Other
    sources (documents, notes) may go anywhere.
    """
    ranked = [(name, rank) for name, traits in named
              if (rank := _conversation_rank(traits)) is not None]
    for (first, first_rank), (later, later_rank) in itertools.pairwise(ranked):
        if later_rank < first_rank:
            return PlanError(
                f"plan {plan_name!r} lists {first!r} before {later!r}, but messages render in "
                f"plan order: {_CONVERSATION_PARTS[later_rank]} must come before "
                f"{_CONVERSATION_PARTS[first_rank]}")
    return None


_CONVERSATION_PARTS = ("the earlier messages (history)", "the question (user input)",
                       "this turn's calls and results")


def _conversation_rank(traits: SourceTraits) -> int | None:
    if traits.message_list == "history":
        return 0
    if traits.question:
        return 1
    if traits.message_list == "turn":
        return 2
    return None


def options_model_of(source: object) -> type[SourceOptions] | None:
    """The model ``source``'s options are checked against (None: they are not checked).

    Its own ``options_model``, else that of the source registered under its namespace. One
    that does not extend ``SourceOptions`` is a ``PlanError`` naming the source: it could not
    check the options every source takes (``register_source`` refuses it when registering).
    """
    namespace = str(getattr(source, "namespace", ""))
    model = getattr(source, "options_model", None)
    if model is None:
        model = getattr(_CATALOG.get(namespace), "options_model", None)
    if model is None or (isinstance(model, type) and issubclass(model, SourceOptions)):
        return model
    raise PlanError(f"source {namespace!r}: options_model must be a pydantic model extending "
                    f"SourceOptions, not {getattr(model, '__name__', type(model).__name__)}")


def check_options(name: str, options: Mapping[str, Any], model: type[SourceOptions]
                  ) -> SourceOptions:
    """``options`` validated against ``model``; a ``PlanError`` names the option and the source.

    An unknown option is named with the closest valid one: ``history: unknown option
    'recal_share' (did you mean 'recall_share'?)``, unless the model takes any
    (``extra="allow"``: its author asked for free-form options).
    """
    valid = list(model.model_fields)
    for key in () if model.model_config.get("extra") == "allow" else options:
        if key not in model.model_fields:
            close = difflib.get_close_matches(str(key), valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else (
                f" (valid options: {', '.join(sorted(valid))})")
            raise PlanError(f"{name}: unknown option {key!r}{hint}")
    try:
        return model.model_validate(_plain(options))
    except PydanticValidationError as exc:
        raise option_error(name, exc, model) from None


def option_error(name: str, exc: PydanticValidationError, model: type[BaseModel]) -> PlanError:
    """A ``PlanError`` naming source ``name``'s first bad option and what it may be.

    An option that takes one of several kinds (``partial_rounds``: a boolean or
    ``"tool_rounds"``) fails once per kind; the message lists the values it takes rather than
    the first kind's complaint (``partial_rounds.bool: Input should be a valid boolean``).
    """
    errors = exc.errors()
    first = errors[0]
    option = str(first["loc"][0]) if first["loc"] else ""
    field = model.model_fields.get(option)
    kinds = _union_members(field.annotation) if field is not None else []
    if not kinds:
        where = ".".join(str(part) for part in first["loc"])
        return PlanError(f"{name}: option {where}: {first['msg']}")
    inside = next((e for e in errors if e["loc"][:1] == (option,) and len(e["loc"]) > 2), None)
    if inside is not None:  # one kind matched, a part of it is wrong: name that part
        where = ".".join(str(part) for part in (option, *inside["loc"][2:]))
        return PlanError(f"{name}: option {where}: {inside['msg']}")
    phrases = [phrase for kind in kinds for phrase in _kind_phrases(kind)]
    allowed = ", ".join(phrases[:-1]) + f" or {phrases[-1]}" if len(phrases) > 1 else phrases[0]
    words = [value for kind in kinds if get_origin(kind) is Literal
             for value in get_args(kind) if isinstance(value, str)]
    given = first.get("input")
    close = difflib.get_close_matches(given, words, n=1) if isinstance(given, str) else []
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return PlanError(f"{name}: option {option}: should be {allowed}{hint}")


def _union_members(annotation: Any) -> list[Any]:
    """The kinds a union annotation allows, ``None`` left out ([] when it is no union)."""
    if get_origin(annotation) not in (Union, UnionType):
        return []
    members = [arg for arg in get_args(annotation) if arg is not type(None)]
    return members if len(members) > 1 else []


def _kind_phrases(kind: Any) -> list[str]:
    """How a message names the values of one kind: ``true``, ``'tool_rounds'``, ``a list``."""
    if kind is bool:
        return ["true", "false"]
    if get_origin(kind) is Literal:
        return [repr(value) for value in get_args(kind)]
    names = {str: "a string", int: "a whole number", float: "a number", list: "a list",
             tuple: "a list", dict: "an object"}
    return [names.get(get_origin(kind) or kind, getattr(kind, "__name__", str(kind)))]


def _plain(value: Any) -> Any:
    """Plain dicts and lists of a (possibly frozen) options value, as strict models take them."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


_CHECKED: dict[int, tuple[Mapping[str, Any], type[SourceOptions]]] = {}
_CHECKED_LIMIT = 4096


def checked_options(name: str, options: Mapping[str, Any], model: type[SourceOptions]) -> None:
    """``check_options``, remembered per options object and model.

    Options belong to an immutable plan and a build checks them against the source it has,
    on every build.
    """
    known = _CHECKED.get(id(options))
    if known is not None and known[0] is options and known[1] is model:
        return
    check_options(name, options, model)
    if len(_CHECKED) >= _CHECKED_LIMIT:
        _CHECKED.clear()
    _CHECKED[id(options)] = (options, model)


class _CoreReads(SourceOptions):
    """What the builder itself reads of any source's options; the source checks the rest."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


_CORE_READS: dict[int, tuple[Mapping[str, Any], _CoreReads]] = {}
_CORE_READS_LIMIT = 4096


def core_options(name: str, options: Mapping[str, Any]) -> SourceOptions:
    """The options the builder reads of source ``name`` (typed; a bad value is a ``PlanError``).

    Remembered per options object: options belong to an immutable plan and are read on every
    build.
    """
    known = _CORE_READS.get(id(options))
    if known is not None and known[0] is options:
        return known[1]
    fields = {key: options[key] for key in _CoreReads.model_fields if key in options}
    try:
        typed = _CoreReads.model_validate(_plain(fields))
    except PydanticValidationError as exc:
        raise option_error(name, exc, _CoreReads) from None
    if len(_CORE_READS) >= _CORE_READS_LIMIT:
        _CORE_READS.clear()
    _CORE_READS[id(options)] = (options, typed)
    return typed


register_cache("core.source.core_reads", _CORE_READS)
register_cache("core.source.checked", _CHECKED)
