"""Results of a cases run: per-case rows, the overall means, their JSON form, regressions.

``CasesResult.to_dict`` is what ``contextwright eval cases --json`` prints and ``--save``
writes; ``read_baseline`` reads such a file back and ``find_regressions`` compares a run with it
metric by metric, per case and overall, within ``DEFAULT_TOLERANCES``. ``format_cases`` lays a
result out as a fixed-width table with the usual context-quality targets (density above 60%,
noise below 20%) next to the overall numbers. Pure data and text: the only I/O is ``read_baseline``.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError

from contextwright.core.parsing import MalformedDocument, parse_document
from contextwright.errors import DatasetError

FORMAT = "contextwright-eval-cases/1"
"""The ``format`` field of a saved result."""
METRICS = ("completeness", "density", "position", "noise", "budget_use", "pair_integrity",
           "tokens")
"""Metric names in display order."""
JUDGED = ("judged_correct", "call_exact")
"""Per-case scores of a judged run (``eval cases --judge-…``): 1 or 0, None when not judged.
``judged_correct``: the judge graded the model's answer CORRECT; ``call_exact``: the model's
first tool call was the expected one exactly."""
MEASURED_AGAINST: Mapping[str, str] = {
    "completeness": "must_contain", "density": "must_contain", "noise": "noise",
    "position": "position", "judged_correct": "answer", "call_exact": "expected_call",
}
"""The field of a case each compared metric is measured against: when the field is edited, the
metric's scale changes (one fact more or less moves completeness with the same context), so a
baseline's score of it is not compared with this run's."""
CHECKED_FIELDS = ("must_contain", "noise", "position", "answer", "expected_call")
"""The fields of a case whose fingerprints a result keeps (``CaseResult.checks``)."""
LOWER_IS_BETTER = frozenset(("noise",))
"""Metrics where a rise is the regression."""
DEFAULT_TOLERANCES: Mapping[str, float] = {
    "completeness": 0.0, "position": 0.0, "pair_integrity": 0.0, "density": 0.02, "noise": 0.02,
    "judged_correct": 0.0, "call_exact": 0.0,
}
"""How far a metric may move the wrong way before it counts as a regression. Builds are
deterministic, so a lost fact or a misplaced constraint is a real change (0); density and
noise move a little with any change of wording in the context (a tool's description, the
data note), so they get 0.02. ``budget_use`` and ``tokens`` are reported, never judged. The
judged scores get 0 too: answers are cached by the exact request, so the same context gets the
same answer, and a changed grade means the context changed what the model answered."""
TARGETS: Mapping[str, tuple[str, float]] = {"density": (">", 0.6), "noise": ("<", 0.2)}
"""A good context: useful tokens above 60% of it, irrelevant ones below 20%."""
EPSILON = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """One case's metrics and what lowered them."""

    id: str
    """The case's id."""
    plan: str
    """The plan's name."""
    available: int
    """The tokens the plan made available."""
    scores: Mapping[str, float | None]
    """Metric values (``None``: not measured for this case)."""
    missing: tuple[str, ...] = ()
    """Required things not shown."""
    noise_shown: tuple[str, ...] = ()
    """Irrelevant things shown."""
    misplaced: tuple[str, ...] = ()
    """Placement checks that failed."""
    error: str | None = None
    """Why the build failed (then every metric is ``None``)."""
    tags: tuple[str, ...] = ()
    """The case's tags."""
    expects: str | None = None
    """The judged score the case asks for: ``judged_correct`` (it has an ``answer``),
    ``call_exact`` (an ``expected_call``), None (neither: a judged run leaves it unjudged)."""
    checks: Mapping[str, str] = field(default_factory=dict)
    """A fingerprint of each of the case's ``CHECKED_FIELDS``, so a later run can tell which
    of them a user edited (empty: not known)."""

    @staticmethod
    def failed(case_id: str, plan: str, available: int, error: str,
               tags: tuple[str, ...] = (), expects: str | None = None,
               checks: Mapping[str, str] | None = None) -> CaseResult:
        """The row of a case whose build or rendering failed."""
        return CaseResult(id=case_id, plan=plan, available=available,
                          scores=dict.fromkeys(METRICS), error=error, tags=tags,
                          expects=expects, checks=dict(checks or {}))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"id": self.id, "plan": self.plan, "available": self.available,
                "scores": dict(self.scores), "missing": list(self.missing),
                "noise_shown": list(self.noise_shown), "misplaced": list(self.misplaced),
                "error": self.error, "tags": list(self.tags), "checks": dict(self.checks)}


