"""Ablation: remove one source or one plan option at a time, rerun, and compare with the full plan.

``ablations(plans)`` reads the plans and lists what can be taken away: every source but the
user's input, and the options that change what a source shows (history recall, the digest of
omitted turns, tool-result tiers, JSON compaction, document fill, tool selection; any other
option on its own; the repeated question). ``run_ablation`` runs a target — one of the dataset
suites, or a cases file — with the full plan and with each ablation, and ``format_ablation``
prints every metric next to its change against the full plan. ``on_outcome`` sees every build
(a judge uses it). Pure but for the builds: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, cast

from contextwright.builder import ContextBuilder
from contextwright.core.cache import plan_hash
from contextwright.core.covering import covering
from contextwright.core.plan import BuildPlan, FrozenOptions
from contextwright.core.request import Request
from contextwright.errors import ContextwrightError
from contextwright.evaluate.case_results import METRICS as CASE_METRICS
from contextwright.evaluate.cases import CaseRun, EvalCase, iter_builds
from contextwright.evaluate.records import CaseOutcome, pool
from contextwright.evaluate.runner import Suite

Kind = Literal["source", "options", "repeat_question"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OptionGroup:
    """Options that together switch one feature of a source on."""

    name: str
    """Short name (``recall``)."""
    what: str
    """What removing it turns off, in words."""
    keys: tuple[str, ...]
    """The options removed."""
    sources: tuple[str, ...]
    """Sources that read them."""
    sets: Mapping[str, Any] = field(default_factory=dict)
    """Options set instead (what switches the feature off where removing it would not)."""
    on_by_default: bool = False
    """The feature is on in a plan that names none of its options."""

    def present(self, options: Mapping[str, Any]) -> bool:
        """Whether the feature is on under ``options``, so taking it out changes something."""
        if self.on_by_default:  # on unless switched off: the sets say how
            return any(options.get(key, True) != value for key, value in self.sets.items())
        named = any(key in options for key in (*self.keys, *self.sets))
        return named and without(options, self.keys, self.sets) != dict(options)


def without(options: Mapping[str, Any], keys: Sequence[str], sets: Mapping[str, Any]
            ) -> dict[str, Any]:
    """``options`` without ``keys``, with ``sets`` set."""
    return {**{k: v for k, v in options.items() if k not in keys}, **sets}


OPTION_GROUPS = (
    OptionGroup(name="recall", what="relevance-selected older turns (recall) off",
                keys=("recall_share", "recall_limit", "recent_rounds"), sources=("history",)),
    OptionGroup(name="digest", what="digest of the exact values of omitted turns off",
                keys=("digest_share", "digest_scan"), sources=("history", "tool_results")),
    OptionGroup(name="tiers", what="tiered tool results off (every result shown whole)",
                keys=("tool_full", "tool_reduced", "tool_early", "tool_line_chars",
                      "tier_anchor"), sources=("history", "tool_results")),
    OptionGroup(name="compaction", what="JSON tool results shown raw, not as compact text",
                keys=("fields",), sources=("history", "tool_results"),
                sets={"compact_tool_results": False}, on_by_default=True),
    OptionGroup(name="fill", what="documents past the top passages not filled in",
                keys=("fill_budget", "fill_threshold", "fill_limit"), sources=("rag",)),
    OptionGroup(name="selection", what="every tool offered, none selected",
                keys=("select", "max_tools", "always_include", "always", "recent_messages"),
                sources=("tools",)),
    # Removing compact_descriptions alone would leave its default, auto, which still compacts
    # a catalogue over description_budget: "never" is set instead.
    OptionGroup(name="descriptions", what="tool descriptions never compacted",
                keys=("description_budget",), sources=("tools",),
                sets={"compact_descriptions": False}),
)
"""The features an ablation switches off as one (any other option is removed on its own)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Ablation:
    """One thing taken out of a plan."""

    label: str
    """``-history``, ``-history.recall``, ``-repeat_question``."""
    what: str
    """What it takes away, in words."""
    kind: Kind
    """A source, options of a source, or the repeated question."""
    source: str | None = None
    """The source concerned."""
    keys: tuple[str, ...] = ()
    """Options removed."""
    sets: Mapping[str, Any] = field(default_factory=dict)
    """Options set instead."""

    def apply(self, plan: BuildPlan) -> BuildPlan | None:
        """``plan`` without this part; None when ``plan`` does not have it.

        A removed source stays removed: the plan no longer adds sources for the request's
        parts it lacks (``add_missing_sources``), or the build would add it back. Give
        ``covered(plan, request)`` first where the request is known, so every other part the
        plan would have covered still is.
        """
        if self.kind == "repeat_question":
            return replace(plan, repeat_question=False) if plan.repeat_question else None
        spec = plan.spec(self.source or "")
        if spec is None:
            return None
        if self.kind == "source":
            return replace(plan, sources=tuple(s for s in plan.sources if s is not spec),
                           add_missing_sources=False)
        options = without(spec.options, self.keys, self.sets)
        if options == dict(spec.options):
            return None
        changed = replace(spec, options=FrozenOptions(options))
        return replace(plan, sources=tuple(changed if s is spec else s for s in plan.sources))


