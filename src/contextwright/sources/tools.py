"""Tool definitions (L3): OpenAI function schemas, loaded on demand.

By default every schema is offered, the ones matching the input first. With ``select: relevant``
only these are offered: tools a ``ToolScorer`` finds relevant to the input (built in: lexical, on
names, descriptions and parameter names, English and Chinese), the ``always_include`` list, and
tools already called in the recent history or this turn (a result in the context keeps its
definition). ``max_tools`` caps the count; at most 128 are offered in any case (what OpenAI takes
in a request). Descriptions are compacted (first sentence, short parameter descriptions) when
asked or when the selected set is estimated over ``description_budget``: a source does not see
its grant, so the threshold is an option. Every tool left out is reported with its reason; every
compacted one keeps its full schema in the report.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from contextwright.analysis import HAN, analyzer, cjk_class
from contextwright.core.caches import BoundedCache, memoized, register_cache, text_bytes
from contextwright.core.items import ContextItem, Layer, Message
from contextwright.core.providers import OPENAI_MAX_TOOLS, check_tool_function, check_tool_name
from contextwright.core.request import Request
from contextwright.core.source import AddedSource, SourceTraits
from contextwright.errors import InvalidInputError, PlanError
from contextwright.sources.options import ToolDefinitionOptions
from contextwright.tokens import estimate_tokens


def tool_name(schema: Mapping[str, Any], where: str) -> str:
    """The function name of an OpenAI tool schema.

    ``InvalidInputError`` if it has none, or one the providers refuse (``check_tool_name``),
    or if the rest of its definition is one no format could send as given
    (``check_tool_function``).
    """
    if not isinstance(schema, Mapping):
        raise InvalidInputError(f"{where} must be an object")
    function = schema.get("function") if schema.get("type", "function") == "function" else None
    if not isinstance(function, Mapping):
        raise InvalidInputError(f"{where} is not an OpenAI function tool with a name")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"{where} is not an OpenAI function tool with a name")
    check_tool_name(name, where)
    check_tool_function(function, f"{where}.function")
    return name


def tool_names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """The function names of ``tools``, in order.

    ``InvalidInputError`` for a missing or a repeated name: a provider takes each name once,
    and a call names its tool by it.
    """
    names: list[str] = []
    first: dict[str, int] = {}
    for index, schema in enumerate(tools):
        name = tool_name(schema, f"tools[{index}]")
        earlier = first.setdefault(name, index)
        if earlier != index:
            raise InvalidInputError(f"tools[{index}] repeats the name {name!r} of "
                                    f"tools[{earlier}]")
        names.append(name)
    return names


_SCHEMA_JSON: BoundedCache[int, tuple[Mapping[str, Any], dict[str, Any], str]] = BoundedCache(
    "sources.tools.schema_json", max_entries=10_000, share=0.01,
    size=lambda _, entry: 3 * text_bytes(entry[2]))  # the schema, its copy and its JSON


def schema_json(schema: Mapping[str, Any]) -> str:
    """Compact, key-sorted JSON of a tool schema.

    Remembered per schema object while it is unchanged (checked against a copy).
    """
    cached = _SCHEMA_JSON.get(id(schema)) or _SCHEMA_JSON.revive(id(schema))
    if cached is not None and cached[0] is schema and schema == cached[1]:
        return cached[2]
    try:
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        text.encode("utf-8")
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidInputError(f"a tool schema is not valid JSON text ({type(exc).__name__})"
                                ) from None
    # The copy an edit is detected against, read back from the JSON: as deep as a deepcopy, in
    # a twentieth of the time. A schema JSON reads back otherwise (a tuple, a NaN) only misses.
    _SCHEMA_JSON.put(id(schema), (schema, json.loads(text), text))
    return text


# --------------------------------------------------------------------------- scoring


@runtime_checkable
class ToolScorer(Protocol):
    """Scores tool schemas for relevance to the input; 0 means not relevant. Thread-safe."""

    def score(self, query: str, schemas: Sequence[Mapping[str, Any]]) -> list[float]:
        """One score per schema, in order; higher is more relevant, 0 is not relevant."""
        ...


# Chinese words users say for what English tool names and descriptions call it (a small
# glossary: enough for the common agent tools; an embedding scorer does this in general).
_GLOSSARY: dict[str, tuple[str, ...]] = {
    "天气": ("weather", "forecast"), "气温": ("weather", "temperature"), "温度": ("temperature",),
    "下雨": ("weather", "rain"), "记下": ("memo", "note", "save"), "记住": ("memo", "remember"),
    "备忘": ("memo", "note"), "笔记": ("note",), "提醒": ("reminder", "remind"),
    "订单": ("order",), "退款": ("refund",), "退货": ("return", "refund"), "取消": ("cancel",),
    "航班": ("flight",), "机票": ("flight", "ticket"), "预订": ("book", "reservation"),
    "预约": ("book", "appointment"), "酒店": ("hotel",), "搜索": ("search",), "查询": ("search",),
    "查找": ("search", "find"), "用户": ("user",), "支付": ("payment", "pay"),
    "付款": ("payment", "pay"), "邮件": ("email", "mail"), "发送": ("send",),
    "日历": ("calendar",), "日程": ("calendar", "schedule"), "文件": ("file",),
    "计算": ("calculate", "calculator"), "翻译": ("translate",), "地图": ("map", "location"),
    "位置": ("location",), "时间": ("time",), "股票": ("stock",), "新闻": ("news",),
    "行李": ("baggage", "luggage"), "座位": ("seat",), "地址": ("address",),
}
_TERMS = analyzer("tools")
_HAN_RUN = re.compile(rf"[{cjk_class(HAN)}]+")
_NAME_WEIGHT, _PARAMETER_WEIGHT, _DESCRIPTION_WEIGHT = 3.0, 2.0, 1.0


def _terms(text: str) -> set[str]:
    """Lower-cased words (``get_weather`` -> get, weather) and CJK bigrams, stop words out."""
    terms = _TERMS.term_set(text)
    for run in _HAN_RUN.findall(text):  # the glossary's English for Chinese words
        terms.update(english for key, words in _GLOSSARY.items() if key in run
                     for english in words)
    return terms


class LexicalToolScorer:
    """Shared words between the input and a tool's name (×3), parameter names (×2), description.

    Chinese input is matched by character bigrams against Chinese descriptions and, through a
    small glossary, against English names (``天气`` finds ``get_weather``).
    """

    def score(self, query: str, schemas: Sequence[Mapping[str, Any]]) -> list[float]:
        """One score per schema (see the class docstring)."""
        wanted = _terms(query)
        return [_schema_score(schema, wanted) for schema in schemas] if wanted else [
            0.0 for _ in schemas]


def _schema_score(schema: Mapping[str, Any], wanted: set[str]) -> float:
    found: dict[str, float] = {}
    for weight, terms in _schema_terms(schema_json(schema)):
        for term in terms & wanted:
            found[term] = max(found.get(term, 0.0), weight)
    return sum(found.values())


_SchemaTerms = tuple[tuple[float, frozenset[str]], ...]


def _schema_terms_bytes(args: tuple[Any, ...], terms: _SchemaTerms) -> int:
    """The schema's JSON and its terms (each with a set slot)."""
    return text_bytes(args[0]) + sum(text_bytes(term) + 60 for _, part in terms for term in part)


