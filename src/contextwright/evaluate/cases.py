"""Evaluation on a user's own cases: a JSON Lines file of requests and what their context needs.

Each line is one case (README "Evaluation on your own cases"): a request in the schema
``contextwright build --request`` reads, what its context must show (facts verbatim, evidence
message and document ids, tool definitions), what is irrelevant (noise), where things must sit
(constraints at the head, the question at the tail), and optionally the reference ``answer`` or
the ``expected_call`` a model should make. ``load_cases`` validates the file (pydantic; a
``DatasetError`` names the line and the field); ``run_cases`` builds every case with its plan and
budget and measures the rendered request (``case_metrics``); ``case_results`` holds the results,
their JSON form and the regression check against a saved run. No I/O but reading the cases
(and plan) files.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    StringConstraints,
)
from pydantic import ValidationError as PydanticValidationError

from contextwright.builder import ContextBuilder
from contextwright.core.accounting import image_tokens
from contextwright.core.final import FinalContext
from contextwright.core.parsing import MalformedDocument, decode_utf8, parse_document
from contextwright.core.plan import SHIPPED_PLANS, BuildPlan, load_plan
from contextwright.core.request import Request
from contextwright.errors import ContextwrightError, DatasetError, InvalidInputError, PlanError
from contextwright.evaluate.case_metrics import Checks, Placement, Wanted, measure
from contextwright.evaluate.case_results import CHECKED_FIELDS, CaseResult, CasesResult, overall
from contextwright.evaluate.records import CaseOutcome, ExpectedAnswer, ExpectedCall, Ratio
from contextwright.evaluate.render import failure
from contextwright.plans import select_plan

MAX_FILE_BYTES = 256 << 20
"""Largest cases file read (a case with a long history is a few hundred kilobytes)."""

NonEmpty = Annotated[str, StringConstraints(strict=True, min_length=1)]


def _visible(text: str) -> str:
    if not text.strip():
        raise ValueError("only whitespace, which any context holds")
    return text


Text = Annotated[NonEmpty, AfterValidator(_visible)]
"""A text looked for verbatim (a fact, a placed text): whitespace alone would always be found."""
PlanChooser = Callable[["EvalCase"], BuildPlan]


class _Material(BaseModel):
    model_config = ConfigDict(extra="forbid")
    facts: list[Text] = []
    messages: list[NonEmpty] = []
    documents: list[NonEmpty] = []
    tools: list[NonEmpty] = []


class _Position(BaseModel):
    model_config = ConfigDict(extra="forbid")
    head: list[Text] = []
    tail: list[Text] = []
    question_at_tail: StrictBool = False


class _Call(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: StrictStr = Field(min_length=1)
    arguments: dict[str, Any] = {}


class _Case(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: StrictStr = Field(min_length=1)
    request: dict[str, Any]
    plan: StrictStr | None = Field(default=None, min_length=1)
    budget: StrictInt | None = Field(default=None, gt=0)
    must_contain: _Material = _Material()
    noise: _Material = _Material()
    position: _Position = _Position()
    answer: StrictStr | None = Field(default=None, min_length=1)
    expected_call: _Call | None = None
    tags: list[StrictStr] = []


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalCase:
    """One validated line of a cases file."""

    id: str
    """The case's id (unique in its file)."""
    line: int
    """Its line number (for messages)."""
    where: str = ""
    """``file:line``, how messages name the case (``line N`` when it was not read from a file)."""
    request: Request
    """The request to build."""
    checks: Checks
    """What its context must show, must not show, and where."""
    plan: str | None = None
    """A shipped plan's name or a plan file (relative to the cases file); None: chosen from
    the request (``select_plan``), as ``contextwright build`` does."""
    budget: int | None = None
    """Available tokens (``available_override``); None: the plan's."""
    answer: str | None = None
    """The reference answer, for a judge."""
    expected_call: ExpectedCall | None = None
    """The tool call a model should make next."""
    tags: tuple[str, ...] = ()
    """Free labels (shown in the JSON result)."""

    def __post_init__(self) -> None:
        # One request gets one reply: a judged run sends the context once and grades either the
        # first tool call or the answer, so a case with both would be graded on half of what it
        # states. Checked here, so a case made in code and a loaded one get the same rule.
        if self.answer is not None and self.expected_call is not None:
            raise DatasetError(f"{self.where or f'line {self.line}'}: answer, expected_call: a "
                               "case expects either a reference answer or a tool call, not both "
                               "(the model's next reply is graded as one or the other)")

    @property
    def expected(self) -> ExpectedAnswer | ExpectedCall | None:
        """What a model answering from the context should produce.

        A case has at most one of ``expected_call`` and ``answer``.
        """
        if self.expected_call is not None:
            return self.expected_call
        if self.answer is not None:
            return ExpectedAnswer(question=self.request.user_input, answer=self.answer)
        return None

    @property
    def judged_metric(self) -> str | None:
        """The judged score this case asks for: ``call_exact``, ``judged_correct`` or None."""
        if self.expected_call is not None:
            return "call_exact"
        return "judged_correct" if self.answer is not None else None