def covered(plan: BuildPlan, request: Request) -> BuildPlan:
    """``plan`` with the sources a build would add for ``request`` already in it."""
    return covering(plan, request) if plan.add_missing_sources else plan


def ablations(plans: Sequence[BuildPlan]) -> tuple[Ablation, ...]:
    """Everything that can be taken out of ``plans``, one at a time, in plan order."""
    found: dict[str, Ablation] = {}
    for plan in plans:
        for spec in plan.sources:
            if spec.source != "user":  # a plan without it is refused: the input is never shown
                found.setdefault(f"-{spec.source}", Ablation(
                    label=f"-{spec.source}", what=f"the {spec.source} source removed",
                    kind="source", source=spec.source))
            for ablation in _option_ablations(spec.source, spec.options):
                found.setdefault(ablation.label, ablation)
        if plan.repeat_question:
            found.setdefault("-repeat_question", Ablation(
                label="-repeat_question", what="the question not repeated at the tail",
                kind="repeat_question"))
    return tuple(found.values())


def _option_ablations(source: str, options: Mapping[str, Any]) -> Iterator[Ablation]:
    grouped: set[str] = set()
    for group in OPTION_GROUPS:
        if source in group.sources:
            grouped.update(group.keys, group.sets)
            if group.present(options):
                yield Ablation(label=f"-{source}.{group.name}", what=f"{source}: {group.what}",
                               kind="options", source=source,
                               keys=group.keys, sets=group.sets)
    for key in options:
        if key not in grouped:
            yield Ablation(label=f"-{source}.{key}", what=f"{source}: option {key} removed",
                           kind="options", source=source, keys=(key,))


# --- targets ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Built:
    """One case built under one variant."""

    outcome: CaseOutcome
    """The build and its metrics."""
    plan_hash: str
    """A hash of the plan it was built with (the judge's cache key has it)."""
    applied: bool
    """Whether the ablation changed this case's plan."""