@memoized("sources.tools.schema_terms", max_entries=131_072, share=0.03,
          size=_schema_terms_bytes)
def _schema_terms(text: str) -> _SchemaTerms:
    """(weight, terms) of a schema's name, parameter names and description; by schema JSON.

    Bounded by bytes rather than by a count of a few thousand: a catalogue of more tools than
    the count analysed every schema again on every build. One larger than the cache's share
    (about 7,000 small schemas, 2,000 with long descriptions) still does: give the cache more
    with ``set_cache_limits(per_cache={"sources.tools.schema_terms": ...})``.
    """
    function = json.loads(text).get("function")
    if not isinstance(function, Mapping):
        return ()
    return (
        (_NAME_WEIGHT, frozenset(_terms(str(function.get("name", ""))))),
        (_PARAMETER_WEIGHT, frozenset(_terms(" ".join(map(str, _properties(function)))))),
        (_DESCRIPTION_WEIGHT, frozenset(_terms(str(function.get("description", ""))))),
    )


def _properties(function: Mapping[str, Any]) -> Mapping[str, Any]:
    parameters = function.get("parameters")
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    return properties if isinstance(properties, Mapping) else {}


# --------------------------------------------------------------------------- compaction


# A full stop after a common abbreviation ("e.g.", "i.e.", "vs.") ends no sentence; a Chinese
# full stop needs no space after it.
_ABBREVIATIONS = ("e.g.", "i.e.", "vs.", "Mr.", "Mrs.", "Ms.", "Dr.", "St.", "approx.", "incl.",
                  "No.")
