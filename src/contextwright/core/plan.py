"""``BuildPlan``: which sources take part, in what order, with what weight and limits.

Plans are immutable (S0 §5.4: a shared mutable plan leaked one request's limits into another).
They are built in code with ``BuildPlan.builder()`` or loaded from YAML / TOML / JSON; a bad plan
fails at load with a ``PlanError`` naming the field. Changing a plan means making a new one.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic import ValidationError as PydanticValidationError

from contextwright.core.caches import register_cache
from contextwright.core.parsing import Format, MalformedDocument, parse_document
from contextwright.core.source import (
    SourceTraits,
    check_options,
    conversation_order_error,
    registered_sources,
)
from contextwright.errors import PlanError

Strategy = Literal["truncate", "keyword_window", "head", "drop"]
SHIPPED_PLANS = ("chat", "tool_heavy", "rag_qa", "doc_analysis", "simple_qa")


class FrozenOptions(Mapping[str, Any]):
    """A read-only mapping of source options; nested dicts and lists are frozen too."""

    __slots__ = ("_data", "_key")

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data = {str(key): _freeze(value) for key, value in (data or {}).items()}
        self._key: str | None = None

    @property
    def cache_key(self) -> str:
        """A stable text of the options (sorted JSON), for caches; made once per object.

        Kept on the object rather than in a process-wide table keyed by ``id``: a build that
        derives options (a stable prefix anchors tiers) makes a new object per call, and the
        key then lives and dies with it.
        """
        if self._key is None:
            self._key = options_text(self)
        return self._key

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        """The option's value, or ``default`` when it is not set."""
        # Mapping.get raises and catches a KeyError per missing key; options are read per item.
        return self._data.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenOptions({self._data!r})"

    def thaw(self) -> dict[str, Any]:
        """A plain, mutable deep copy (for JSON and for deriving new plans)."""
        return {key: _thaw(value) for key, value in self._data.items()}


def options_text(options: Mapping[str, Any]) -> str:
    """Source options as one stable text (sorted JSON; what JSON cannot hold, as ``str``)."""
    return json.dumps(thawed(options), sort_keys=True, default=str)


