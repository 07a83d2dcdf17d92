"""The build pipeline: gather → normalise → allocate → prune → place → count → report.

Everything after gathering (the only step that calls sources) is a pure function of the
candidates and the plan, so one builder and one plan serve many threads, and the same input gives
the same context byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn

from contextwright.core.accounting import MESSAGE_OVERHEAD, REPLY_PRIMING
from contextwright.core.assemble import Assembly, assemble, repeated_question
from contextwright.core.budget import Allocation, Claim, allocate_budget
from contextwright.core.cutting import make_cutter
from contextwright.core.fence import DATA_NOTE, language_of
from contextwright.core.final import ANTHROPIC_LEAD, FinalContext
from contextwright.core.gather import Gathered, Unit, gather_source
from contextwright.core.items import check_text
from contextwright.core.normalise import drop_duplicates, resolve_key_conflicts
from contextwright.core.plan import BuildPlan
from contextwright.core.reporting import make_report, unread_decisions
from contextwright.core.request import Request
from contextwright.core.select import CONTIGUOUS_SOURCES, Selection, drop_decisions, select_units
from contextwright.core.source import ContextSource
from contextwright.errors import BudgetError, PlanError
from contextwright.tokens import CountingTokenizer


def build_context(plan: BuildPlan, request: Request, sources: Mapping[str, ContextSource],
                  tokenizer: CountingTokenizer) -> FinalContext:
    """Build the context of one model call."""
    language = language_of(check_text(request.user_input, "user_input"))
    available = plan.budget.available
    framing = framing_tokens(plan, request.user_input, tokenizer, language)
    gathered, pool = gather_all(plan, request, sources, tokenizer, language, framing)
    decisions, warnings = resolve_key_conflicts(gathered, plan.strict)
    warnings += unused_request_parts(plan, request)
    decisions += drop_duplicates(gathered)
    with_note = needs_data_note(request, gathered)
    pool -= tokenizer.count(DATA_NOTE[language]) + 2 if with_note else 0
    if pool < 0:
        fail_budget(plan, gathered, tokenizer, "the never-cut parts and framing do not fit")
    allocations = allocate(plan, gathered, pool, available)
    selections = prune(gathered, allocations, request.user_input, tokenizer, language)
    give_back(gathered, allocations, selections, pool, request.user_input, tokenizer, language)
    assembly, total = fit_exactly(plan, gathered, selections, request.user_input, tokenizer,
                                  language, available - anthropic_lead_tokens(tokenizer),
                                  with_note)
    decisions += [d for g in gathered for d in unread_decisions(g)]
    decisions += [d for s in selections.values() for d in s.decisions]
    report = make_report(plan, gathered, allocations, selections, decisions, warnings, tokenizer,
                         total)
    return FinalContext(
        messages=assembly.messages, sections=assembly.sections,
        system_parts=assembly.system_parts, tool_schemas=assembly.tool_schemas,
        schema_jsons=assembly.schema_jsons, total_tokens=total, available=available,
        report=report, language=language, tokenizer=tokenizer,
    )


_PARTS_AND_SOURCES = (("history", "history"), ("turn", "tool_results"), ("tools", "tools"),
                      ("documents", "rag"), ("env", "env"), ("examples", "examples"),
                      ("notes", "notes"), ("system", "system"))


def unused_request_parts(plan: BuildPlan, request: Request) -> list[str]:
    """Warnings for request parts the plan has no source for (left out, but never silently)."""
    names = {spec.source for spec in plan.sources}
    return [
        f"request.{part} was given but plan {plan.name!r} has no {source} source; left out"
        for part, source in _PARTS_AND_SOURCES
        if getattr(request, part) and source not in names
    ]


def framing_tokens(plan: BuildPlan, user_input: str, tokenizer: CountingTokenizer,
                   language: str) -> int:
    """Tokens no source owns.

    Reply priming, the system message frame, the repeated question and the lead message
    Anthropic needs when history starts with the assistant.
    """
    tokens = REPLY_PRIMING + MESSAGE_OVERHEAD + anthropic_lead_tokens(tokenizer)
    if plan.repeat_question:
        question = repeated_question(user_input, language).content
        tokens += tokenizer.count_up_to(question, plan.budget.available) + MESSAGE_OVERHEAD
    return tokens


def anthropic_lead_tokens(tokenizer: CountingTokenizer) -> int:
    """Cost of the placeholder user message an Anthropic rendering may need first."""
    return tokenizer.count(ANTHROPIC_LEAD) + MESSAGE_OVERHEAD


def needs_data_note(request: Request, gathered: list[Gathered]) -> bool:
    """Whether the system message says fenced text is data.

    Yes when the request can bring tool output or documents at all (so the note, part of the
    cacheable prefix, is there from the first call of an agent loop), or when any untrusted
    item was offered.
    """
    if request.tools or request.turn or request.documents:
        return True
    return any(c.item.untrusted for g in gathered for u in g.units for c in u.candidates)


def gather_all(plan: BuildPlan, request: Request, sources: Mapping[str, ContextSource],
               tokenizer: CountingTokenizer, language: str, framing: int
               ) -> tuple[list[Gathered], int]:
    """Gather the never-cut sources first (they fix the pool), then the others up to the pool."""
    available = plan.budget.available
    missing = [spec.source for spec in plan.sources if spec.source not in sources]
    if missing:
        raise PlanError(f"plan {plan.name!r} names unregistered sources: {', '.join(missing)}")
    specs = list(enumerate(plan.sources))
    fixed = [gather_source(spec, i, sources[spec.source], request, available, tokenizer,
                           language) for i, spec in specs if not spec.cuttable]
    pool = available - framing - sum(g.need for g in fixed)
    if pool < 0 or not all(g.complete for g in fixed):
        fail_budget(plan, fixed, tokenizer, "the never-cut parts alone exceed the budget")
    rest = [
        gather_source(spec, i, sources[spec.source], request,
                      min(pool, spec.max_tokens if spec.max_tokens is not None else pool),
                      tokenizer, language)
        for i, spec in specs if spec.cuttable
    ]
    return sorted(fixed + rest, key=lambda g: g.position), pool


def fail_budget(plan: BuildPlan, gathered: list[Gathered], tokenizer: CountingTokenizer,
                why: str) -> NoReturn:
    """Raise ``BudgetError`` with a report of what was asked for."""
    report = make_report(plan, gathered, {}, {}, [], [], tokenizer,
                         sum(g.need for g in gathered))
    raise BudgetError(f"{why} (available {plan.budget.available} tokens)", report)


def allocate(plan: BuildPlan, gathered: list[Gathered], pool: int,
             available: int) -> dict[str, Allocation]:
    """Grants for the cuttable sources; never-cut sources are granted what they need."""
    claims = [
        Claim(name=g.spec.source, weight=g.spec.weight, need=min(g.need, pool),
              max_tokens=g.spec.max_tokens, min_tokens=g.spec.min_tokens,
              rank=(g.layer, g.position))
        for g in gathered if g.spec.cuttable
    ]
    total_weight = sum(spec.weight for spec in plan.sources)
    allocations = allocate_budget(pool, claims, total_weight, available)
    for g in gathered:
        if not g.spec.cuttable:
            allocations[g.spec.source] = Allocation(share=g.need, grant=g.need)
    return allocations


def prune_source(g: Gathered, grant: int, query: str, tokenizer: CountingTokenizer,
                 language: str) -> Selection:
    """Fit one source's units into ``grant``."""
    if not g.spec.cuttable:
        return Selection(kept=list(g.units))
    options = g.spec.options
    contiguous = options.get("contiguous", g.spec.source in CONTIGUOUS_SOURCES)
    share = options.get("max_item_share", 0.5 if g.spec.source == "history" else None)
    if g.complete and g.need <= grant:
        share = None  # everything fits: nothing to protect older rounds from
    return select_units(
        g.units, grant, contiguous=bool(contiguous),
        partial_rounds=bool(options.get("partial_rounds", False)),
        cutter=make_cutter(g.spec.strategy, query, tokenizer, language),
        unit_cap=None if share is None else int(grant * float(share)),
    )


