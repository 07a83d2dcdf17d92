"""Mode settings and routing rules, with customer-service values as defaults, loadable from a file.

A *mode* decides how a session's context is organised: which plan builds it, how many rounds stay
verbatim, when the running summary is updated, whether older turns are recalled, the retrieval
parameters and whether zones are kept. This module only describes modes; it does no I/O except
reading a config file on request, and knows nothing of stores or models.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from contextwright.core.plan import closest_name, read_config_file
from contextwright.errors import PlanError
from contextwright.recall.turns import DEFAULT_RECALL_LIMIT

SLIDING_WINDOW = "sliding_window"
RAG_ENHANCED = "rag_enhanced"
STRUCTURED = "structured"

WhenUnsure = Literal["keep", "default"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputRules:
    """The output zone of structured mode: how the answer must look (set by the developer)."""

    format: str = ""
    """Answer format, e.g. ``markdown`` or ``JSON with fields a, b``."""
    tone: str = ""
    """Tone, e.g. ``professional``."""
    constraints: tuple[str, ...] = ()
    """Safety and business constraints the answer must respect."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallSettings:
    """Session-wide recall: older turns, no longer shown verbatim, brought back when relevant."""

    share: float = 0.0
    """About this share of the budget history can reach may hold recalled turns, in the room
    the window leaves (0: off): the plan's available budget less the weighted shares of the
    other sources with something to show in the call (history's ``max_tokens`` if lower)."""
    limit: int = DEFAULT_RECALL_LIMIT
    """At most this many turns are recalled per call: a bound on the work, while ``share``
    bounds what is shown (at 8, a long chat's ~35-token turns filled 300 tokens of 8,000)."""

    @property
    def enabled(self) -> bool:
        """Whether this mode recalls at all."""
        return self.share > 0 and self.limit > 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ModeSettings:
    """One mode's parameters (fields a mode does not use are ignored)."""

    name: str
    """Mode name, e.g. ``sliding_window``; custom modes pick their own."""
    plan: str
    """A shipped plan name (``chat``, ``rag_qa``, ``tool_heavy`` …) or a plan file path; in a
    modes file, a relative path starts from that file's folder (else the working directory)."""
    window_size: int = 6
    """Rounds that always stay verbatim."""
    enable_summary: bool = True
    """Keep a running summary of the rounds older than the window."""
    summary_every: int = 5
    """Update the summary once this many rounds have left the window."""
    summary_threshold_ratio: float = 0.6
    """Also update it when the unsummarised history passes this share of the input budget."""
    chunk_size: int = 200
    """Retrieval chunk size in tokens."""
    top_k: int = 8
    """Chunks retrieved before reranking."""
    rerank_top_k: int = 3
    """Chunks kept after reranking."""
    similarity_threshold: float = 0.35
    """Chunks scoring below this are dropped."""
    zones: bool = False
    """Keep structured zones (facts, task, tools, output) in the prompt."""
    tool_zone_keep: int = 3
    """Tool calls the tools zone keeps."""
    instruction: str = ""
    """Extra system instruction for this mode (e.g. how to read the zones)."""
    output: OutputRules = field(default_factory=OutputRules)
    """Output zone contents (structured mode)."""
    recall: RecallSettings | None = None
    """Session-wide recall of turns no longer shown verbatim, offered after the window's rounds;
    None follows the plan's history options (``recall_share``, ``recall_limit``)."""

    def retrieval_options(self) -> dict[str, Any]:
        """The retrieval parameters as source options."""
        return {"chunk_size": self.chunk_size, "top_k": self.top_k,
                "rerank_top_k": self.rerank_top_k,
                "similarity_threshold": self.similarity_threshold}


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteRule:
    """Send a message to ``mode`` when it contains one of ``keywords`` or matches a pattern."""

    mode: str
    """Target mode."""
    keywords: tuple[str, ...] = ()
    """Substrings (Chinese) or whole words (Latin script), matched case-insensitively."""
    patterns: tuple[str, ...] = ()
    """Regular expressions, e.g. ``先.+再`` for a multi-step request."""
    name: str | None = None
    """What the route's ``trigger`` says when a pattern matched (default: the pattern itself).
    A long pattern reads better in logs and the mode history by a name; the text it matched
    is the user's, so it is never the trigger."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModesConfig:
    """Every mode, the routing rules (tried in order) and what to do when no rule matches."""

    modes: Mapping[str, ModeSettings]
    """Mode settings by name."""
    rules: tuple[RouteRule, ...]
    """Keyword rules, first match wins."""
    default_mode: str = SLIDING_WINDOW
    """Mode of a new session when nothing matches (and when ``when_unsure`` is ``default``)."""
    when_unsure: WhenUnsure = "keep"
    """``keep``: an unmatched message stays in the session's current mode (a "thanks" after an
    order lookup should not tear down the retrieval context); ``default``: go to the default."""
    classifier_threshold: float = 0.5
    """A classifier's answer below this confidence counts as unsure."""
    keep_limit: int = 4
    """With ``keep``, unmatched messages stay in a mode other than the default at most this many
    times in a row; the next goes to the default mode. A structured task that is done lets go
    at once. 0: never keep."""
    source: Path | None = None
    """The file this config was read from, as an absolute path (None: built in code); its
    relative plan paths start from the file's folder."""

    def __post_init__(self) -> None:
        if self.default_mode not in self.modes:
            raise PlanError(f"modes config: default_mode {self.default_mode!r} is not a mode"
                            f"{closest_name(self.default_mode, self.modes)}")
        for rule in self.rules:
            if rule.mode not in self.modes:
                raise PlanError(f"modes config: a rule names unknown mode {rule.mode!r}"
                                f"{closest_name(rule.mode, self.modes)}")

    @property
    def origin(self) -> str:
        """How messages name this config: ``modes config /srv/modes.yaml``, or ``modes config``."""
        return "modes config" if self.source is None else f"modes config {self.source}"

    def settings(self, mode: str) -> ModeSettings:
        """Settings of ``mode``; ``PlanError`` for an unknown one."""
        try:
            return self.modes[mode]
        except KeyError:
            raise PlanError(f"unknown mode {mode!r}; known: {sorted(self.modes)}") from None

    @staticmethod
    def default() -> ModesConfig:
        """Seed 003's three modes and keyword rules (Chinese and English)."""
        return modes_from_mapping(DEFAULT_CONFIG, origin="default modes config")

    @staticmethod
    def load(path: str | Path) -> ModesConfig:
        """Read a modes config from .yaml/.yml, .toml or .json; unspecified modes keep defaults.

        A relative plan path in it starts from the file's folder.
        """
        return load_modes_config(Path(path))