def thawed(options: Mapping[str, Any]) -> dict[str, Any]:
    """Source options as a plain, mutable dict (a deep copy for ``FrozenOptions``)."""
    return options.thaw() if isinstance(options, FrozenOptions) else dict(options)


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return FrozenOptions(value)
    if isinstance(value, list | tuple):
        return tuple(_freeze(item) for item in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, FrozenOptions):
        return value.thaw()
    if isinstance(value, tuple):
        return [_thaw(item) for item in value]
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceSpec:
    """One source's place in a plan."""

    source: str
    """Name of the source (its namespace): system, tools, history, user, tool_results, ..."""
    weight: float = 1.0
    """Relative share of the available budget."""
    max_tokens: int | None = None
    """Upper bound on the tokens this source may use."""
    min_tokens: int = 0
    """Tokens this source is granted before others share the rest (if it needs them)."""
    cuttable: bool = True
    """False for parts that may never be cut (system prompt, current input)."""
    required: bool = False
    """If the source raises, fail the build (else the failure is isolated and reported)."""
    strategy: Strategy = "truncate"
    """Overflow strategy for a single item that does not fit."""
    options: Mapping[str, Any] = field(default_factory=FrozenOptions)
    """Source-specific settings (e.g. history ``max_rounds``); read-only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """How many tokens a build may use."""

    window: int = 8192
    """Model context window."""
    safety_ratio: float = 0.75
    """Share of the window used at most (formatting overhead, estimate error)."""
    reserved_output: int = 1024
    """Tokens kept free for the answer."""
    reserved_reasoning: int = 0
    """Tokens kept free for reasoning."""
    available_override: int | None = None
    """If set, the available tokens directly (the CLI's ``--budget``)."""

    @property
    def available(self) -> int:
        """``floor(window × safety_ratio) − reserved_output − reserved_reasoning``."""
        if self.available_override is not None:
            return self.available_override
        usable = math.floor(self.window * self.safety_ratio)
        return usable - self.reserved_output - self.reserved_reasoning


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildPlan:
    """An immutable, declarative description of one kind of context."""

    name: str
    """Plan name (reported with every build)."""
    sources: tuple[SourceSpec, ...]
    """Sources in render order."""
    budget: Budget = field(default_factory=Budget)
    """Window, safety ratio and reserves."""
    repeat_question: bool = False
    """Repeat the user's question at the tail when other parts follow it."""
    strict: bool = False
    """Raise on key conflicts instead of warning."""
    description: str = ""
    """What the plan is for."""
    add_missing_sources: bool = False
    """Add a source (modest weight, its usual place) for each request part the plan has none
    for, instead of leaving the part out with a warning (``core.covering``). Every shipped plan
    sets it."""

    @staticmethod
    def builder(name: str = "custom") -> PlanBuilder:
        """Start a fluent builder: ``BuildPlan.builder().add("system", ...).build()``."""
        return PlanBuilder(name)

    @staticmethod
    def named(name: str) -> BuildPlan:
        """One of the shipped plans: chat, tool_heavy, rag_qa, doc_analysis, simple_qa."""
        if name not in SHIPPED_PLANS:
            raise PlanError(f"no shipped plan named {name!r}; choose one of {SHIPPED_PLANS}")
        return _shipped(name)

    @staticmethod
    def load(path: str | Path) -> BuildPlan:
        """Load a plan from a .yaml/.yml, .toml or .json file."""
        return load_plan(Path(path), shown=str(path))

    def spec(self, source: str) -> SourceSpec | None:
        """The spec of ``source`` in this plan, if it takes part."""
        return next((spec for spec in self.sources if spec.source == source), None)

    def with_budget(self, **changes: Any) -> BuildPlan:
        """A new plan with budget fields changed (e.g. ``window=32768``), validated."""
        fields = {**_budget_dict(self.budget), **changes}
        try:
            budget = Budget(**_BudgetModel.model_validate(fields).model_dump())
        except PydanticValidationError as exc:
            first = exc.errors()[0]
            location = ".".join(str(part) for part in first["loc"]) or "budget"
            raise PlanError(f"plan {self.name}: budget.{location}: {first['msg']}"
                            f"{_did_you_mean({**first, 'loc': ('budget', *first['loc'])})}"
                            ) from None
        if budget.available <= 0:
            raise PlanError(f"plan {self.name}: budget: nothing is left after the reserves")
        return replace(self, budget=budget)


class PlanBuilder:
    """Fluent builder of a ``BuildPlan`` (mutable while building, the plan is not)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._specs: list[dict[str, Any]] = []
        self._budget = Budget()
        self._flags: dict[str, Any] = {}

    def add(self, source: str, weight: float = 1.0, max_tokens: int | None = None,
            **settings: Any) -> PlanBuilder:
        """Add a source in render order (settings: min_tokens, cuttable, strategy, options...)."""
        never_cut = never_cut_by_default(source)
        settings.setdefault("cuttable", not never_cut)
        settings.setdefault("required", never_cut)
        self._specs.append({"source": source, "weight": weight, "max_tokens": max_tokens,
                            **settings})
        return self

    def budget(self, **settings: Any) -> PlanBuilder:
        """Set budget fields (window, safety_ratio, reserved_output, reserved_reasoning).

        A field that is not one is a ``PlanError`` naming the closest; values are checked by
        ``build``, as a plan file's are.
        """
        for name in settings:
            if name not in Budget.__dataclass_fields__:
                raise PlanError(f"plan builder {self._name!r}: budget.{name}: not a budget field"
                                f"{closest_name(name, _FIELDS_AT[1])}")
        self._budget = replace(self._budget, **settings)
        return self

    def repeat_question(self, enabled: bool = True) -> PlanBuilder:
        """Repeat the question at the tail."""
        self._flags["repeat_question"] = enabled
        return self

    def strict(self, enabled: bool = True) -> PlanBuilder:
        """Raise on key conflicts."""
        self._flags["strict"] = enabled
        return self

    def add_missing_sources(self, enabled: bool = True) -> PlanBuilder:
        """Add a source for each request part the plan has none for (``core.covering``)."""
        self._flags["add_missing_sources"] = enabled
        return self

    def build(self) -> BuildPlan:
        """Validate and freeze the plan."""
        data = {"name": self._name, "sources": self._specs, "budget": _budget_dict(self._budget),
                **self._flags}
        return plan_from_mapping(data, origin="plan builder")


def _budget_dict(budget: Budget) -> dict[str, Any]:
    return {name: getattr(budget, name) for name in Budget.__dataclass_fields__}


class _SourceModel(BaseModel):
    # Strict: a weight of "0.3" or true is a mistake to name, not a value to convert.
    model_config = ConfigDict(extra="forbid", strict=True)
    source: str = Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    weight: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    max_tokens: int | None = Field(default=None, ge=0)
    min_tokens: int = Field(default=0, ge=0)
    cuttable: bool | None = None
    required: bool | None = None
    strategy: Strategy = "truncate"
    options: dict[str, Any] = {}

    @model_validator(mode="after")
    def _min_below_max(self) -> _SourceModel:
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ValueError("min_tokens is larger than max_tokens")
        return self


MAX_WINDOW = 2**53
"""The largest window a plan may give: ``available`` multiplies it by a float, which holds every
whole number up to here exactly (and overflows far beyond it)."""


class _BudgetModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    window: int = Field(default=8192, gt=0, le=MAX_WINDOW)
    safety_ratio: float = Field(default=0.75, gt=0, le=1)
    reserved_output: int = Field(default=1024, ge=0)
    reserved_reasoning: int = Field(default=0, ge=0)
    available_override: int | None = Field(default=None, gt=0)


class _PlanModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: str = Field(min_length=1)
    description: str = ""
    sources: list[_SourceModel] = Field(min_length=1)
    budget: _BudgetModel = _BudgetModel()
    repeat_question: bool = False
    strict: bool = False
    add_missing_sources: bool = False

    @model_validator(mode="after")
    def _unique_sources(self) -> _PlanModel:
        names = [spec.source for spec in self.sources]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"source listed twice: {', '.join(duplicates)}")
        total = sum(spec.weight for spec in self.sources)
        if total <= 0:
            raise ValueError("the weights of the sources sum to zero")
        if not math.isfinite(total):  # shares are weight / total: they would all be 0 or NaN
            raise ValueError("the weights of the sources sum to more than a number can hold")
        questions = [name for name, traits in _registered_traits().items() if traits.question]
        if questions and not set(questions) & set(names):
            # Without it the current input is never rendered, and nothing would say so.
            raise ValueError(f"no {questions[0]} source: the user's input would not be shown")
        return self


def _registered_traits() -> dict[str, SourceTraits]:
    """The declared traits of the registered source classes, by namespace."""
    return {name: traits for name, cls in registered_sources().items()
            if isinstance(traits := getattr(cls, "traits", None), SourceTraits)}


def never_cut_by_default(source: str) -> bool:
    """Whether the source registered as ``source`` is never cut unless a plan says otherwise."""
    traits = getattr(registered_sources().get(source), "traits", None)
    return isinstance(traits, SourceTraits) and traits.never_cut


def plan_from_mapping(data: object, origin: str = "plan") -> BuildPlan:
    """Validate a plan given as plain data; ``PlanError`` names the field that is wrong."""
    if not isinstance(data, Mapping):
        what = "is empty" if data is None else f"is a {type(data).__name__}"
        raise PlanError(f"{origin}: a plan is a mapping of name, sources and budget; this "
                        f"{what}")
    try:
        model = _PlanModel.model_validate(data)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        location = ".".join(str(part) for part in first["loc"])
        where = f"{location}: " if location else ""  # a rule of the whole plan names no field
        raise PlanError(f"{origin}: {where}{_message(first['msg'])}"
                        f"{_did_you_mean(first)}{_number_as_text(first)}") from None
    budget = Budget(**model.budget.model_dump())
    if budget.available <= 0:
        raise PlanError(f"{origin}: budget: nothing is left after the reserves")
    for source in model.sources:
        options_model = getattr(registered_sources().get(source.source), "options_model", None)
        if options_model is not None:
            try:
                check_options(source.source, source.options, options_model)
            except PlanError as exc:
                raise PlanError(f"{origin}: {exc}") from None
    out_of_order = conversation_order_error(model.name, [
        (source.source, traits) for source in model.sources
        if isinstance(traits := getattr(registered_sources().get(source.source), "traits", None),
                      SourceTraits)])
    if out_of_order is not None:
        raise PlanError(f"{origin}: {out_of_order}")
    return BuildPlan(
        name=model.name,
        description=model.description,
        sources=tuple(_spec(source) for source in model.sources),
        budget=budget,
        repeat_question=model.repeat_question,
        strict=model.strict,
        add_missing_sources=model.add_missing_sources,
    )


_FIELDS_AT: dict[int, tuple[str, ...]] = {
    0: tuple(_PlanModel.model_fields), 1: tuple(_BudgetModel.model_fields),
    2: tuple(_SourceModel.model_fields)}
"""The fields of a plan, of its budget and of a source spec, by how deep the location is."""


_CHECKED_LIMIT = 256
_CHECKED: dict[tuple[object, ...], tuple[SourceSpec, ...]] = {}
"""Plans ``check_plan`` found valid: by their sources (the tuple is held, so its id is not
reused) and their other fields."""


def check_plan(plan: BuildPlan) -> None:
    """``PlanError`` if ``plan`` breaks a rule a plan file or ``BuildPlan.builder()`` checks.

    A ``BuildPlan`` made in code (``BuildPlan(...)``, ``SourceSpec(...)``) is not validated
    when made: a build checks it once (a source listed twice would show the question twice,
    weights summing to zero would share nothing). Remembered by its sources' tuple and its
    other fields, so a plan derived per call (``with_budget``, ``replace``), which shares the
    tuple, costs a dictionary lookup, not a validation.
    """
    origin = f"plan {plan.name!r}"
    _check_parts(plan, origin)
    key = (id(plan.sources), plan.name, plan.description, plan.budget, plan.repeat_question,
           plan.strict, plan.add_missing_sources)
    if _CHECKED.get(key) is plan.sources:
        return
    data = {"name": plan.name, "description": plan.description,
            "sources": [{"source": spec.source, "weight": spec.weight,
                         "max_tokens": spec.max_tokens, "min_tokens": spec.min_tokens,
                         "cuttable": spec.cuttable, "required": spec.required,
                         "strategy": spec.strategy,
                         "options": (thawed(spec.options) if isinstance(spec.options, Mapping)
                                     else spec.options)}
                        for spec in plan.sources],
            "budget": _budget_dict(plan.budget), "repeat_question": plan.repeat_question,
            "strict": plan.strict, "add_missing_sources": plan.add_missing_sources}
    plan_from_mapping(data, origin=origin)
    if len(_CHECKED) >= _CHECKED_LIMIT:
        _CHECKED.clear()
    _CHECKED[key] = plan.sources


def _check_parts(plan: BuildPlan, origin: str) -> None:
    """``PlanError`` unless a plan made in code holds a ``Budget`` and source specs.

    Checked before anything reads them: a dict in their place would fail as a ``TypeError``
    deep in the build, not as a plan error naming it.
    """
    if not isinstance(plan.budget, Budget):
        raise PlanError(f"{origin}: budget is a {type(plan.budget).__name__}, not a Budget "
                        "(Budget(window=...), or BuildPlan.with_budget)")
    if not isinstance(plan.sources, tuple | list):
        raise PlanError(f"{origin}: sources is a {type(plan.sources).__name__}, not a tuple "
                        "of SourceSpec")
    for index, spec in enumerate(plan.sources):
        if not isinstance(spec, SourceSpec):
            raise PlanError(f"{origin}: sources.{index} is a {type(spec).__name__}, not a "
                            "SourceSpec (SourceSpec(source=...), or plan_from_mapping)")


def _did_you_mean(error: Any) -> str:
    """`` (did you mean 'weight'?)`` for a field name that is not one, when one is close.

    A value that is none of a field's choices (``strategy: trunc``) is named with the closest
    choice the same way.
    """
    if error["type"] == "literal_error" and error["loc"][-1:] == ("strategy",):
        given = error["input"]
        return closest_name(given, get_args(Strategy)) if isinstance(given, str) else ""
    if error["type"] != "extra_forbidden":
        return ""
    location = error["loc"]
    depth = 1 if location[:1] == ("budget",) else 2 if location[:1] == ("sources",) else 0
    return closest_name(str(location[-1]), _FIELDS_AT[depth])


def _number_as_text(error: Any) -> str:
    """A hint when a number field got text that is a number: YAML 1.1 reads ``1e-1`` as text.

    PyYAML takes a float in exponent form only with a dot and a signed exponent (``1.0e-1``,
    ``1.5e+3``), so ``weight: 1e-1`` arrives as the string "1e-1", and "should be a valid
    number" alone would leave the author looking at what is plainly one. A quoted number
    (``"0.3"``, refused on purpose) is named the same way.
    """
    given = error.get("input")
    if error["type"] not in ("float_type", "int_type") or not isinstance(given, str):
        return ""
    try:
        value = float(given)
    except ValueError:
        return ""
    if not math.isfinite(value):
        return ""
    written = (str(int(value)) if error["type"] == "int_type" and value.is_integer()
               else repr(value))
    if "e" in given.lower():
        return (f" (YAML reads {given!r} as text: an exponent needs a dot and a sign, as in "
                f"1.0e+3; write {written})")
    return f" ({given!r} is text, not a number: write {written} without quotes)"


def closest_name(given: str, names: Iterable[str]) -> str:
    """`` (did you mean 'weight'?)`` when one of ``names`` is close to ``given``, else ''."""
    close = difflib.get_close_matches(given, tuple(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _message(text: str) -> str:
    """A validation message without the "Value error, " that pydantic puts before our own."""
    return text.removeprefix("Value error, ")


def _spec(model: _SourceModel) -> SourceSpec:
    never_cut = never_cut_by_default(model.source)
    return SourceSpec(
        source=model.source,
        weight=model.weight,
        max_tokens=model.max_tokens,
        min_tokens=model.min_tokens,
        cuttable=(not never_cut) if model.cuttable is None else model.cuttable,
        required=never_cut if model.required is None else model.required,
        strategy=model.strategy,
        options=FrozenOptions(model.options),
    )


@functools.cache
def _shipped(name: str) -> BuildPlan:
    """A shipped plan, read once per process.

    Plans are immutable, and ``select_plan`` asks for one on every call.
    """
    data = resources.files("contextwright.plans").joinpath(f"{name}.yaml").read_bytes()
    return plan_from_mapping(parse_document(data, "yaml"), origin=f"shipped plan {name}")


def load_plan(path: Path, shown: str | None = None) -> BuildPlan:
    """Read a plan file; the format follows the suffix.

    ``shown``: the path as the caller gave it, for messages. A name without a plan file's suffix
    is most likely a shipped plan's, misspelt: the message names the closest one.
    """
    given = str(path) if shown is None else shown
    if path.suffix.lower() not in _FORMATS:
        raise PlanError(_not_a_plan_file(given))
    data = read_config_file(path, "plan file", shown=given)
    return plan_from_mapping(data, origin=f"plan file {path.name}")


def _not_a_plan_file(given: str) -> str:
    """Why ``given`` names no plan: not a shipped plan, and not a file a plan can be read from."""
    if given in SHIPPED_PLANS:
        return f"{given!r} is a shipped plan, not a file: use BuildPlan.named({given!r})"
    close = difflib.get_close_matches(given, SHIPPED_PLANS, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (f"{given!r} is neither a shipped plan ({', '.join(SHIPPED_PLANS)}) nor a plan file "
            f"(.yaml, .yml, .toml or .json){hint}")


_FORMATS: dict[str, Format] = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".json": "json"}
MAX_CONFIG_BYTES = 1 << 20
"""Largest plan or modes file read (real ones are a few hundred bytes; /dev/zero is endless)."""


def read_config_file(path: Path, what: str, shown: str | None = None) -> Any:
    """Parse a .yaml/.yml, .toml or .json file; ``PlanError`` names the file and the problem.

    Work is bounded: at most ``MAX_CONFIG_BYTES`` are read, and parsing (``core.parsing``)
    takes no YAML aliases, no deep nesting, UTF-8 only. A file that cannot be read is named by
    its path as given (``shown``, else ``path``): its name alone may not say where it was looked
    for.
    """
    fmt = _FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise PlanError(f"{what} {path.name}: use .yaml, .yml, .toml or .json")
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise PlanError(f"cannot read {what} {path if shown is None else shown}: "
                        f"{exc.strerror}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise PlanError(f"{what} {path.name} is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        return parse_document(without_byte_order_mark(data), fmt)
    except MalformedDocument as exc:
        raise PlanError(f"{what} {path.name} is not valid {fmt}: {exc}") from None


register_cache("core.plan.shipped", _shipped)


register_cache("core.plan.checked", _CHECKED)


_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def without_byte_order_mark(data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte order mark; UTF-16 refused with how to fix it.

    Windows editors and PowerShell (``Set-Content -Encoding utf8``) start a UTF-8 file with a
    byte order mark, which says only that the file is UTF-8: JSON and TOML parsers refuse it
    ("Unexpected UTF-8 BOM"). PowerShell 5's ``>`` writes UTF-16, which only a re-save fixes.
    """
    if data.startswith(_UTF8_BOM):
        return data[len(_UTF8_BOM):]
    if data.startswith(_UTF16_BOMS):
        raise MalformedDocument("UTF-16 text (it starts with a UTF-16 byte order mark): "
                                "save it as UTF-8")
    return data
