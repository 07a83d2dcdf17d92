"""Result records of an evaluation: per-case ratios, per-budget summaries, whole-suite results.

Every metric is kept as a ``Ratio`` (numerator and denominator) so that one aggregation rule,
sum of numerators over sum of denominators, serves both per-case means (each case contributes
``value / 1``) and pooled shares (``facts survived / facts``). Pure data: no I/O, no builds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Ratio:
    """One metric of one case: ``numerator / denominator``, pooled over cases by summing."""

    numerator: float
    """What was achieved (e.g. evidence turns present, or a per-case value)."""
    denominator: float
    """What was possible (e.g. evidence turns of the question, or 1 for a per-case value)."""

    @staticmethod
    def of(value: float) -> Ratio:
        """A per-case value that is averaged over cases (denominator 1)."""
        return Ratio(numerator=value, denominator=1.0)


Scores = Mapping[str, Ratio]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedAnswer:
    """A question whose answer a judge model compares with a reference answer."""

    question: str
    """The question the context is built for."""
    answer: str
    """The reference answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedCall:
    """The tool call a model should make next, compared exactly (name and arguments)."""

    name: str
    """Function name."""
    arguments: Mapping[str, Any]
    """Arguments as parsed JSON."""


Expectation = ExpectedAnswer | ExpectedCall
"""What a model answering from the built context should produce."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseOutcome:
    """contextwright and the baseline on one case at one budget."""

    case_id: Any
    """The dataset's id of the case (LoCoMo ``[sample_id, qa_index]``, τ-bench ``traj_index``,
    HotpotQA ``_id``); JSON-ready."""
    budget: int
    """The budget of this build."""
    contextwright: Scores
    """contextwright's metrics, measured on its rendered OpenAI messages."""
    baseline: Scores
    """The baseline's metrics, measured the same way on its messages."""
    messages: Sequence[Mapping[str, Any]]
    """contextwright's rendered OpenAI messages (empty when the build failed)."""
    error: str | None = None
    """Why contextwright's build or its validation failed (the metrics then count as 0)."""
    expected: Expectation | None = None
    """What a model answering from ``messages`` should produce, when the case says."""
    tools: tuple[Mapping[str, Any], ...] = ()
    """Tool schemas sent with ``messages`` when a model answers (OpenAI format)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetSummary:
    """The pooled metrics of one budget."""

    budget: int
    """The budget."""
    cases: int
    """Cases evaluated."""
    failures: int
    """contextwright builds that raised or failed validation."""
    contextwright: Mapping[str, float | None]
    """Pooled metrics of contextwright (``None`` where nothing could be measured)."""
    baseline: Mapping[str, float | None]
    """Pooled metrics of the baseline."""
    targets: Mapping[str, float] = field(default_factory=dict)
    """Targets of the issue for this budget, by metric."""
    errors: tuple[str, ...] = ()
    """The first few failure reasons (no payloads)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"budget": self.budget, "cases": self.cases, "failures": self.failures,
                "contextwright": dict(self.contextwright), "baseline": dict(self.baseline),
                "targets": dict(self.targets), "errors": list(self.errors)}


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteResult:
    """A whole run of one suite over its budgets."""

    suite: str
    """``locomo``, ``tau`` or ``hotpotqa``."""
    data: str
    """The data folder."""
    plan: str
    """The plan's name (or file) and how the budget was applied."""
    tokenizer: str
    """Tokenizer used by contextwright and the baseline alike."""
    baseline: str
    """What the baseline does."""
    metrics: tuple[str, ...]
    """Metric names in display order."""
    budgets: tuple[BudgetSummary, ...]
    """One summary per budget."""
    extra: Mapping[str, float | str | None] = field(default_factory=dict)
    """Budget-independent numbers (HotpotQA: nDCG@10 of the retrieval step)."""

    @property
    def failures(self) -> int:
        """Failed contextwright builds over all budgets."""
        return sum(row.failures for row in self.budgets)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"suite": self.suite, "data": self.data, "plan": self.plan,
                "tokenizer": self.tokenizer, "baseline": self.baseline,
                "metrics": list(self.metrics),
                "budgets": [row.to_dict() for row in self.budgets], "extra": dict(self.extra)}


def pool(scores: Iterable[Scores], names: Sequence[str]) -> dict[str, float | None]:
    """Sum numerators and denominators per metric; ``None`` where the denominator is 0."""
    totals = {name: [0.0, 0.0] for name in names}
    for case in scores:
        for name in names:
            ratio = case.get(name)
            if ratio is not None:
                totals[name][0] += ratio.numerator
                totals[name][1] += ratio.denominator
    return {name: (num / den if den else None) for name, (num, den) in totals.items()}