# Seed 003 §3.2: retrieval words send a message to rag_enhanced, multi-step intent to structured.
# Structured is tried first: "先查库存再调用供应商接口更新订单状态" names an order but asks for a
# plan of tool calls (the seed's sketch checks retrieval first and so misroutes its own example).
# A plan is steps for the assistant. A step the user takes on themselves — "我先想想", "I first
# met her", "then I'll get back to you", "不行再来找你" — puts the request off or tells a story; it
# opens or continues no plan (a user asking for something, "then I'd like you to…", still does).
_ZH_BY_USER: Final = r"(?<=[帮给替为让叫请]我)"
"""我 as an object ("帮我先查…"): the step is still the assistant's."""
_ZH_CLAUSE_END: Final = r"(?:吧|啦|了|哈|啊|哦)*(?=[，,。.!！~\s]|$)"
_ZH_NOT_FIRST: Final = r"(?![生前进]|这样" + _ZH_CLAUSE_END + r"|到这[里儿])"
ZH_FIRST: Final = (r"(?:首先|(?<![事优原祖率预争抢领我])先" + _ZH_NOT_FIRST + "|" + _ZH_BY_USER
                   + r"先" + _ZH_NOT_FIRST + ")")
""""先" as "first": not in 事先 (beforehand), 优先 (priority), 原先, 先生, 先前 and the like, nor
the user's own "我先…" ("我先想想", "好的我先试试"), nor the "先这样吧" / "先到这里" that
closes a conversation ("先这样做" is still a first step)."""
_ZH_LATER_BY_USER: Final = (r"考虑|想想?|商量|等|来(?:问|找|联系)?(?=[你您吧啊，,。.!！~]|$)|"
                            r"[找问][你您]")
