"""Tool-call tasks and their scoring: what the model should call, and whether it did.

A task is one JSON object (one line of a JSONL file): ``id``, ``request`` (the request schema of
``contextwright build``: system, history, user_input, turn, tools), ``expected`` (the calls the
model should make next, each ``{"name", "arguments", "contains"?}``), and optional ``family``,
``note`` and ``fact_position`` that only label results. ``load_tasks`` validates a file (and
``parse_tasks`` the text of one read elsewhere) and names the line and field of anything wrong.

The matching rule (``score_calls``) is exact after normalisation, with documented tolerances:

- calls are compared as a multiset: the order of parallel calls does not matter;
- an argument in ``arguments`` must be present and equal: strings after Unicode NFKC, case
  folding and collapsing whitespace (``"new  york"`` equals ``"New York"``), numbers as numbers
  (``1280`` equals ``1280.0``; the string ``"1280"`` does not; whole numbers exactly, so an id
  or a timestamp one off is wrong), objects and lists element-wise;
- an argument in ``contains`` is free text (a memo, an event title, a search query): it must be
  a string holding, after the same normalisation, one alternative of every group
  (``{"text": [["Shanghai", "上海"], ["cloudy"], ["25"]]}``);
- any other argument the model passes is wrong, unless it equals the tool schema's ``default``.

Verdicts: ``correct``; ``no_call`` (the model answered in text); ``wrong_tool`` (a call to a tool
no expected call names); ``wrong_count`` (the right tools, a different number of calls);
``wrong_args``. Calls the API could not make are verdicts of the runner (``context_too_long``,
``api_error``, ``build_error``).
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from contextwright.core.request import Request
from contextwright.errors import InvalidInputError

Verdict = Literal["correct", "no_call", "wrong_tool", "wrong_count", "wrong_args",
                  "context_too_long", "api_error", "build_error"]
VERDICTS: tuple[Verdict, ...] = ("correct", "wrong_tool", "wrong_count", "wrong_args",
                                 "no_call", "context_too_long", "api_error", "build_error")


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedCall:
    """One call the model should make."""

    name: str
    """Tool name."""
    arguments: Mapping[str, Any]
    """Arguments that must be equal (after normalisation)."""
    contains: Mapping[str, tuple[tuple[str, ...], ...]]
    """Free-text arguments: per argument, groups of alternatives; one of each group must occur."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallTask:
    """One model call to make and score."""

    id: str
    """Unique id (``07-weather_reference``)."""
    request: Mapping[str, Any]
    """The request, in the request-file schema (validated on load)."""
    expected: tuple[ExpectedCall, ...]
    """The calls the model should make next."""
    family: str = ""
    """Group label for results."""
    note: str = ""
    """What the task checks."""
    fact_position: str | None = None
    """Where the fact the request refers to sits in the history, if there is one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall:
    """One tool call the model made."""

    name: str
    """The tool it called."""
    arguments: str
    """Its arguments as sent (JSON text)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Score:
    """The verdict on a model's calls, with the reason when they were wrong."""

    verdict: Verdict
    """See the module docstring."""
    detail: str = ""
    """Why (names tools and arguments, never the task's text)."""


class _ExpectedModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    contains: dict[str, list[list[str]]] = Field(default_factory=dict)


class _TaskModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    request: dict[str, Any]
    expected: list[_ExpectedModel] = Field(min_length=1)
    family: str = ""
    note: str = ""
    fact_position: str | None = None


def task_from_dict(data: object, where: str = "task") -> ToolCallTask:
    """Validate one task; errors name ``where`` and the field."""
    try:
        model = _TaskModel.model_validate(data)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        location = ".".join(str(part) for part in first["loc"]) or "task"
        raise InvalidInputError(f"{where}: {location}: {first['msg']}") from None
    try:
        request = Request.from_dict(model.request)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}: request: {exc}") from None
    offered = {str(tool.get("function", {}).get("name")) for tool in request.tools}
    expected = tuple(_expected(e, offered, f"{where}: expected[{i}]")
                     for i, e in enumerate(model.expected))
    return ToolCallTask(id=model.id, request=model.request, expected=expected,
                        family=model.family, note=model.note, fact_position=model.fact_position)