@dataclass(frozen=True, slots=True, kw_only=True)
class CasesResult:
    """A whole run of a cases file."""

    file: str
    """The cases file."""
    plan: str
    """The plan of the run (one for all, or how each case's was chosen)."""
    budget: int | None
    """The budget of every case, or None when each case has its own."""
    tokenizer: str
    """Tokenizer of the builds and the metrics."""
    cases: tuple[CaseResult, ...]
    """One row per case, in file order."""
    overall: Mapping[str, float | None] = field(default_factory=dict)
    """Each metric's mean over the cases that measure it."""
    notes: tuple[str, ...] = ()
    """What the run says besides the rows (who judged, cases that could not be judged)."""
    judged: bool = False
    """A model answered and a judge graded the cases (``eval cases --judge-…``)."""
    judged_by: tuple[str, str] | None = None
    """(judge model, answer model) of a judged run."""

    @property
    def failures(self) -> int:
        """Cases whose build failed."""
        return sum(row.error is not None for row in self.cases)

    @property
    def metrics(self) -> tuple[str, ...]:
        """``METRICS``, and the judged scores when any case has one."""
        judged = tuple(m for m in JUDGED
                       if any(row.scores.get(m) is not None for row in self.cases))
        return (*METRICS, *judged)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (also the baseline file format).

        A judged run also has ``judge_model`` and ``answer_model``.
        """
        models = {} if self.judged_by is None else {"judge_model": self.judged_by[0],
                                                    "answer_model": self.judged_by[1]}
        return {"format": FORMAT, "file": self.file, "plan": self.plan, "budget": self.budget,
                "tokenizer": self.tokenizer, **models, "metrics": list(self.metrics),
                "targets": {m: list(t) for m, t in TARGETS.items()},
                "overall": dict(self.overall), "failures": self.failures,
                "notes": list(self.notes), "cases": [row.to_dict() for row in self.cases]}


def overall(rows: Sequence[CaseResult]) -> dict[str, float | None]:
    """The mean of each metric over the cases that measure it (failed builds excluded).

    The judged scores are there only when some case has one.
    """
    means: dict[str, float | None] = {}
    for metric in (*METRICS, *JUDGED):
        values = [v for row in rows if (v := row.scores.get(metric)) is not None]
        if values or metric in METRICS:
            means[metric] = sum(values) / len(values) if values else None
    return means


# --- baseline and regressions ----------------------------------------------------------------


# Strict: a baseline is compared number by number, so "1.0" is not coerced, true is no score,
# and NaN (which never compares worse) is refused rather than passing every check. An unknown
# key is refused too: a misspelt field would otherwise be read as missing and compare nothing.
_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class _SavedCase(BaseModel):
    """One row of ``CaseResult.to_dict``; only ``id``, ``scores`` and ``error`` are compared."""

    model_config = _STRICT
    id: str
    scores: dict[str, float | None]
    error: str | None = None
    plan: str | None = None
    available: int | None = None
    missing: list[str] = []
    noise_shown: list[str] = []
    misplaced: list[str] = []
    tags: list[str] = []
    checks: dict[str, str] = {}


class _Saved(BaseModel):
    """``CasesResult.to_dict`` (with ``regressions`` when written by ``--json``)."""

    model_config = _STRICT
    format: str
    overall: dict[str, float | None]
    cases: list[_SavedCase]
    file: str | None = None
    plan: str | None = None
    budget: int | None = None
    tokenizer: str | None = None
    judge_model: str | None = None
    answer_model: str | None = None
    metrics: list[str] = []
    targets: dict[str, Any] = {}
    failures: int | None = None
    notes: list[str] = []
    regressions: list[str] = []


KNOWN_METRICS = (*METRICS, *JUDGED)
"""Every score a saved run may hold."""
COUNTS = frozenset(("tokens",))
"""Metrics that count something (0 or more); every other score is a share, from 0 to 1."""


def _score_error(scores: Mapping[str, float | None]) -> str | None:
    """What is wrong with one row of saved scores, or None.

    A metric this library does not write, a share outside 0 to 1, a count below 0.
    """
    for metric, value in scores.items():
        if metric not in KNOWN_METRICS:
            return f"unknown metric {metric!r} (known: {', '.join(KNOWN_METRICS)})"
        if value is None:
            continue
        if metric in COUNTS:
            if value < 0:
                return f"{metric} is {value:g}, below 0"
        elif not 0.0 <= value <= 1.0:
            return f"{metric} is {value:g}, outside 0 to 1"
    return None


def _saved_error(saved: _Saved) -> str | None:
    """What is wrong with a well-typed baseline, or None: a score out of range, an id twice."""
    if (problem := _score_error(saved.overall)) is not None:
        return f"overall: {problem}"
    seen: set[str] = set()
    for index, case in enumerate(saved.cases):
        if case.id in seen:
            # Two rows for one id: only one would be compared, and which is an accident.
            return f"cases.{index}: id {case.id!r} is given twice"
        seen.add(case.id)
        if (problem := _score_error(case.scores)) is not None:
            return f"cases.{index} ({case.id!r}): {problem}"
        unknown = sorted(set(case.checks) - set(CHECKED_FIELDS))
        if unknown:
            # A misspelt field would never match this run's and silently skip nothing.
            return (f"cases.{index} ({case.id!r}): checks: unknown field {unknown[0]!r} "
                    f"(known: {', '.join(CHECKED_FIELDS)})")
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Baseline:
    """A saved run to compare with."""

    overall: Mapping[str, float | None]
    """Its overall metrics."""
    cases: Mapping[str, Mapping[str, float | None]]
    """Its metrics by case id."""
    failed: frozenset[str]
    """Cases whose build failed in it."""
    tokenizer: str | None = None
    """The tokenizer it was measured with (None: not saved)."""
    setups: Mapping[str, tuple[str | None, int | None]] = field(default_factory=dict)
    """Each case's plan and available tokens, as saved."""
    checks: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Each case's fingerprints of its checked fields, as saved (none in an older file)."""
    judged_by: tuple[str, str] | None = None
    """(judge model, answer model) it was judged with (None: not judged, or not saved)."""