def load_cases(path: Path) -> tuple[EvalCase, ...]:
    """Read and validate a cases file; ``DatasetError`` names the line and the field."""
    return parse_cases(_read(path), path.name)


def parse_cases(data: bytes, name: str) -> tuple[EvalCase, ...]:
    """Validate the bytes of a cases file (read elsewhere: standard input), as ``load_cases``.

    ``name`` stands for the file in error messages; more than ``MAX_FILE_BYTES`` is refused.
    """
    if len(data) > MAX_FILE_BYTES:
        raise DatasetError(f"cases file {name} is larger than {MAX_FILE_BYTES} bytes")
    try:
        # A leading byte order mark (Notepad, PowerShell 5's UTF-8) is no part of line 1.
        lines = decode_utf8(data).removeprefix("\ufeff").split("\n")
    except MalformedDocument as exc:
        raise DatasetError(f"cases file {name} is {exc}") from None
    cases: list[EvalCase] = []
    first_line: dict[str, int] = {}
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        case = parse_case(text, f"{name}:{number}", number)
        if case.id in first_line:
            raise DatasetError(f"{name}:{number}: id: {case.id!r} is also the id of line "
                               f"{first_line[case.id]}")
        first_line[case.id] = number
        cases.append(case)
    if not cases:
        raise DatasetError(f"{name} holds no cases (one JSON object per line)")
    return tuple(cases)


def _read(path: Path) -> bytes:
    """A cases file's bytes, one more than the limit at most (``parse_cases`` refuses those)."""
    try:
        with path.open("rb") as handle:
            return handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise DatasetError(f"cannot read cases file {path}: {exc.strerror}") from None


def parse_case(text: str, where: str, line: int = 0) -> EvalCase:
    """One case from its JSON text; ``where`` (``file:line``) starts every error message."""
    try:
        data = parse_document(text, "json")
    except MalformedDocument as exc:
        raise DatasetError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{where}: a case must be a JSON object")
    try:
        model = _Case.model_validate(data)
    except PydanticValidationError as exc:
        raise DatasetError(f"{where}: {_first_error(exc)}") from None
    try:
        request = Request.from_dict(model.request)
    except InvalidInputError as exc:
        raise DatasetError(f"{where}: {_request_error(str(exc))}") from None
    case = EvalCase(
        id=model.id, line=line, where=where, request=request, plan=model.plan,
        budget=model.budget,
        checks=Checks(required=_wanted(model.must_contain), noise=_wanted(model.noise),
                      placement=Placement(head=tuple(model.position.head),
                                          tail=tuple(model.position.tail),
                                          question_at_tail=model.position.question_at_tail)),
        answer=model.answer, tags=tuple(model.tags),
        expected_call=None if model.expected_call is None else ExpectedCall(
            name=model.expected_call.name, arguments=model.expected_call.arguments))
    check_references(case, where)
    return case


def _wanted(model: _Material) -> Wanted:
    return Wanted(facts=tuple(model.facts), messages=tuple(model.messages),
                  documents=tuple(model.documents), tools=tuple(model.tools))