_SENTENCE_END = re.compile(r"(?<=[。！？])|(?<=[.!?])" + "".join(
    rf"(?<!\b{re.escape(abbreviation)})" for abbreviation in _ABBREVIATIONS) + r"\s")
PARAMETER_DESCRIPTION_CHARS = 60
"""A compacted parameter description keeps its first sentence, at most this long."""


def compact_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with its description and parameter descriptions cut to a first sentence.

    Names, types, enums and required lists are untouched: the model needs them to call.
    """
    compacted = copy.deepcopy(dict(schema))
    function = compacted.get("function")
    if not isinstance(function, dict):
        return compacted
    if isinstance(function.get("description"), str):
        function["description"] = first_sentence(function["description"], 200)
    for value in _properties(function).values():
        if isinstance(value, dict) and isinstance(value.get("description"), str):
            value["description"] = first_sentence(value["description"],
                                                  PARAMETER_DESCRIPTION_CHARS)
    return compacted


def first_sentence(text: str, limit: int) -> str:
    """The first sentence of ``text``, cut at ``limit`` characters (marked with …)."""
    sentence = _SENTENCE_END.split(text.strip(), maxsplit=1)[0]
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


# --------------------------------------------------------------------------- the options

MAX_REQUEST_TOOLS = OPENAI_MAX_TOOLS
"""The source offers at most this many tools, whatever ``max_tools`` says: one build renders to
every format, and OpenAI refuses a request with more (Anthropic documents no such limit)."""



@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOptions:
    """The tools source's plan options, validated (see ``ToolDefinitionSource``)."""

    relevant_only: bool
    """``select: relevant``: offer only the relevant, always-included and called tools."""
    always: frozenset[str]
    """Names always offered, first (``always_include`` and ``always`` together)."""
    max_tools: int | None
    """At most this many tools are offered (None: no cap but ``MAX_REQUEST_TOOLS``)."""
    recent_messages: int
    """How many of the last history messages are searched for tools already called."""
    compact: bool | None
    """Compact descriptions always (True), never (False) or over the budget (None: ``auto``)."""
    description_budget: int
    """Estimated tokens of the offered schemas above which ``auto`` compacts."""
    keep: tuple[str, ...] = ()
    """``keep``: names offered again after the always-included ones, and shown first, in this
    order (a build that keeps a stable prefix sets it to the tools it showed last call, in the
    order it showed them, so a tool once in stays in and keeps its place)."""
    keep_compacted: frozenset[str] | None = None
    """``keep_compacted``: which of ``keep`` are shown with compacted descriptions (a build that
    keeps a stable prefix sets it to those it showed so, so a kept tool keeps its bytes when
    the set grows over ``description_budget``); None: decided as for any other tool."""

    @classmethod
    def read(cls, options: Mapping[str, Any]) -> ToolOptions:
        """Validate the plan's options; ``PlanError`` names a bad one."""
        select = options.get("select", "all")
        if select not in ("all", "relevant"):
            raise PlanError("tools options: select must be 'all' or 'relevant'")
        setting = options.get("compact_descriptions", "auto")
        if setting != "auto" and not isinstance(setting, bool):  # "false" is truthy
            raise PlanError("tools options: compact_descriptions must be auto, true or false")
        return cls(relevant_only=select == "relevant",
                   always=_names(options, "always_include") | _names(options, "always"),
                   max_tools=None if options.get("max_tools") is None
                   else _count(options, "max_tools", 0),
                   recent_messages=_count(options, "recent_messages", 20),
                   compact=None if setting == "auto" else setting,
                   description_budget=_count(options, "description_budget", 1500),
                   keep=_ordered_names(options, "keep"),
                   keep_compacted=None if options.get("keep_compacted") is None
                   else _names(options, "keep_compacted"))