def read_baseline(path: Path) -> Baseline:
    """A file written by ``--save`` (or ``--json``); ``DatasetError`` names what is wrong.

    Scores must be finite numbers (shares from 0 to 1, ``tokens`` 0 or more) or null, not
    strings; case ids must be unique.
    """
    try:
        # A leading byte order mark (a file edited in Notepad) is no part of the JSON.
        data = parse_document(path.read_bytes().removeprefix(codecs.BOM_UTF8), "json")
    except OSError as exc:
        raise DatasetError(f"cannot read baseline {path}: {exc.strerror}") from None
    except MalformedDocument as exc:
        raise DatasetError(f"bad baseline {path.name}: not valid JSON: {exc}") from None
    try:
        saved = _Saved.model_validate(data)
    except PydanticValidationError as exc:
        error = exc.errors()[0]
        location = _location(data, error["loc"])
        raise DatasetError(f"bad baseline {path.name}: {location}: {error['msg']}") from None
    if saved.format != FORMAT:
        raise DatasetError(f"bad baseline {path.name}: format: expected {FORMAT!r}")
    if (problem := _saved_error(saved)) is not None:
        raise DatasetError(f"bad baseline {path.name}: {problem}")
    return Baseline(overall=saved.overall,
                    cases={case.id: case.scores for case in saved.cases},
                    failed=frozenset(case.id for case in saved.cases if case.error),
                    tokenizer=saved.tokenizer,
                    setups={case.id: (case.plan, case.available) for case in saved.cases},
                    checks={case.id: case.checks for case in saved.cases},
                    judged_by=None if saved.judge_model is None or saved.answer_model is None
                    else (saved.judge_model, saved.answer_model))


def _location(data: object, loc: Sequence[int | str]) -> str:
    """Where a validation error is, as ``cases.2 ('vault-2').scores.density``.

    A case is named by its id besides its index: the id is what a user can search the file for.
    """
    parts = [str(part) for part in loc]
    if len(loc) >= 2 and loc[0] == "cases" and isinstance(loc[1], int):
        rows = data.get("cases") if isinstance(data, dict) else None
        row = rows[loc[1]] if isinstance(rows, list) and loc[1] < len(rows) else None
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            parts[1] += f" ({row['id']!r})"
    return ".".join(parts) or "baseline"