def check_references(case: EvalCase, where: str) -> None:
    """Refuse unknown ids and names, and overlaps of required and noise.

    Ids and names must be in the request; nothing may be both required and noise.
    ``DatasetError`` names the field.
    """
    request = case.request
    message_ids = Counter(str(m.get("id")) for part in (request.history, request.turn)
                          for m in part if isinstance(m, Mapping) and m.get("id") is not None)
    known = {"messages": (message_ids, "no message of request.history or request.turn has "
                                       "id"),
             "documents": ({d.id for d in request.documents}, "no document of request.documents "
                                                              "has id"),
             "tools": ({_tool_name(t) for t in request.tools}, "no tool of request.tools is "
                                                               "named")}
    for group, wanted in (("must_contain", case.checks.required), ("noise", case.checks.noise)):
        for kind, (ids, problem) in known.items():
            for index, name in enumerate(getattr(wanted, kind)):
                if name not in ids:
                    raise DatasetError(f"{where}: {group}.{kind}[{index}]: {problem} {name!r}")
                if kind == "messages" and message_ids[name] > 1:
                    # A message named by an id that several have would count as shown when
                    # any of them is (documents may share an id: those are versions).
                    raise DatasetError(f"{where}: {group}.{kind}[{index}]: {message_ids[name]} "
                                       "messages of request.history and request.turn have id "
                                       f"{name!r}; give each message an id of its own")
    for kind in ("facts", "messages", "documents", "tools"):
        both = set(getattr(case.checks.required, kind)) & set(getattr(case.checks.noise, kind))
        if both:
            raise DatasetError(f"{where}: noise.{kind}: {sorted(both)[0]!r} is also in "
                               f"must_contain.{kind}")
    if case.checks.placement.question_at_tail and not request.user_input.strip():
        raise DatasetError(f"{where}: position.question_at_tail: request.user_input is empty "
                           "or white space alone, so there is no question to place")
    call = case.expected_call  # an answer beside it is refused by ``EvalCase`` itself
    if call is not None and call.name not in known["tools"][0]:
        raise DatasetError(f"{where}: expected_call.name: no tool of request.tools is named "
                           f"{call.name!r}")


def _tool_name(schema: Mapping[str, Any]) -> str:
    function = schema.get("function")
    return str(function.get("name")) if isinstance(function, Mapping) else ""


def _first_error(exc: PydanticValidationError) -> str:
    error = exc.errors()[0]
    location = "".join(f"[{part}]" if isinstance(part, int) else f".{part}"
                       for part in error["loc"]).lstrip(".") or "case"
    return f"{location}: {error['msg'].removeprefix('Value error, ')}"


def _request_error(message: str) -> str:
    prefix = "invalid request: "
    if message.startswith(prefix):
        return "request." + message[len(prefix):]
    return "request." + message


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseRun:
    """How to run a cases file: one plan for all (else each case's own), one budget for all."""

    plan: BuildPlan | None = None
    """The plan of every case (``--plan``); None: the case's ``plan``, else ``select_plan``."""
    budget: int | None = None
    """The budget of every case (``--budget``); None: the case's ``budget``, else the plan's."""
    base_dir: Path = Path()
    """Where a case's plan file is looked for."""
    _plan_files: dict[str, BuildPlan] = field(default_factory=dict, init=False, repr=False,
                                              compare=False)

    @property
    def label(self) -> str:
        """The plan of the run, as a result names it."""
        if self.plan is not None:
            return self.plan.name
        return "each case's plan, else chosen per request"

    def plan_of(self, case: EvalCase) -> BuildPlan:
        """The plan ``case`` is built with, before its budget is set."""
        if self.plan is not None:
            return self.plan
        if case.plan is None:
            return select_plan(case.request)
        if case.plan in SHIPPED_PLANS:
            return BuildPlan.named(case.plan)
        if case.plan not in self._plan_files:
            try:
                self._plan_files[case.plan] = load_plan(self.base_dir / case.plan,
                                                        shown=case.plan)
            except PlanError as exc:
                raise DatasetError(f"{case.where or f'line {case.line}'}: plan: {exc}") from None
        return self._plan_files[case.plan]

    def budgeted(self, case: EvalCase, plan: BuildPlan) -> BuildPlan:
        """``plan`` with the run's or the case's budget as its available tokens."""
        budget = self.budget if self.budget is not None else case.budget
        return plan if budget is None else plan.with_budget(available_override=budget)


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseBuild:
    """One case built and measured: the result row and what a model would be sent."""

    result: CaseResult
    """The metrics and what lowered them."""
    plan: BuildPlan
    """The plan it was built with (budget included)."""
    messages: list[dict[str, Any]]
    """The rendered OpenAI messages (empty when the build failed)."""
    tools: tuple[Mapping[str, Any], ...] = ()
    """The tool schemas the rendering offers."""

    def outcome(self, case: EvalCase) -> CaseOutcome:
        """The build as a suite outcome (for ablation and judging)."""
        scores = {name: Ratio.of(value) for name, value in self.result.scores.items()
                  if value is not None}
        return CaseOutcome(case_id=case.id, budget=self.result.available,
                           contextwright=scores, baseline={}, messages=self.messages,
                           error=self.result.error, expected=case.expected, tools=self.tools)