_ZH_PUT_OFF: Final = (r"(?:有空|有事|有问题|有需要|回头|改天|晚点|明天)?再(?:(?:见|会|说|联系|聊)"
                      + _ZH_CLAUSE_END + "|" + _ZH_LATER_BY_USER + ")")
"""A farewell or put-off: "再聊吧", "有空再聊", "再说" ("再说一下价格" asks), "有问题再找你"."""
ZH_THEN: Final = (r"(?:(?:然后|接着|(?<!求)其次|之后(?!再说)|最后|完成后)(?!的|" + _ZH_PUT_OFF
                  + r")|(?:(?<!我)|" + _ZH_BY_USER + r")再(?!见|会|说|联系|聊|三|"
                  + _ZH_LATER_BY_USER + r"))")
"""A later step: 然后, 接着, 其次 (not the 求其次 of "second best"), … or "再", but
not 再见 / 再会 / 再说 / 再联系 / 再聊 (farewells and put-offs, also after 然后:
"然后再聊", "然后有问题再找你"), 再三 (repeatedly), the 之后再说 of "let's talk later",
the "然后的事" of what comes later, nor the user's own later step: "我再…", coming back
("再来问你", "再找你", "晚点再来") or thinking it over ("再考虑", "再等等")."""
EN_SELF: Final = (r"(?:I|we)\b(?:'ll|'m|'ve| will| am| shall)?(?:\s+(?:going to|gonna))?\s+"
                  r"(?!(?:want|need|would|should|must)\b)|let me\b(?!\s+know\b)")
"""The user as the one who acts ("I first met…", "I'll think about it first", "Let me try it
first"), not the user asking ("I need you to…", "I'd like…", "Let me know…")."""
EN_FIRST: Final = r"(?<!\bat )(?<!\bI )(?<!\bwe )\bfirst\b"
""""first" as a plan's first step: not the "at first" of a story, nor "I first …"."""
EN_NOT_BY_USER: Final = r"(?!,?\s+(?:I|we)\b(?!'d\b|\s+(?:would|want|need)\b))"
"""After a later-step word: the step is not the user's own ("then I'll get back to you", "then
I realized"); "then I'd like you to…" is still a step for the assistant."""
_EN_QUESTION_WORD: Final = (r"(?:what|who|whom|whose|where|when|which|"
                           r"why(?!\s+(?:don't|dont|not)\b)|how(?!\s+about\b))\b")
"""A question word: a clause it opens asks about something ("What happened after that?"),
it plans nothing; "Why don't you …" and "How about …" suggest, and may plan."""
EN_STEP_FOLLOWS: Final = rf"(?![^\S\n]*[?？]|[^\S\n]*,?[^\S\n]*{_EN_QUESTION_WORD})"
"""After a later-step word: a step follows, not the end of a question ("And then?", "Which
came first, then?") nor a question ("And then what happened?") — a listener's follow-up."""
# Ordinal steps: "Second, …" / "Step 2: …" / "第二步…" are later steps of a plan that begins
# with its first ("First, …", "Step 1", "第一步", "先…"); without one, an ordinal is no step
# ("wait a second", "This is my second order", "我卡在第二步了", "Step 2 fails every time").
# An English ordinal opens its clause: "my second child" is a child, not a step. The router's
# plan rule and the task zone's step splitting both read these.
_CLAUSE_START: Final = r"(?:^|(?<=[.!?;:,\n]))[^\S\n]*"
EN_ORDINAL_FIRST: Final = rf"{_CLAUSE_START}step[^\S\n]*(?:1|one)\b[.:)]?"
""""Step 1", opening its clause: the first of a numbered plan ("first" is ``EN_FIRST``)."""
EN_ORDINAL_LATER: Final = (
    rf"{_CLAUSE_START}(?:and\s+)?(?:(?:(?:second|third|fourth|fifth)(?:ly)?|lastly)\b"
    r"|step[^\S\n]*(?:[2-9]|[1-9][0-9]|two|three|four|five)\b[.:)]?)")