def _names(options: Mapping[str, Any], name: str) -> frozenset[str]:
    """A list of tool names; one name on its own (``always_include: save_memo``) is a list."""
    return frozenset(_ordered_names(options, name))


def _ordered_names(options: Mapping[str, Any], name: str) -> tuple[str, ...]:
    """``_names`` in the order given (the first of a repeated name counts)."""
    value = options.get(name)
    if value is None:
        return ()
    if isinstance(value, str):  # iterating it would offer tools named after its letters
        return (value,)
    if not isinstance(value, list | tuple | set | frozenset) or not all(
            isinstance(item, str) for item in value):
        raise PlanError(f"tools options: {name} must be a tool name or a list of tool names")
    ordered = sorted(value) if isinstance(value, set | frozenset) else value
    return tuple(dict.fromkeys(ordered))


def _count(options: Mapping[str, Any], name: str, default: int) -> int:
    """A whole number of 0 or more (``default`` when not given); ``PlanError`` names a bad one."""
    value = options.get(name)
    if value is None:
        return default
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or (isinstance(value, float) and not math.isfinite(value))
            or value < 0 or value != int(value)):
        raise PlanError(f"tools options: {name} must be a whole number, 0 or more")
    return int(value)


# --------------------------------------------------------------------------- the source


class ToolDefinitionSource:
    """Tool schemas, most relevant first; optionally only the relevant ones.

    Options: ``select`` (``all``, default, or ``relevant``); ``always_include`` (a name or a list
    of names always offered, first; ``always`` is accepted too); ``max_tools``;
    ``recent_messages`` (how far back history is searched for tools already called, default 20);
    ``compact_descriptions`` (``auto``, default, ``true`` or ``false``) with
    ``description_budget`` (estimated tokens of the offered schemas above which ``auto``
    compacts, default 1500). Counts are whole numbers, 0 or more. Rendered in the given order.
    """

    namespace = "tools"
    traits = SourceTraits(
        request_part="tools", labels={"en": "Tools", "zh": "工具"}, keep_option="keep",
        keep_compacted_option="keep_compacted",
        added=AddedSource(weight=0.15, before=("examples", "notes", "history", "user"), rank=2))
    options_model = ToolDefinitionOptions
    keeps = True
    """Takes the ``keep`` option (``traits.keep_option``): a stable-prefix build offers last
    call's tools again."""
    names_unread = True
    """The build names every tool it leaves out, those it did not read for the budget too
    (``core.gather``): a tool item costs little to make, and each is reported with its reason."""

    def __init__(self, scorer: ToolScorer | None = None) -> None:
        """``scorer`` ranks schemas against the input (default: ``LexicalToolScorer``)."""
        self.scorer: ToolScorer = scorer if scorer is not None else LexicalToolScorer()

    def offered_units(self, request: Request) -> int:
        """How many units it offers for ``request``: one per tool."""
        return len(request.tools)

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """One ``tools.<name>`` item per offered schema, best first; left-out ones flagged."""
        settings = ToolOptions.read(options)
        names = tool_names(request.tools)
        scores = self.scorer.score(request.user_input, request.tools) if request.tools else []
        called = called_tools(request, settings.recent_messages)
        offered, left_out = _offer(names, scores, called, settings)
        needed = {i for i, name in enumerate(names)
                  if name in settings.always or name in called or scores[i] > 0}
        if settings.keep and needed - set(offered):
            # Keeping last call's tools would leave out one this input needs: choose afresh.
            offered, left_out = _offer(names, scores, called, replace(settings, keep=()))
        compact = _should_compact(request.tools, offered, settings)
        kept_at = {name: at for at, name in enumerate(settings.keep)}
        for index in offered:
            name = names[index]
            # Tools shown last call keep their place and their form (the provider caches the
            # tool list as a prefix); new ones follow them in the given order.
            order = kept_at.get(name, len(kept_at) + index)
            shown_compact = (name in settings.keep_compacted
                             if name in kept_at and settings.keep_compacted is not None
                             else compact)
            yield _tool_item(name, request.tools[index], order, shown_compact)
        for index, reason in left_out:
            yield ContextItem(key=f"tools.{names[index]}",
                              message=Message(role="system", content=""), layer=Layer.TOOLS,
                              order=index, metadata={"omitted": reason})