@dataclass(frozen=True, slots=True, kw_only=True)
class Regression:
    """One metric that moved the wrong way by more than its tolerance."""

    case: str | None
    """The case's id; None for the overall mean."""
    metric: str
    """The metric (``build`` when a case that built now fails)."""
    before: float | None
    """The baseline's value."""
    after: float | None
    """This run's value."""
    tolerance: float
    """The tolerance that was exceeded."""

    def describe(self) -> str:
        """One line: ``case x: completeness 1.000 → 0.667 (tolerance 0)``."""
        where = "overall" if self.case is None else f"case {self.case}"
        if self.metric == "build":
            return f"{where}: the build fails now (it built in the baseline)"
        if self.after is None:
            # The case still asks for this grade and the judge gave none (see the run's notes).
            return f"{where}: {self.metric} {_number(self.before)} → no grade now (see the notes)"
        return (f"{where}: {self.metric} {_number(self.before)} → {_number(self.after)} "
                f"(tolerance {self.tolerance:g})")


def find_regressions(result: CasesResult, baseline: Baseline,
                     tolerances: Mapping[str, float] = DEFAULT_TOLERANCES) -> list[Regression]:
    """Every metric of ``tolerances`` that got worse by more than its tolerance.

    Compared per case (the cases of both runs) and overall; a case that built in the baseline
    and fails now is a regression too, and so is, in a judged run, a judged score the baseline
    has, the case still asks for and this run could not get (the judge's replies unreadable,
    say): a run that grades nothing must not pass for one that grades as well as before. A case
    whose ``answer`` or ``expected_call`` was removed asks for no grade any more: that is an
    edit of the file, reported by ``no_longer_judged``, not a regression. Likewise a metric
    measured against a field of the case edited since the baseline (``MEASURED_AGAINST``: a
    fact added to ``must_contain``, a corrected ``answer``) changed scale, not context: it is
    not compared for that case (``checks_changed`` says so).

    The overall means are those of the cases both runs hold, built and measure
    (``shared_overall``): a case added to the file or retired from it, or a check added to a
    case, changes no shared mean and is no regression.
    """
    overall_before, overall_after = shared_overall(result, baseline)
    found = _compare(None, overall_before, overall_after, tolerances)
    for row in result.cases:
        before = baseline.cases.get(row.id)
        if before is None:
            continue
        if row.error is not None and row.id not in baseline.failed:
            found.append(Regression(case=row.id, metric="build", before=None, after=None,
                                    tolerance=0.0))
            continue
        asked = (row.expects,) if result.judged and row.expects is not None else ()
        found += _compare(row.id, before, row.scores, tolerances, asked,
                          skip=_rescaled(row, baseline))
    return found


def edited_fields(row: CaseResult, baseline: Baseline) -> list[str]:
    """The ``CHECKED_FIELDS`` of ``row``'s case edited since the baseline was saved.

    Known only when both have the field's fingerprint (a baseline of an older version has none).
    """
    saved = baseline.checks.get(row.id, {})
    return [name for name in CHECKED_FIELDS
            if name in saved and name in row.checks and saved[name] != row.checks[name]]


def _rescaled(row: CaseResult, baseline: Baseline) -> frozenset[str]:
    """The metrics of ``row`` measured against a field edited since the baseline."""
    edited = set(edited_fields(row, baseline))
    return frozenset(metric for metric, name in MEASURED_AGAINST.items() if name in edited)


def checks_changed(result: CasesResult, baseline: Baseline) -> list[str]:
    """One line per case whose edited checks left scores of both runs uncompared.

    ``case x: must_contain changed since the baseline: completeness, density not compared``;
    a grade no longer asked for is ``no_longer_judged``'s to report.
    """
    lines = []
    for row in result.cases:
        before = baseline.cases.get(row.id)
        if before is None or row.error is not None:
            continue
        for name in edited_fields(row, baseline):
            metrics = [metric for metric, measured in MEASURED_AGAINST.items()
                       if measured == name and before.get(metric) is not None
                       and row.scores.get(metric) is not None]
            if metrics:
                lines.append(f"case {row.id}: {name} changed since the baseline: "
                             f"{', '.join(metrics)} not compared")
    return lines


_ASKS_NOW = {None: "expects neither an answer nor a tool call now",
             "judged_correct": "expects an answer now",
             "call_exact": "expects a tool call now"}
"""Why a judged score of the baseline is not asked for any more, by what the case asks now."""