"""A later step of an English ordinal plan, opening its clause: "Second, …", "Step 2: …"."""
ZH_ORDINAL_FIRST: Final = r"第[一1]步"
"""第一步: the first of a numbered Chinese plan (先 / 首先 is ``ZH_FIRST``)."""
ZH_ORDINAL_LATER: Final = (r"第(?:[二三四五六七八九十][一二三四五六七八九十]{0,2}|[2-9]|[1-9][0-9])"
                           r"步")
"""A later step of a Chinese ordinal plan: 第二步, 第3步 (not 第二天, 第二次)."""
EN_THEN: Final = (rf"(?:\b(?:then|next|after that|finally)\b|{EN_ORDINAL_LATER})"
                  rf"{EN_NOT_BY_USER}{EN_STEP_FOLLOWS}")
"""A later step in English: "then", "next", … anywhere; an ordinal opening its clause."""
_EN_CLAUSE_BY_USER: Final = rf"[^\S\n]*[,.:)]?[^\S\n]*(?:{EN_SELF})"
"""The user as the one who acts, right after a step word ("Step 1: I'll think it over")."""
_EN_CLAUSE: Final = (rf"(?:^|(?<=[.!?;:,\n]))[^\S\n]*+(?!{EN_SELF})(?!{_EN_QUESTION_WORD})"
                     rf"[^.!?;:,\n]{{0,200}}?")
"""From the start of a clause (or a comma) whose subject is not the user acting on their own,
and that is no question about something ("What did she say after that?"); the clause ends at
a comma too, which keeps a long message linear to scan. The blanks before
its first word are taken whole (possessive), and never a line break: given back one by one,
they let the user's own "OK, I'll try it first, then …" pass as a plan (its first word tested
from the blank before it), and a run of blank lines cost a pass per line over the rest."""
EN_PLAN: Final = rf"{_EN_CLAUSE}{EN_FIRST}.{{1,80}}?{EN_THEN}"
"""An English plan: "first … then …" in a clause that is not the user's own."""
EN_NUMBERED_PLAN: Final = (rf"{EN_ORDINAL_FIRST}(?!{_EN_CLAUSE_BY_USER}).{{1,200}}?"
                           rf"{EN_ORDINAL_LATER}{EN_NOT_BY_USER}")
"""An English numbered plan: "Step 1: … Step 2: …" (its first step not the user's own)."""
ZH_PLAN: Final = (rf"(?:{ZH_FIRST}|{ZH_ORDINAL_FIRST}).{{1,40}}?"
                  rf"(?:{ZH_THEN}|{ZH_ORDINAL_LATER})")
"""A Chinese plan: 先…再, 首先…然后, 第一步…第二步 (not 第一天…第二天)."""
EN_CHAIN: Final = (rf"{_EN_CLAUSE}\b(?:and then|after that)\b{EN_NOT_BY_USER}"
                   rf"{EN_STEP_FOLLOWS}")
"""An English chain of steps without "first": "look up my order and then cancel it"."""

DEFAULT_CONFIG: Mapping[str, Any] = {
    "default_mode": SLIDING_WINDOW,
    "when_unsure": "keep",
    "modes": {
        # Summarised rounds relevant to the message come back verbatim, after the window and
        # within half of the budget history can reach (the chat plan's own recall is tuned
        # for a history without a summary). The share bounds it, not the count (a long chat's
        # turns are ~35 tokens: half of 8,000 is ~110 of them).
        SLIDING_WINDOW: {"plan": "chat", "window_size": 6, "summary_threshold_ratio": 0.6,
                         "enable_summary": True, "summary_every": 5,
                         "recall": {"share": 0.5, "limit": 400}},
        RAG_ENHANCED: {"plan": "rag_qa", "chunk_size": 200, "top_k": 8, "rerank_top_k": 3,
                       "similarity_threshold": 0.35, "window_size": 4},
        STRUCTURED: {"plan": "tool_heavy", "zones": True, "tool_zone_keep": 3,
                     "window_size": 3,
                     "output": {"format": "", "tone": "professional", "constraints": []}},
    },
    "rules": [
        {"mode": STRUCTURED,
         "keywords": ["然后调用", "完成后", "调用工具", "步骤", "then call", "step by step"],
         # A plan is a first step and a later one: "先…再…", "首先…然后…", "first … then …",
         # "First … Second …", "Step 1 … Step 2 …", "第一步…第二步…"
         # (``ZH_FIRST``, ``ZH_THEN``: not 先生 or 优先, nor the farewell of "再见", nor a
         # step the user takes on themselves), or a chain ("… and then …", "… after that …").
         "name": "plan (先…再 / first…then)",
         "patterns": [ZH_PLAN, EN_PLAN, EN_NUMBERED_PLAN, EN_CHAIN]},
        {"mode": RAG_ENHANCED,
         "keywords": ["帮我查", "订单", "退款", "物流", "库存", "价格", "政策", "look up",
                      "refund", "shipping", "tracking", "stock", "price", "policy"],
         # "order", but not the "in order to" of a purpose
         "name": "order", "patterns": [r"(?i)(?<!\bin )\borders?\b"]},
    ],
}