def prune(gathered: list[Gathered], allocations: Mapping[str, Allocation], query: str,
          tokenizer: CountingTokenizer, language: str) -> dict[str, Selection]:
    """Fit every source into its grant."""
    return {
        g.spec.source: prune_source(g, allocations[g.spec.source].grant, query, tokenizer,
                                    language)
        for g in gathered
    }


def give_back(gathered: list[Gathered], allocations: dict[str, Allocation],
              selections: dict[str, Selection], pool: int, query: str,
              tokenizer: CountingTokenizer, language: str) -> None:
    """Hand tokens a source left unused to sources that dropped something, by priority."""
    cuttable = [g for g in gathered if g.spec.cuttable]
    used = {g.spec.source: selections[g.spec.source].tokens for g in cuttable}
    for g in sorted(cuttable, key=lambda g: (g.layer, g.position)):
        leftover = pool - sum(used.values())
        selection = selections[g.spec.source]
        wanting = any(d.action == "dropped" for d in selection.decisions) or not g.complete
        if leftover <= 0 or not wanting:
            continue
        ceiling = g.spec.max_tokens if g.spec.max_tokens is not None else pool
        grant = min(selection.tokens + leftover, ceiling)
        if grant > allocations[g.spec.source].grant:
            selections[g.spec.source] = prune_source(g, grant, query, tokenizer, language)
            used[g.spec.source] = selections[g.spec.source].tokens
            allocations[g.spec.source] = Allocation(share=allocations[g.spec.source].share,
                                                    grant=grant)


def fit_exactly(plan: BuildPlan, gathered: list[Gathered], selections: dict[str, Selection],
                query: str, tokenizer: CountingTokenizer, language: str, limit: int,
                with_note: bool) -> tuple[Assembly, int]:
    """Assemble and count exactly, dropping the least important kept unit while over ``limit``.

    Joins can cost a token or two more than their parts, so the exact count has the last word.
    """
    while True:
        kept = {name: selection.kept for name, selection in selections.items()}
        assembly = assemble(plan, kept, query, language, with_note, tokenizer)
        total = assembly.tokens
        if total <= limit:
            return assembly, total
        victim = _least_important(gathered, selections)
        if victim is None:
            fail_budget(plan, gathered, tokenizer, "the context does not fit after cutting")
        selection, unit = victim
        selection.kept.remove(unit)
        selection.decisions.extend(drop_decisions(unit, "budget: exact recount"))


def _least_important(gathered: list[Gathered], selections: dict[str, Selection]
                     ) -> tuple[Selection, Unit] | None:
    for g in sorted(gathered, key=lambda g: (-g.layer, -g.position)):
        selection = selections[g.spec.source]
        if g.spec.cuttable and selection.kept:
            return selection, selection.kept[-1]
    return None