class Target(Protocol):
    """What an ablation reruns: a dataset suite or a cases file."""

    @property
    def name(self) -> str:
        """``locomo``, ``tau``, ``hotpotqa`` or ``cases``."""
        ...

    @property
    def metrics(self) -> tuple[str, ...]:
        """Metric names in display order."""
        ...

    @property
    def budgets(self) -> tuple[int | None, ...]:
        """Budgets to run (None: each case's own)."""
        ...

    @property
    def description(self) -> str:
        """The plan and how the budget is applied."""
        ...

    def plans(self) -> list[BuildPlan]:
        """The full plans the ablations are read from."""
        ...

    def __len__(self) -> int:
        """Number of cases."""
        ...

    def builds(self, ablation: Ablation | None, budget: int | None) -> Iterator[Built]:
        """Every case built with the full plan (None) or with ``ablation``."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteTarget:
    """A dataset suite (``locomo``, ``tau``, ``hotpotqa``) over some of its budgets.

    The suite builds each request itself, so a variant without a source adds no missing source
    for any request part: with a suite's own plan none is missing; with another plan (``--plan
    chat`` on τ-bench) the sources it would have added are left out of that variant too.
    """

    suite: Suite
    """The suite, with its full plan."""
    budget_list: tuple[int, ...] = ()
    """Budgets to run (empty: the suite's defaults)."""
    label: str = ""
    """The plan's label."""

    @property
    def name(self) -> str:
        """The suite's name."""
        return self.suite.name

    @property
    def metrics(self) -> tuple[str, ...]:
        """The suite's metrics."""
        return self.suite.metrics

    @property
    def budgets(self) -> tuple[int | None, ...]:
        """The budgets run."""
        return self.budget_list or self.suite.default_budgets

    @property
    def description(self) -> str:
        """Plan label and budget rule."""
        return f"plan {self.label or self.suite.plan.name}, {self.suite.budget_rule}"

    def plans(self) -> list[BuildPlan]:
        """The suite's one plan."""
        return [self.suite.plan]

    def __len__(self) -> int:
        """The suite's cases."""
        return len(self.suite)

    def builds(self, ablation: Ablation | None, budget: int | None) -> Iterator[Built]:
        """The suite's outcomes at ``budget`` under the variant plan."""
        plan = self.suite.plan if ablation is None else ablation.apply(self.suite.plan)
        if plan is None or budget is None:
            return
        variant = cast(Suite, replace(cast(Any, self.suite), plan=plan))
        digest = plan_hash(plan)
        for outcome in variant.outcomes(budget):
            yield Built(outcome=outcome, plan_hash=digest, applied=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class CasesTarget:
    """A cases file; each case keeps its own plan and budget unless the run sets them."""

    cases: tuple[EvalCase, ...]
    """The cases."""
    builder: ContextBuilder
    """Builds them."""
    run: CaseRun = field(default_factory=CaseRun)
    """Plan and budget of the run."""
    name: str = "cases"
    """Target name."""
    metrics: tuple[str, ...] = CASE_METRICS
    """The case metrics."""

    @property
    def budgets(self) -> tuple[int | None, ...]:
        """The run's budget, or None (each case's own)."""
        return (self.run.budget,)

    @property
    def description(self) -> str:
        """How plans and budgets were chosen."""
        plan = self.run.plan.name if self.run.plan else "each case's plan, else chosen per request"
        return f"plan {plan}"

    def plans(self) -> list[BuildPlan]:
        """The distinct plans of the cases, with the sources their builds would add."""
        plans: dict[str, BuildPlan] = {}
        for case in self.cases:
            plan = covered(self.run.plan_of(case), case.request)
            plans.setdefault(plan_hash(plan), plan)
        return list(plans.values())

    def __len__(self) -> int:
        """Number of cases."""
        return len(self.cases)

    def builds(self, ablation: Ablation | None, budget: int | None) -> Iterator[Built]:
        """Every case; a case whose plan lacks what the ablation removes keeps its plan."""
        applied: dict[str, bool] = {}

        def transform(plan: BuildPlan, case: EvalCase) -> BuildPlan:
            if ablation is None:
                return plan
            full = covered(plan, case.request)
            changed = ablation.apply(full)
            applied["last"] = changed is not None
            return changed if changed is not None else plan

        run = replace(self.run, budget=budget) if budget is not None else self.run
        for case, build in iter_builds(self.cases, self.builder, run, transform):
            yield Built(outcome=build.outcome(case), plan_hash=plan_hash(build.plan),
                        applied=ablation is None or applied["last"])


# --- running ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class VariantRow:
    """One variant at one budget."""

    label: str
    """``full plan`` or the ablation's label."""
    budget: int | None
    """The budget (None: each case's own)."""
    metrics: Mapping[str, float | None]
    """Pooled metrics."""
    cases: int = 0
    """Cases built."""
    applied: int = 0
    """Cases whose plan the ablation changed."""
    failures: int = 0
    """Builds that failed."""
    failure: str | None = None
    """The first failed build: its case and why (the others are alike or in ``--json``)."""
    error: str | None = None
    """Why the variant could not be run at all."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"variant": self.label, "budget": self.budget, "metrics": dict(self.metrics),
                "cases": self.cases, "applied": self.applied, "failures": self.failures,
                "failure": self.failure, "error": self.error}


@dataclass(frozen=True, slots=True, kw_only=True)
class AblationResult:
    """The full plan and every ablation, at every budget."""

    target: str
    """What was run."""
    description: str
    """Plan and budget rule."""
    cases: int
    """Cases per run."""
    metrics: tuple[str, ...]
    """Metric names in display order."""
    ablations: tuple[Ablation, ...]
    """The ablations, in order."""
    rows: tuple[VariantRow, ...]
    """Per budget: the full plan's row, then one per ablation."""
    notes: tuple[str, ...] = ()
    """Lines printed under the table (what the judge did)."""

    @property
    def full_failures(self) -> int:
        """Builds of the full plan that failed, over every budget (a variant's are findings)."""
        return sum(row.failures for row in self.rows if row.label == FULL)

    def full(self, budget: int | None) -> VariantRow:
        """The full plan's row at ``budget``."""
        return next(r for r in self.rows if r.budget == budget and r.label == FULL)

    def delta(self, row: VariantRow, metric: str) -> float | None:
        """``row``'s value of ``metric`` minus the full plan's at the same budget."""
        value, full = row.metrics.get(metric), self.full(row.budget).metrics.get(metric)
        return None if value is None or full is None else value - full

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, deltas included."""
        return {"target": self.target, "description": self.description, "cases": self.cases,
                "metrics": list(self.metrics),
                "ablations": [{"label": a.label, "what": a.what} for a in self.ablations],
                "rows": [{**row.to_dict(), "delta": {m: self.delta(row, m)
                                                     for m in self.metrics}}
                         for row in self.rows],
                "notes": list(self.notes)}


FULL = "full plan"
OnBuilt = Callable[[str, int | None, Built], None]
"""Called with (variant label, budget, build) for every build."""


def run_ablation(target: Target, *, on_built: OnBuilt | None = None,
                 selected: Sequence[Ablation] | None = None) -> AblationResult:
    """Run ``target`` with its full plans and with each ablation (``selected``, or all)."""
    chosen = tuple(selected) if selected is not None else ablations(target.plans())
    rows: list[VariantRow] = []
    for budget in target.budgets:
        for ablation in (None, *chosen):
            rows.append(_variant(target, ablation, budget, on_built))
    return AblationResult(target=target.name, description=target.description,
                          cases=len(target), metrics=target.metrics, ablations=chosen,
                          rows=tuple(rows))


def _variant(target: Target, ablation: Ablation | None, budget: int | None,
             on_built: OnBuilt | None) -> VariantRow:
    label = FULL if ablation is None else ablation.label
    scores, applied, failures = [], 0, 0
    first: str | None = None
    try:
        for built in target.builds(ablation, budget):
            if on_built is not None:
                on_built(label, budget, built)
            scores.append(built.outcome.contextwright)
            applied += built.applied
            if built.outcome.error is not None:
                failures += 1
                first = first or f"{built.outcome.case_id}: {built.outcome.error}"
    except ContextwrightError as exc:
        return VariantRow(label=label, budget=budget, metrics={}, error=f"{type(exc).__name__}: "
                          f"{exc}")
    return VariantRow(label=label, budget=budget, metrics=pool(scores, target.metrics),
                      cases=len(scores), applied=applied, failures=failures, failure=first)


def with_metrics(result: AblationResult, extra: Mapping[tuple[str, int | None],
                                                         Mapping[str, float | None]],
                 names: Sequence[str], notes: Sequence[str] = ()) -> AblationResult:
    """``result`` with more metrics per (variant, budget) row (a judge's)."""
    rows = tuple(replace(row, metrics={**row.metrics, **extra.get((row.label, row.budget), {})})
                 for row in result.rows)
    return replace(result, rows=rows, metrics=(*result.metrics, *names),
                   notes=(*result.notes, *notes))


# --- text ------------------------------------------------------------------------------------

COUNTS = frozenset(("tokens", "placeholders", "judge_errors"))


def format_ablation(result: AblationResult) -> str:
    """A fixed-width table: per budget the full plan, then each ablation with its deltas."""
    headers = ["budget", "variant", *result.metrics]
    rows = [_cells(result, row) for row in result.rows]
    widths = [max(len(line[i]) for line in [headers, *rows]) for i in range(len(headers))]
    title = (f"ablation of {result.target} ({result.description}; {result.cases} cases); "
             "each value with its change against the full plan")
    lines = [title, "", _join(headers, widths), "-+-".join("-" * w for w in widths)]
    lines += [_join(row, widths) for row in rows]
    lines += ["", *(f"{a.label}: {a.what}" for a in result.ablations)]
    lines += [f"{row.label} @ {_budget(row.budget)}: {row.error}" for row in result.rows
              if row.error]
    # A failed build is in no mean (a case) or counts as 0 (a suite): either way a row's numbers
    # are not those of all its cases, so it is said under the table, with the first reason.
    lines += [f"{row.label} @ {_budget(row.budget)}: {row.failures} of {row.cases} builds "
              f"failed (first: {row.failure})" for row in result.rows if row.failures]
    lines += [f"{row.label} @ {_budget(row.budget)}: applies to {row.applied} of {row.cases} "
              "cases" for row in result.rows
              if row.label != FULL and not row.error and row.applied < row.cases]
    return "\n".join([*lines, *result.notes])


def _cells(result: AblationResult, row: VariantRow) -> list[str]:
    if row.error:
        return [_budget(row.budget), row.label, *("n/a" for _ in result.metrics)]
    cells = []
    for metric in result.metrics:
        value = row.metrics.get(metric)
        text = _number(value, metric)
        if row.label != FULL and value is not None:
            delta = result.delta(row, metric)
            text += f" ({_signed(delta, metric)})" if delta is not None else ""
        cells.append(text)
    return [_budget(row.budget), row.label, *cells]


def _number(value: float | None, metric: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if metric in COUNTS else f"{value:.3f}"


def _signed(delta: float, metric: str) -> str:
    if abs(delta) < 5e-4 and metric not in COUNTS:
        return "±0"
    return f"{delta:+,.1f}" if metric in COUNTS else f"{delta:+.3f}"


def _budget(budget: int | None) -> str:
    return "per case" if budget is None else f"{budget:,}"


def _join(cells: Sequence[str], widths: Sequence[int]) -> str:
    return " | ".join(c.ljust(w) if i < 2 else c.rjust(w)
                      for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()