def build_case(builder: ContextBuilder, case: EvalCase, plan: BuildPlan) -> CaseBuild:
    """Build ``case`` with ``plan`` and measure it; a failed build is a result, not an error."""
    available = plan.budget.available
    try:
        ctx = builder.build(plan, case.request)
        body = ctx.to_request("openai")
    except ContextwrightError as exc:
        return CaseBuild(result=CaseResult.failed(case.id, plan.name, available,
                                                  failure("build", exc), case.tags,
                                                  case.judged_metric, check_fingerprints(case)),
                         plan=plan, messages=[])
    messages = list(body["messages"])
    tools = tuple(body.get("tools") or ())
    measured = measure(case.request, case.checks, messages, tools, builder.tokenizer.count,
                       image_tokens=sent_image_tokens(ctx))
    scores = {**measured.scores, "budget_use": ctx.total_tokens / available}
    result = CaseResult(id=case.id, plan=plan.name, available=available, scores=scores,
                        missing=measured.missing, noise_shown=measured.noise_shown,
                        misplaced=measured.misplaced, tags=case.tags,
                        expects=case.judged_metric, checks=check_fingerprints(case))
    return CaseBuild(result=result, plan=plan, messages=messages, tools=tools)


def check_fingerprints(case: EvalCase) -> dict[str, str]:
    """A short hash of each field of ``case`` a metric is measured against (``CHECKED_FIELDS``).

    Order does not count (every metric counts what is shown), so a reordered list is the same
    check; an item added or retired makes another, whose baseline score is not comparable.
    """
    checks, call = case.checks, case.expected_call
    parts: dict[str, object] = {
        "must_contain": _sorted_wanted(checks.required), "noise": _sorted_wanted(checks.noise),
        "position": {"head": sorted(checks.placement.head),
                     "tail": sorted(checks.placement.tail),
                     "question_at_tail": checks.placement.question_at_tail},
        "answer": case.answer,
        "expected_call": None if call is None else {"name": call.name,
                                                    "arguments": dict(call.arguments)},
    }
    return {name: _fingerprint(parts[name]) for name in CHECKED_FIELDS}


def _sorted_wanted(wanted: Wanted) -> dict[str, list[str]]:
    return {"facts": sorted(wanted.facts), "messages": sorted(wanted.messages),
            "documents": sorted(wanted.documents), "tools": sorted(wanted.tools)}


def _fingerprint(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                      default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def sent_image_tokens(ctx: FinalContext) -> int:
    """Tokens the build counted for the images the OpenAI rendering sends.

    A user message's images are sent; a tool message's are shown as placeholder lines of its
    text, which the text already counts.
    """
    return sum(image_tokens(m.images, ctx.image_rule).tokens for m in ctx.messages
               if m.role == "user" and m.images)


def iter_builds(cases: Sequence[EvalCase], builder: ContextBuilder, run: CaseRun,
                transform: Callable[[BuildPlan, EvalCase], BuildPlan] | None = None
                ) -> Iterator[tuple[EvalCase, CaseBuild]]:
    """Build every case; ``transform`` changes each case's plan first (an ablation)."""
    for case in cases:
        plan = run.plan_of(case)
        if transform is not None:
            plan = transform(plan, case)
        yield case, build_case(builder, case, run.budgeted(case, plan))


def run_cases(cases: Sequence[EvalCase], builder: ContextBuilder | None = None,
              run: CaseRun | None = None, *, source: str = "",
              on_result: Callable[[CaseResult], None] | None = None) -> CasesResult:
    """Build and measure every case; ``on_result`` sees each result as it is made."""
    builder = builder or ContextBuilder(tokenizer="o200k_base")
    run = run or CaseRun()
    results = []
    for _, build in iter_builds(cases, builder, run):
        if on_result is not None:
            on_result(build.result)
        results.append(build.result)
    return CasesResult(file=source, plan=run.label, budget=run.budget,
                       tokenizer=builder.tokenizer.name, cases=tuple(results),
                       overall=overall(results))