def no_longer_judged(result: CasesResult, baseline: Baseline) -> list[str]:
    """The judged scores of the baseline that a judged run's cases no longer ask for.

    A case whose ``answer`` or ``expected_call`` was removed (or swapped for the other) is not
    graded on it any more; each such score is named, so a passing run says what it no longer
    compares.
    """
    if not result.judged:
        return []
    lines = []
    for row in result.cases:
        before = baseline.cases.get(row.id, {})
        for metric in JUDGED:
            old = before.get(metric)
            if old is not None and row.expects != metric and row.error is None:
                lines.append(f"case {row.id}: {metric} {_number(old)} → not judged now (the "
                             f"case {_ASKS_NOW[row.expects]})")
    return lines


def shared_overall(result: CasesResult, baseline: Baseline
                   ) -> tuple[Mapping[str, float | None], Mapping[str, float | None]]:
    """(the baseline's, this run's) overall means, over the same cases.

    Each metric's means are taken over the cases both runs hold, built and measure it: a case
    added or retired, or a check added to or dropped from a case (a fact listed for the first
    time, a noise list removed), changes no mean of what both runs measured.
    """
    built = {row.id: row for row in result.cases if row.error is None}
    shared = [case for case in baseline.cases if case in built and case not in baseline.failed]
    rescaled = {case: _rescaled(built[case], baseline) for case in shared}
    before: dict[str, float | None] = {}
    after: dict[str, float | None] = {}
    for metric in KNOWN_METRICS:
        pairs = [(old, new) for case in shared
                 if metric not in rescaled[case]
                 and (old := baseline.cases[case].get(metric)) is not None
                 and (new := built[case].scores.get(metric)) is not None]
        before[metric] = sum(old for old, _ in pairs) / len(pairs) if pairs else None
        after[metric] = sum(new for _, new in pairs) / len(pairs) if pairs else None
    return before, after


def judged_not_compared(result: CasesResult, baseline: Baseline) -> list[str]:
    """The judged scores the baseline has that a run without a judge does not compare.

    A CI job that lost its judge options (a variable that expands to nothing) still compares
    the metrics of the context, and should say that the grades were left out.
    """
    if result.judged:
        return []
    rows = [baseline.overall, *baseline.cases.values()]
    return [metric for metric in JUDGED if any(row.get(metric) is not None for row in rows)]


SHOWN_SETUPS = 3
"""Cases named in the note on plans and budgets that changed (the rest are counted)."""


def setup_changes(result: CasesResult, baseline: Baseline) -> list[str]:
    """What this run measured differently from the baseline (reported, not a regression).

    No shared built case at all (every id renamed, another file's baseline) means nothing was
    compared, which a run that passes should say.
    A baseline saved with another tokenizer or judged with other models, or a case built with
    another plan or budget (a ``--budget`` or ``--plan`` given to one run only, a case's plan
    edited), moves the metrics for that alone: the regressions it causes are real differences,
    and this says where they come from.
    """
    notes = []
    if not any(row.error is None and row.id in baseline.cases
               and row.id not in baseline.failed for row in result.cases):
        # Every case renamed, or the baseline of another file: passing means nothing then.
        notes.append("no case of this run was built in the baseline: nothing was compared")
    if baseline.tokenizer is not None and baseline.tokenizer != result.tokenizer:
        notes.append(f"the baseline was measured with tokenizer {baseline.tokenizer} and this "
                     f"run with {result.tokenizer}: tokens, density and noise move for that "
                     "alone")
    before, now = baseline.judged_by, result.judged_by
    if before is not None and now is not None and before != now:
        notes.append(f"the baseline was judged by {before[0]} with answers from {before[1]} "
                     f"and this run by {now[0]} with answers from {now[1]}: the grades move "
                     "for that alone")
    changed = []
    for row in result.cases:
        plan, available = baseline.setups.get(row.id, (None, None))
        if plan is None or available is None:
            continue
        if (plan, available) != (row.plan, row.available):
            changed.append(f"{row.id}: {plan} at {available:,} → {row.plan} at "
                           f"{row.available:,}")
    if changed:
        more = len(changed) - SHOWN_SETUPS
        notes.append(f"{len(changed)} case(s) built with another plan or budget than in the "
                     f"baseline ({'; '.join(changed[:SHOWN_SETUPS])}"
                     f"{f'; {more} more' if more > 0 else ''})")
    return notes


def new_in_run(result: CasesResult, baseline: Baseline) -> list[str]:
    """Ids of this run's cases the baseline does not have (reported, not a regression)."""
    return [row.id for row in result.cases if row.id not in baseline.cases]