def _offer(names: list[str], scores: list[float], called: set[str], settings: ToolOptions
           ) -> tuple[list[int], list[tuple[int, str]]]:
    """Rank the tools (always-included, kept, called, by score) and choose among them."""
    keep = frozenset(settings.keep)
    wanted = called | keep
    ranked = sorted(range(len(names)), key=lambda i: (
        -(names[i] in settings.always), -(names[i] in keep), -(names[i] in called),
        -scores[i], i))
    return _choose(ranked, names, scores, wanted, settings)


def _choose(ranked: list[int], names: list[str], scores: list[float], called: set[str],
            settings: ToolOptions) -> tuple[list[int], list[tuple[int, str]]]:
    """(offered indexes in keep order, [(left-out index, reason)])."""
    wanted = [i for i in ranked
              if names[i] in settings.always or names[i] in called or scores[i] > 0]
    if settings.relevant_only and not wanted:
        wanted = list(ranked)  # nothing matched: the model still needs something to call
    chosen = wanted if settings.relevant_only else list(ranked)
    offered = set(chosen)
    left_out = [(i, "not relevant to the input (select: relevant)")
                for i in ranked if i not in offered]
    max_tools = settings.max_tools
    if max_tools is not None and max_tools < MAX_REQUEST_TOOLS and len(chosen) > max_tools:
        left_out += [(i, f"over max_tools ({max_tools}); ranked lower")
                     for i in chosen[max_tools:]]
        chosen = chosen[:max_tools]
    if len(chosen) > MAX_REQUEST_TOOLS:  # one build renders to every format: fit them all
        left_out += [(i, f"over the {MAX_REQUEST_TOOLS} tools OpenAI takes in a request; "
                      "ranked lower") for i in chosen[MAX_REQUEST_TOOLS:]]
        chosen = chosen[:MAX_REQUEST_TOOLS]
    return chosen, left_out


def _should_compact(tools: Sequence[Mapping[str, Any]], offered: list[int],
                    settings: ToolOptions) -> bool:
    if settings.compact is not None:
        return settings.compact
    return (sum(estimate_tokens(schema_json(tools[i])) for i in offered)
            > settings.description_budget)


def _tool_item(name: str, schema: Mapping[str, Any], order: int, compact: bool) -> ContextItem:
    text = schema_json(schema)
    if compact:
        shown = compact_schema(schema)
        shown_text = json.dumps(shown, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        if len(shown_text) < len(text):
            return ContextItem(
                key=f"tools.{name}", message=Message(role="system", content=shown_text),
                layer=Layer.TOOLS, order=order, raw=text,
                metadata={"schema": shown, "compaction": "tool description compacted (first "
                          "sentence, short parameter descriptions)"})
    return ContextItem(key=f"tools.{name}", message=Message(role="system", content=text),
                       layer=Layer.TOOLS, order=order, metadata={"schema": schema})


def called_tools(request: Request, recent_messages: int) -> set[str]:
    """Names of the tools called in this turn and in the last ``recent_messages`` of history.

    Read from the raw messages and only as a hint: a malformed message is skipped here (the
    history source, which renders messages, is where it is an error).
    """
    history = request.history
    recent = [history[i] for i in range(max(len(history) - recent_messages, 0), len(history))]
    names: set[str] = set()
    for message in (*recent, *request.turn):
        if not isinstance(message, Mapping):
            continue
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                names.add(function["name"])
        if message.get("role") == "tool" and isinstance(message.get("name"), str):
            names.add(message["name"])
    return names


register_cache("sources.tools.schema_json", _SCHEMA_JSON)
register_cache("sources.tools.schema_terms", _schema_terms)