class _OutputModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    format: str = ""
    tone: str = ""
    constraints: list[str] = []


class _RecallModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    share: float = Field(default=0.0, ge=0, le=0.9)
    limit: int = Field(default=DEFAULT_RECALL_LIMIT, ge=0)


class _ModeModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    plan: str = Field(min_length=1)
    window_size: int = Field(default=6, ge=0)
    enable_summary: bool = True
    summary_every: int = Field(default=5, ge=1)
    summary_threshold_ratio: float = Field(default=0.6, gt=0, le=1)
    chunk_size: int = Field(default=200, ge=16)
    top_k: int = Field(default=8, ge=1)
    rerank_top_k: int = Field(default=3, ge=1)
    similarity_threshold: float = Field(default=0.35, ge=0, le=1)
    zones: bool = False
    tool_zone_keep: int = Field(default=3, ge=0)
    instruction: str = ""
    output: _OutputModel = _OutputModel()
    recall: _RecallModel | None = None


class _RuleModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    mode: str
    keywords: list[str] = []
    patterns: list[str] = []
    name: str | None = None

    @field_validator("keywords", "patterns")
    @classmethod
    def _not_blank(cls, values: list[str]) -> list[str]:
        # A blank keyword or pattern matches (nearly) every message: all traffic to one mode.
        if any(not value.strip() for value in values):
            raise ValueError("must not be blank")
        return values

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                compiled = re.compile(pattern)
            except re.error:
                raise ValueError("is not a valid regular expression") from None
            if compiled.search("") is not None:
                # It would match every message: one stray "|" routes everything to the mode.
                raise ValueError(f"{pattern!r} matches an empty message (and so every message)")
        return patterns


class _ConfigModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    default_mode: str = SLIDING_WINDOW
    when_unsure: WhenUnsure = "keep"
    classifier_threshold: float = Field(default=0.5, ge=0, le=1)
    keep_limit: int = Field(default=4, ge=0)
    modes: dict[str, _ModeModel] = {}
    rules: list[_RuleModel] | None = None

    @model_validator(mode="after")
    def _rules_need_targets(self) -> _ConfigModel:
        for rule in self.rules or []:
            if not rule.keywords and not rule.patterns:
                raise ValueError(f"rule for {rule.mode!r} has neither keywords nor patterns")
        return self


def modes_from_mapping(data: object, origin: str = "modes config") -> ModesConfig:
    """Validate a modes config given as plain data; modes it omits keep their defaults.

    A shipped mode it names keeps the fields it does not set (``structured: {window_size: 5}``
    keeps its zones and output rules): an override changes what it says, nothing else.
    """
    if not isinstance(data, Mapping):
        raise PlanError(f"{origin}: a modes config is a mapping of its settings (default_mode, "
                        f"modes, rules, …), not {_kind(data)}")
    _check_new_modes(data, origin)
    try:
        model = _ConfigModel.model_validate(_over_shipped_modes(data))
        defaults = (_ConfigModel.model_validate(DEFAULT_CONFIG)
                    if data is not DEFAULT_CONFIG else model)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        location = ".".join(str(part) for part in first["loc"])
        raise PlanError(f"{origin}: {location}: {_problem(first)}{_did_you_mean(first)}") from None
    modes = {**defaults.modes, **model.modes}
    rules = model.rules if model.rules is not None else defaults.rules or []
    return ModesConfig(
        modes=MappingProxyType({name: _settings(name, m) for name, m in modes.items()}),
        rules=tuple(RouteRule(mode=r.mode, keywords=tuple(r.keywords), name=r.name,
                              patterns=tuple(r.patterns)) for r in rules),
        default_mode=model.default_mode, when_unsure=model.when_unsure,
        classifier_threshold=model.classifier_threshold, keep_limit=model.keep_limit,
    )


