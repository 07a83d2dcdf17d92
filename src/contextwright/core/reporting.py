"""Turning a build's decisions into the report: the per-source table and the decision list."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

from contextwright.core.budget import Allocation
from contextwright.core.fence import fenced_body
from contextwright.core.gather import PASS_OVER_LIMIT, Candidate, Gathered
from contextwright.core.notes import with_recall_score
from contextwright.core.plan import BuildPlan
from contextwright.core.report import Action, BuildReport, Decision, SourceReport
from contextwright.core.request import Request
from contextwright.core.select import Selection
from contextwright.tokens import CountingTokenizer
from contextwright.tokens._base import split_into_pieces

_LEFT_OUT: tuple[Action, ...] = ("dropped", "deduplicated", "conflict")
OLDER_THAN_KEPT_RUN = "older than the kept run (kept from the previous build for a stable prefix)"
"""Why a continued layout leaves out the older messages (read or not)."""
BEFORE_PINNED_HEAD_END = ("between the pinned head (the oldest messages kept through cuts for a "
                          "stable prefix) and the recent rounds")
"""Why a cut after a pinned head leaves out the messages between the two (read or not)."""
STOPPED_AT_LARGE = (f"budget: reading stopped after {PASS_OVER_LIMIT} items each larger than "
                    "all the source may take (a bound on the work)")
"""Why a source cut item by item left the rest unread when too many items were too large."""


def unread_decisions(g: Gathered, request: Request) -> list[Decision]:
    """Decisions for the items a source offered but the build never read.

    History and turn items carry their message index as ``order``, so the messages never read
    are known: one decision per run of them, naming it (``history.m0–m11``). Without recall
    that is everything older than the oldest message read (beyond the budget, or beyond
    ``max_rounds``); with recall there may also be runs between the recalled turns and the
    recent rounds. For other sources the number offered is known when the source can say
    (``offered_units``); else the decision says it is not.
    """
    name = g.spec.source
    if g.traits.message_list is not None:
        return _unread_message_decisions(g, g.traits.message_list, request)
    if g.complete:
        return []
    offered = g.offered
    count = 0 if offered is None else offered - g.read_units
    reason = (STOPPED_AT_LARGE if g.stopped_at_large else
              "budget: lower-ranked than anything that could fit") + "; not read" + (
        " (number unknown)" if offered is None else "")
    if count <= 0 and offered is not None:
        return []
    return [Decision(source=name, key=f"{name}.*", action="dropped", reason=reason,
                     count=max(count, 0))]


def _unread_message_decisions(g: Gathered, message_list: str, request: Request
                              ) -> list[Decision]:
    name = g.spec.source
    size = len(getattr(request, message_list))
    namespace = message_list
    decisions = []
    for start, end in unread_runs(g.read_positions, size):
        if g.read_back_to is not None:  # read back to a continued layout's messages
            why = f"budget: {OLDER_THAN_KEPT_RUN}"
        elif g.pinned_head_end is not None and start > g.pinned_head_end:
            why = f"budget: {BEFORE_PINNED_HEAD_END}"
        elif g.stopped_at_large:
            why = STOPPED_AT_LARGE
        elif not g.complete:
            why = ("budget: older than anything that could fit" if start == 0 else
                   "budget: between the recalled turns and the recent rounds")
        else:
            why = _not_offered(g)
        decisions.append(Decision(
            source=name, key=f"{name}.*", action="dropped", count=end - start,
            reason=f"{why}; not read ({namespace}.m{start}–m{end - 1})"))
    return decisions


def _not_offered(g: Gathered) -> str:
    """Why a source that offered everything it would did not offer some messages of its list.

    Its window of rounds (the built-in history's ``max_rounds``) when the plan set one; else
    the source left them out itself (a source of one's own may stand for them with a summary).
    """
    window = g.traits.layout.window_option
    if window is not None and g.spec.options.get(window) is not None:
        return f"older than {window}"
    return f"not offered by source {g.spec.source}"


def unread_runs(read: frozenset[int], size: int) -> list[tuple[int, int]]:
    """(start, end) of each run of positions below ``size`` that is not in ``read``.

    Walks the (few) positions read, not the history: a build must not pay for its length.
    """
    runs: list[tuple[int, int]] = []
    start = 0
    for position in sorted(p for p in read if p < size):
        if position > start:
            runs.append((start, position))
        start = position + 1
    if start < size:
        runs.append((start, size))
    return runs


def compacted_decisions(selection: Selection, tokenizer: CountingTokenizer,
                        recall_scores: Mapping[str, float] | None = None) -> list[Decision]:
    """A ``compacted`` decision, with the raw text, for each kept item shown compacted.

    The reason is the item's ``metadata["compaction"]`` when its source gave one (a tool result
    reduced by tier); a kept item with ``metadata["recalled"]`` also gets a ``kept`` decision
    saying why it was recalled, with the score it was recalled at for this build's input
    (``recall_scores``, noted apart from the item: ``core.notes``).

    The decision is the same on every build that keeps the candidate, so it is made once and
    kept on the (cached) candidate.
    """
    decisions = []
    for unit in selection.kept:
        for c in unit.candidates:
            if "recalled" in c.item.metadata:  # a source's note on why an item is there
                reason = with_recall_score(str(c.item.metadata["recalled"]),
                                           recall_scores or {}, c.item.key)
                decisions.append(Decision(source=unit.source, key=c.item.key, action="kept",
                                          reason=reason))
            if c.item.raw is None:
                continue
            if c.compacted is None or c.compacted.source != unit.source:
                c.compacted = Decision(
                    source=unit.source, key=c.item.key, action="compacted",
                    reason=str(c.item.metadata.get(
                        "compaction", "JSON tool result shown as compact text")),
                    tokens_before=_tokens_if_raw(c, c.item.raw, tokenizer),
                    tokens_after=c.tokens, detail=c.item.raw)
            decisions.append(c.compacted)
    return decisions


def _tokens_if_raw(candidate: Candidate, raw: str, tokenizer: CountingTokenizer) -> int:
    """What the item would cost with ``raw`` shown in place of its compact text.

    Counted like ``Candidate.tokens`` (fence lines and message framing included), so the
    decision's before and after differ by what compaction saved and nothing else.
    """
    shown = fenced_body(candidate.item.message.content)
    return candidate.tokens - tokenizer.count(shown) + tokenizer.count(raw)


def extrapolated(text: str, counted: int, tokenizer: CountingTokenizer) -> int:
    """Tokens of ``text`` estimated from the pieces counted until ``counted`` was reached.

    The pieces are the ones ``count_up_to`` counted (their counts are cached), so this costs
    no more tokenizing; their tokens per character stand for the rest of the text.
    """
    tokens = chars = 0
    for piece in split_into_pieces(text):
        tokens += tokenizer.count(piece)
        chars += len(piece)
        if tokens >= counted:
            break
    return round(tokens * len(text) / max(chars, 1))


_CUT_OR_DROPPED = frozenset(("truncated", "dropped"))


def with_whole_counts(decisions: list[Decision], gathered: list[Gathered],
                      tokenizer: CountingTokenizer) -> list[Decision]:
    """``decisions``, an item cut or dropped after its count stopped early given its whole size.

    Counting an item stops once it is past the budget (a megabyte of tool output is not
    tokenized to be dropped), so its candidate's tokens are what was counted until then. A
    decision that says what was cut would understate it by as much: its ``tokens_before`` is
    the item's estimated size instead, and its reason says it is an estimate.
    """
    partial = {c.item.key: c for g in gathered for u in g.units for c in u.candidates
               if not c.complete_count}
    if not partial:
        return decisions
    return [_whole_count(d, partial[d.key], tokenizer)
            if d.action in _CUT_OR_DROPPED and d.key in partial else d for d in decisions]


def _whole_count(decision: Decision, candidate: Candidate,
                 tokenizer: CountingTokenizer) -> Decision:
    whole = max(extrapolated(candidate.message.content, candidate.tokens, tokenizer),
                candidate.tokens)
    return replace(decision, tokens_before=whole, reason=(
        f"{decision.reason}; about {whole:,} tokens in all (estimated from its length: "
        f"counting stopped at {candidate.tokens:,}, past the budget)"))


def merged_cuts(decisions: list[Decision]) -> list[Decision]:
    """``decisions``, an item truncated more than once given one decision for all its cuts.

    A later step may cut again what the first cut left (a history item cut to its share, then
    again to fit the whole): the item is truncated once, from the size it was offered at
    (the first cut's ``tokens_before`` and original text) to what was sent (the last cut's
    ``tokens_after``), so counts of truncated items and the diff's sizes hold. The decision
    stays where the first cut was; its reason names every cut that differs.
    """
    first: dict[tuple[str, str], int] = {}
    merged: list[Decision] = []
    for d in decisions:
        if d.action != "truncated":
            merged.append(d)
            continue
        at = first.get((d.source, d.key))
        if at is None:
            first[(d.source, d.key)] = len(merged)
            merged.append(d)
            continue
        earlier = merged[at]
        reason = earlier.reason if d.reason == earlier.reason else (
            f"{earlier.reason}; then {d.reason}")
        merged[at] = replace(earlier, tokens_after=d.tokens_after, reason=reason,
                             detail=earlier.detail if earlier.detail is not None else d.detail)
    return merged


def make_report(plan: BuildPlan, gathered: list[Gathered], allocations: Mapping[str, Allocation],
                selections: Mapping[str, Selection], decisions: list[Decision],
                warnings: list[str], tokenizer: CountingTokenizer, total: int,
                recall_scores: Mapping[str, float] | None = None) -> BuildReport:
    """Aggregate the decisions into the per-source table (``recall_scores``: ``core.notes``)."""
    all_decisions = merged_cuts(with_whole_counts(decisions, gathered, tokenizer)) + [
        d for s in selections.values()
        for d in compacted_decisions(s, tokenizer, recall_scores)]
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
        f"source {g.spec.source} failed: {g.error}" for g in gathered if g.error] + [
        f"the digest of source {g.spec.source} failed and was left out: {g.digest_error}"
        for g in gathered if g.digest_error]
    return BuildReport(
        plan=plan.name, tokenizer=tokenizer.name, exact_tokens=tokenizer.exact,
        available=plan.budget.available, total_tokens=total, sources=tuple(rows),
        decisions=tuple(all_decisions), warnings=tuple(warnings),
    )