def _expected(model: _ExpectedModel, offered: set[str], where: str) -> ExpectedCall:
    if model.name not in offered:
        raise InvalidInputError(f"{where}.name: the request offers no tool of that name")
    overlap = set(model.arguments) & set(model.contains)
    if overlap:
        raise InvalidInputError(f"{where}: {sorted(overlap)[0]!r} is in both arguments and "
                                "contains")
    for argument, groups in model.contains.items():
        if not groups or any(not group for group in groups):
            raise InvalidInputError(f"{where}.contains.{argument}: every group needs an "
                                    "alternative")
    return ExpectedCall(name=model.name, arguments=model.arguments,
                        contains={k: tuple(tuple(g) for g in v) for k, v in model.contains.items()})


def load_tasks(path: str | Path) -> list[ToolCallTask]:
    """Tasks from a JSONL file (one task a line; blank lines skipped); ids must be unique."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read tasks file {file}: {type(exc).__name__}") from None
    return parse_tasks(text, file.name)


def parse_tasks(text: str, origin: str) -> list[ToolCallTask]:
    """Tasks from JSONL text read elsewhere (standard input), as ``load_tasks`` reads a file.

    ``origin`` names the text in error messages (``stdin line 3: not JSON``).
    """
    tasks: list[ToolCallTask] = []
    first_line: dict[str, int] = {}
    # Lines end at "\n" only: U+2028, U+2029 and U+0085 (which ``str.splitlines`` also breaks
    # at) may stand raw inside a JSON string, as ``json.dumps(ensure_ascii=False)`` writes them.
    # A leading byte order mark (Notepad, PowerShell 5's UTF-8) is no part of line 1.
    for number, raw in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        line = raw.removesuffix("\r")
        if not line.strip():
            continue
        where = f"{origin} line {number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{where}: not JSON ({exc.msg})") from None
        task = task_from_dict(data, where)
        if task.id in first_line:
            raise InvalidInputError(f"{where}: task id {task.id!r} is repeated (also on line "
                                    f"{first_line[task.id]})")
        first_line[task.id] = number
        tasks.append(task)
    return check_unique(tasks, origin)


def check_unique(tasks: list[ToolCallTask], origin: str) -> list[ToolCallTask]:
    """``tasks`` unchanged; raises ``InvalidInputError`` on an empty list or a repeated id."""
    if not tasks:
        raise InvalidInputError(f"{origin}: no tasks")
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise InvalidInputError(f"{origin}: task id {task.id!r} is repeated")
        seen.add(task.id)
    return tasks


# --- scoring -----------------------------------------------------------------------------


def score_calls(expected: Sequence[ExpectedCall], calls: Sequence[ModelCall],
                tools: Sequence[Mapping[str, Any]]) -> Score:
    """The verdict on ``calls`` against ``expected`` (see the module docstring)."""
    if not calls:
        return Score(verdict="no_call", detail="the model answered without a tool call")
    wanted = Counter(e.name for e in expected)
    made = Counter(c.name for c in calls)
    unexpected = sorted(set(made) - set(wanted))
    if unexpected:
        return Score(verdict="wrong_tool", detail=f"called {', '.join(unexpected)}; expected "
                     f"{', '.join(sorted(wanted))}")
    if made != wanted:
        return Score(verdict="wrong_count", detail=f"{sum(made.values())} calls; expected "
                     f"{sum(wanted.values())}")
    defaults = _defaults(tools)
    problems = [_best_mismatch(expected, calls, name, defaults.get(name, {})) for name in wanted]
    problem = next((p for p in problems if p is not None), None)
    if problem is not None:
        return Score(verdict="wrong_args", detail=problem)
    return Score(verdict="correct")


def _best_mismatch(expected: Sequence[ExpectedCall], calls: Sequence[ModelCall], name: str,
                   defaults: Mapping[str, Any]) -> str | None:
    """None if the calls to ``name`` match its expected calls in some order, else a reason.

    The reason is the first mismatch of the calls in the order they were made. Whether some
    order matches is a perfect matching of expected calls to made ones: polynomial, where
    trying every order took hours for a dozen parallel calls.
    """
    wanted = [e for e in expected if e.name == name]
    made = [c for c in calls if c.name == name]
    reasons = [[_mismatch(e, c, defaults) for c in made] for e in wanted]
    if _pairs_all([[reason is None for reason in row] for row in reasons]):
        return None
    # Some call of the order made mismatches, else that order would have been a matching.
    return next(reasons[i][i] for i in range(len(wanted)) if reasons[i][i] is not None)


def _pairs_all(fits: Sequence[Sequence[bool]]) -> bool:
    """Whether each row can be given a column of its own where it fits (a square matrix).

    Augmenting paths found breadth first (Kuhn's algorithm): O(n³), no recursion.
    """
    size = len(fits)
    owner = [-1] * size  # column -> the row it is given to
    given = [-1] * size  # row -> its column
    for start in range(size):
        reached_from: dict[int, int] = {}  # column -> the row that reached it
        frontier, free = [start], -1
        while frontier and free < 0:
            following = []
            for row in frontier:
                for column in range(size):
                    if fits[row][column] and column not in reached_from:
                        reached_from[column] = row
                        if owner[column] < 0:
                            free = column
                            break
                        following.append(owner[column])
                if free >= 0:
                    break
            frontier = following
        if free < 0:
            return False
        column = free
        while column >= 0:  # flip the path: each row on it takes the column it reached
            row = reached_from[column]
            previous = given[row]
            owner[column], given[row] = row, column
            column = previous
    return True


def _mismatch(expected: ExpectedCall, call: ModelCall, defaults: Mapping[str, Any]
              ) -> str | None:
    """Why ``call`` does not match ``expected``, or None when it does."""
    arguments: object = call.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            return f"{call.name}: arguments are not JSON"
    if not isinstance(arguments, dict):
        return f"{call.name}: arguments are not a JSON object"
    for key, value in expected.arguments.items():
        if key not in arguments:
            return f"{call.name}: {key} missing"
        if not values_equal(value, arguments[key]):
            return f"{call.name}: {key} differs"
    for key, groups in expected.contains.items():
        given = arguments.get(key)
        if not isinstance(given, str):
            return f"{call.name}: {key} missing"
        text = normalise(given)
        if any(not any(normalise(alt) in text for alt in group) for group in groups):
            return f"{call.name}: {key} lacks an expected fragment"
    for key in set(arguments) - set(expected.arguments) - set(expected.contains):
        if key not in defaults or not values_equal(defaults[key], arguments[key]):
            return f"{call.name}: unexpected argument {key}"
    return None


def normalise(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed and stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def values_equal(expected: Any, given: Any) -> bool:
    """Equality of JSON values after the normalisation of the module docstring."""
    if isinstance(expected, str) or isinstance(given, str):
        return isinstance(expected, str) and isinstance(given, str) and (
            normalise(expected) == normalise(given))
    if isinstance(expected, bool) or isinstance(given, bool):
        return expected is given
    if isinstance(expected, int | float) and isinstance(given, int | float):
        return numbers_equal(expected, given)
    if isinstance(expected, dict) and isinstance(given, dict):
        return expected.keys() == given.keys() and all(
            values_equal(v, given[k]) for k, v in expected.items())
    if isinstance(expected, list) and isinstance(given, list):
        return len(expected) == len(given) and all(
            values_equal(a, b) for a, b in zip(expected, given, strict=True))
    return bool(expected == given)


def numbers_equal(expected: float, given: float) -> bool:
    """Whether two JSON numbers are the same value.

    Whole numbers exactly (``1280`` is ``1280.0``; an order id one off is not the id);
    fractions within a relative 1e-9, for a value written with another rounding.
    """
    if _whole(expected) or _whole(given):
        return expected == given
    return math.isclose(expected, given, rel_tol=1e-9)


def _whole(value: float) -> bool:
    return isinstance(value, int) or value.is_integer()


def _defaults(tools: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per tool, the parameters whose schema declares a ``default``."""
    found: dict[str, dict[str, Any]] = {}
    for tool in tools:
        function = tool.get("function") or {}
        properties = (function.get("parameters") or {}).get("properties") or {}
        found[str(function.get("name"))] = {
            key: spec["default"] for key, spec in properties.items()
            if isinstance(spec, Mapping) and "default" in spec}
    return found
