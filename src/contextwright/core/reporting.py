"""Turning a build's decisions into the report: the per-source table and the decision list."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from contextwright.core.budget import Allocation
from contextwright.core.gather import Gathered
from contextwright.core.plan import BuildPlan
from contextwright.core.report import Action, BuildReport, Decision, SourceReport
from contextwright.core.select import Selection
from contextwright.tokens import CountingTokenizer

_LEFT_OUT: tuple[Action, ...] = ("dropped", "deduplicated", "conflict")


def unread_decisions(g: Gathered) -> list[Decision]:
    """One decision for the items a source offered beyond what could ever fit (never read).

    History and turn items carry their message index as ``order``, so their unread count is
    exact; for other sources it is unknown and reported as 0 with the reason saying so.
    """
    if g.complete:
        return []
    orders = [c.item.order for u in g.units for c in u.candidates]
    indexed = g.spec.source in ("history", "tool_results") and orders
    count = int(min(orders)) if indexed else 0
    reason = "budget: older than anything that could fit; not read" if indexed else (
        "budget: lower-ranked than anything that could fit; not read (number unknown)")
    return [Decision(source=g.spec.source, key=f"{g.spec.source}.*", action="dropped",
                     reason=reason, count=count)] if count or not indexed else []


def compacted_decisions(selection: Selection, tokenizer: CountingTokenizer) -> list[Decision]:
    """A ``compacted`` decision, with the raw text, for each kept item shown compacted."""
    return [
        Decision(source=u.source, key=c.item.key, action="compacted",
                 reason="JSON tool result shown as compact text",
                tokens_before=tokenizer.count(c.item.raw), tokens_after=c.tokens,
                 detail=c.item.raw)
        for u in selection.kept for c in u.candidates if c.item.raw is not None
    ]


def make_report(plan: BuildPlan, gathered: list[Gathered], allocations: Mapping[str, Allocation],
                selections: Mapping[str, Selection], decisions: list[Decision],
                warnings: list[str], tokenizer: CountingTokenizer, total: int) -> BuildReport:
    """Aggregate the decisions into the per-source table."""
    all_decisions = decisions + [
        d for s in selections.values() for d in compacted_decisions(s, tokenizer)]
    actions: Counter[tuple[str, str]] = Counter()
    unread_runs: Counter[str] = Counter()
    unread_items: Counter[str] = Counter()
    for d in all_decisions:
        actions[(d.source, d.action)] += 1
        if d.key.endswith(".*"):
            unread_runs[d.source] += 1
            unread_items[d.source] += d.count
    rows = []
    for g in gathered:
        name = g.spec.source
        selection = selections.get(name)
        kept = [c for u in (selection.kept if selection else g.units) for c in u.candidates]
        allocation = allocations.get(name)
        dropped = sum(actions[(name, a)] for a in _LEFT_OUT) - unread_runs[name]
        unread_count = unread_items[name]
        rows.append(SourceReport(
            source=name, share=allocation.share if allocation else 0,
            budget=allocation.grant if allocation else 0,
            tokens=sum(c.tokens for c in kept), chars=sum(len(c.message.content) for c in kept),
            items=len(kept), truncated=actions[(name, "truncated")],
            compacted=actions[(name, "compacted")], dropped=dropped + unread_count,
            error=g.error,
        ))
    warnings = warnings + [
        f"source {g.spec.source} failed: {g.error}" for g in gathered if g.error]
    return BuildReport(
        plan=plan.name, tokenizer=tokenizer.name, exact_tokens=tokenizer.exact,
        available=plan.budget.available, total_tokens=total, sources=tuple(rows),
        decisions=tuple(all_decisions), warnings=tuple(warnings),
    )