def _over_shipped_modes(data: object) -> object:
    """``data`` with each shipped mode it names laid over that mode's shipped fields."""
    if data is DEFAULT_CONFIG or not isinstance(data, Mapping):
        return data
    modes = data.get("modes")
    if not isinstance(modes, Mapping):
        return data  # validation says what is wrong with it
    shipped: Mapping[str, Any] = DEFAULT_CONFIG["modes"]
    return {**data, "modes": {
        name: {**shipped[name], **fields}
        if name in shipped and isinstance(fields, Mapping) else fields
        for name, fields in modes.items()}}


def _check_new_modes(data: Mapping[Any, Any], origin: str) -> None:
    """``PlanError`` for a mode the config names that is neither shipped nor given a plan.

    A name that is not a shipped mode is a new mode, and a new mode must say which plan builds
    it: it has no shipped fields to inherit one from. So such a name without ``plan`` is no
    mode at all, most often a shipped one misspelt (``structurd: {window_size: 5}``), and is
    named as unknown, with the closest shipped mode. A name that gives a plan is a custom mode
    even when it is close to a shipped one (``structured2``): it says all a mode needs.
    """
    modes = data.get("modes")
    if not isinstance(modes, Mapping):
        return  # validation says what is wrong with it
    shipped: Mapping[str, Any] = DEFAULT_CONFIG["modes"]
    for name, fields in modes.items():
        if name in shipped or not isinstance(fields, Mapping) or "plan" in fields:
            continue
        hint = closest_name(str(name), shipped) or f" (shipped modes: {', '.join(shipped)})"
        raise PlanError(f"{origin}: modes.{name}: unknown mode {str(name)!r}{hint}; "
                        f"a new mode needs a plan")


_MAPPING_ERRORS: Final = frozenset(("model_type", "model_attributes_type", "dict_type"))
"""Pydantic's error types for a value that should be a mapping (their messages name our
private model classes)."""


def _problem(error: Any) -> str:
    """What is wrong with the value at an error's location, in the words of the file."""
    if error["type"] in _MAPPING_ERRORS:
        return f"must be a mapping, not {_kind(error['input'])}"
    return str(error["msg"])


def _kind(value: object) -> str:
    """What a parsed config value is, by its type only (never echoing it)."""
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


def _did_you_mean(error: Any) -> str:
    """`` (did you mean 'window_size'?)`` for a field name that is not one, when one is close."""
    if error["type"] != "extra_forbidden":
        return ""
    location = tuple(str(part) for part in error["loc"])
    model: type[BaseModel] = _ConfigModel
    if location[0] == "rules" and len(location) == 3:
        model = _RuleModel
    elif location[0] == "modes" and len(location) == 3:
        model = _ModeModel
    elif location[0] == "modes" and len(location) == 4:
        model = _RecallModel if location[2] == "recall" else _OutputModel
    return closest_name(location[-1], model.model_fields)


def _settings(name: str, model: _ModeModel) -> ModeSettings:
    fields = model.model_dump(exclude={"output", "recall"})
    output = OutputRules(format=model.output.format, tone=model.output.tone,
                         constraints=tuple(model.output.constraints))
    recall = None if model.recall is None else RecallSettings(share=model.recall.share,
                                                              limit=model.recall.limit)
    return ModeSettings(name=name, output=output, recall=recall, **fields)


def load_modes_config(path: Path) -> ModesConfig:
    """Read a modes config file; the format follows the suffix."""
    data = read_config_file(path, "modes config")
    if data is None:
        # No document at all: more likely the wrong file, or one cut short, than a wish for
        # the defaults (which leaving ``modes`` out gives; ``{}`` says so on purpose).
        raise PlanError(f"modes config {path.name} is empty: give the settings it changes, "
                        f"or {{}} to keep every default")
    # Absolute: the file is named the same however the process's directory changes later.
    return replace(modes_from_mapping(data, origin=path.name), source=path.absolute())