def missing_from_run(result: CasesResult, baseline: Baseline) -> list[str]:
    """Ids of baseline cases this run does not have (reported, not a regression)."""
    ids = {row.id for row in result.cases}
    return sorted(case for case in baseline.cases if case not in ids)


def _compare(case: str | None, before: Mapping[str, float | None],
             after: Mapping[str, float | None], tolerances: Mapping[str, float],
             must_stay: Sequence[str] = (), skip: frozenset[str] = frozenset()
             ) -> list[Regression]:
    """The regressions of one row; a metric of ``must_stay`` measured before and not now is one.

    The metrics of ``skip`` are not compared (measured against checks edited since).
    """
    found = []
    for metric, tolerance in tolerances.items():
        if metric in skip:
            continue
        old, new = before.get(metric), after.get(metric)
        if old is not None and new is None and metric in must_stay:
            found.append(Regression(case=case, metric=metric, before=old, after=None,
                                    tolerance=tolerance))
            continue
        if old is None or new is None:
            continue
        worse = new - old if metric in LOWER_IS_BETTER else old - new
        if worse > tolerance + EPSILON:
            found.append(Regression(case=case, metric=metric, before=old, after=new,
                                    tolerance=tolerance))
    return found


def parse_tolerances(values: Sequence[str]) -> dict[str, float]:
    """``DEFAULT_TOLERANCES`` with ``metric=value`` overrides; ``DatasetError`` on a bad one."""
    tolerances = dict(DEFAULT_TOLERANCES)
    for text in values:
        metric, _, number = text.partition("=")
        if metric not in DEFAULT_TOLERANCES:
            raise DatasetError(f"--tolerance {text!r}: the metric must be one of "
                               f"{', '.join(DEFAULT_TOLERANCES)}")
        try:
            value = float(number)
        except ValueError:
            raise DatasetError(f"--tolerance {text!r}: expected metric=number") from None
        if not 0 <= value <= 1:
            raise DatasetError(f"--tolerance {text!r}: the tolerance must be within 0 and 1")
        tolerances[metric] = value
    return tolerances


# --- text ------------------------------------------------------------------------------------


def format_cases(result: CasesResult) -> str:
    """A fixed-width table: one row per case, the overall row with the targets, then notes."""
    shown = [m for m in result.metrics if m != "tokens"]
    headers = ["case", "plan", "tokens / available", *shown]
    rows = [_row(row, shown) for row in result.cases]
    rows.append(["overall", "", _tokens_cell(result.overall.get("tokens")),
                 *(_number(result.overall.get(m)) for m in shown)])
    widths = [max(len(line[i]) for line in [headers, *rows]) for i in range(len(headers))]
    title = (f"cases{' ' + result.file if result.file else ''}: plan {result.plan}; budget "
             f"{result.budget if result.budget is not None else 'per case'}; "
             f"tokenizer {result.tokenizer}")
    lines = [title, "", _join(headers, widths), "-+-".join("-" * w for w in widths)]
    lines += [_join(row, widths) for row in rows]
    return "\n".join([*lines, "", target_line(result.overall), *_notes(result)])


def target_line(values: Mapping[str, float | None]) -> str:
    """``targets: density > 0.6 met; noise < 0.2 met`` for the overall values."""
    parts = []
    for metric, (sign, goal) in TARGETS.items():
        value = values.get(metric)
        if value is None:
            parts.append(f"{metric} {sign} {goal:g} not measured")
            continue
        met = value > goal if sign == ">" else value < goal
        parts.append(f"{metric} {sign} {goal:g} {'met' if met else 'missed'}")
    return "targets (overall): " + "; ".join(parts)


def _row(row: CaseResult, shown: Sequence[str]) -> list[str]:
    tokens = row.scores.get("tokens")
    return [row.id, row.plan,
            f"{_tokens_cell(tokens)} / {row.available:,}" if row.error is None else "failed",
            *(_number(row.scores.get(m)) for m in shown)]


def _notes(result: CasesResult) -> list[str]:
    notes = list(result.notes)
    for row in result.cases:
        if row.error is not None:
            notes.append(f"{row.id}: {row.error}")
        for label, items in (("missing", row.missing), ("noise shown", row.noise_shown),
                             ("misplaced", row.misplaced)):
            if items:
                notes.append(f"{row.id}: {label}: {'; '.join(items)}")
    return notes


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _tokens_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _join(cells: Sequence[str], widths: Sequence[int]) -> str:
    return " | ".join(c.ljust(w) if i < 2 else c.rjust(w)
                      for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()
