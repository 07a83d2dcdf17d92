"""The build pipeline: gather → normalise → allocate → prune → place → count → report.

Everything after gathering (the only step that calls sources) is a pure function of the
candidates and the plan, so one builder and one plan serve many threads, and the same input gives
the same context byte for byte.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import NoReturn

from contextwright.core.accounting import counts_exactly
from contextwright.core.assemble import Assembly, assemble, repeated_question
from contextwright.core.budget import Allocation, Claim, allocate_budget
from contextwright.core.cache import CachePolicy, Fingerprint, plan_hash
from contextwright.core.covering import added_weight, covering, missing_sources, request_parts
from contextwright.core.cutting import make_cutter
from contextwright.core.digest import add_digest, digest_reserve
from contextwright.core.fence import (
    DATA_NOTE,
    DEFAULT_FENCE_KEY,
    TOOL_LIST,
    language_of,
    separator,
)
from contextwright.core.final import FinalContext
from contextwright.core.gather import Costing, Gathered, Target, Unit, gather_source
from contextwright.core.items import NEEDS_REASONING, check_text, parse_listed
from contextwright.core.normalise import drop_duplicates, resolve_key_conflicts
from contextwright.core.notes import build_notes
from contextwright.core.plan import BuildPlan, FrozenOptions
from contextwright.core.providers import (
    ANTHROPIC_BLANK_USER,
    ANTHROPIC_LEAD,
    anthropic_added_tokens,
    is_blank,
)
from contextwright.core.pruning import partial_rounds, prune_source
from contextwright.core.report import BuildReport
from contextwright.core.reporting import extrapolated, make_report, unread_decisions
from contextwright.core.request import Request
from contextwright.core.select import (
    MIN_CUT_TOKENS,
    Selection,
    cut_decisions,
    drop_decisions,
    has_tool_activity,
)
from contextwright.core.sequence import show_in_sequence
from contextwright.core.source import (
    ContextSource,
    SourceTraits,
    checked_options,
    conversation_order_error,
    core_options,
    options_model_of,
    traits_of,
)
from contextwright.core.stepping import Stepping, cache_points
from contextwright.core.text import counted_blocks, render_text, text_blocks
from contextwright.errors import BudgetError, PlanError
from contextwright.tokens import DEFAULT_IMAGES, CountingTokenizer, ImageTokenRule


def build_context(plan: BuildPlan, request: Request, sources: Mapping[str, ContextSource],
                  tokenizer: CountingTokenizer, target: Target = "chat", *,
                  fence_key: bytes = DEFAULT_FENCE_KEY, cache: CachePolicy | None = None,
                  previous: Fingerprint | None = None,
                  images: ImageTokenRule = DEFAULT_IMAGES, model: str = "") -> FinalContext:
    """Build the context of one model call, counted for the ``target`` rendering.

    ``fence_key`` keys the fence markers (``fence.fence_key`` derives one from a secret).
    With ``cache``, the build keeps a stable prefix (``core.stepping``): it continues
    ``previous``'s layout where it still fits and renders what changes every call last.
    ``images`` counts the images of messages (the model's provider rule). ``model`` (``""``:
    not known) names the model the build is for: a provider's prompt cache is per model, so a
    ``previous`` made for another one starts a new cache line.
    """
    with build_notes() as recall_scores:
        return _build_context(plan, request, sources, tokenizer, target, fence_key=fence_key,
                              cache=cache, previous=previous, images=images,
                              recall_scores=recall_scores, model=model)


def _build_context(plan: BuildPlan, request: Request, sources: Mapping[str, ContextSource],
                   tokenizer: CountingTokenizer, target: Target, *, fence_key: bytes,
                   cache: CachePolicy | None, previous: Fingerprint | None,
                   images: ImageTokenRule, recall_scores: Mapping[str, float],
                   model: str = "") -> FinalContext:
    """``build_context``, with the build's notes (``core.notes``) open as ``recall_scores``."""
    costing = Costing(tokenizer, labels_language(request, cache, previous), target, fence_key,
                      images)
    plan, added = added_sources(plan, request, sources)
    steps = (Stepping(cache, plan_hash(plan), target, plan.strict, model=model)
             if cache is not None
             else None)
    anchored = steps.gather_options(plan, request, sources, previous) if steps else {}
    gathered, pool = gather_all(plan, request, sources, costing, anchored,
                                steps.caps if steps else None,
                                steps.reaches if steps else None)
    decisions, warnings = resolve_key_conflicts(gathered, plan.strict)
    warnings += added + unused_request_parts(plan, request, sources) + caps_not_applied(gathered)
    decisions += drop_duplicates(gathered)
    if steps is not None:
        steps.removed = {g.spec.source: frozenset(d.key for d in decisions
                                                  if d.source == g.spec.source)
                         for g in gathered}
    # The blank input's stand-in is sent whatever else fits: set aside before the optional parts.
    _, pool = reserve(pool, blank_input_tokens(request, costing))
    note, pool = reserve(pool, data_note_tokens(plan, request, gathered, costing,
                                                stable=cache is not None))
    repeat, pool = reserve(pool, repeat_tokens(plan, request, sources, costing))
    _, pool = reserve(pool, lead_tokens(plan, sources, costing))
    if steps is not None:
        steps.offer_all(gathered, sources, request, previous, pool, costing)
    allocations = allocate(plan, gathered, pool)
    if steps is None:
        selections = prune(gathered, allocations, request.user_input, costing)
    else:
        selections = steps.prune(gathered, allocations, request.user_input, costing)
    give_back(gathered, allocations, selections, pool, request.user_input, costing,
              skip=steps.sources if steps else frozenset())
    # A digest is fenced: when nothing else needed the data note, it brings the note along.
    brought = 0 if note else note_cost(request, gathered, costing)
    add_digests(gathered, sources, request, allocations, selections, costing,
                skip=steps.sources if steps else frozenset(), brought=brought)
    if steps is not None:
        steps.add_digests(gathered, sources, request, allocations, selections, costing,
                          brought=brought)
    show_in_sequence([g for g in gathered if not (steps and g.spec.source in steps.continued)],
                     selections, request, costing)
    if steps is not None:
        steps.order(selections)
    tail = steps.tail(plan, sources) if steps is not None else frozenset()
    assembly, total = fit_exactly(plan, gathered, selections, request.user_input, costing,
                                  note=note, repeat=repeat, tail=tail,
                                  tail_last=bool(request.turn))
    decisions += [d for g in gathered for d in (*g.omitted, *unread_decisions(g, request))]
    decisions += [d for s in selections.values() for d in s.decisions]
    if steps is not None:  # what normalising a source read afresh found
        decisions += steps.decisions
        warnings += steps.warnings
    warnings += turn_left_out(gathered, selections, request)
    report = make_report(plan, gathered, allocations, selections, decisions, warnings, tokenizer,
                         total, recall_scores)
    require_user_input(report, plan, sources)
    if report.exact_tokens and not counts_exactly(assembly.messages, assembly.schema_jsons,
                                                  tokenizer, images):
        report = replace(report, exact_tokens=False)
    if tokenizer.warning:
        report = replace(report, warnings=(*report.warnings, tokenizer.warning))
    fingerprint = None
    points: tuple[int, ...] = ()
    if steps is not None:
        points = cache_points(assembly.sections, tail, steps.conversation,
                              steps.transient_from(assembly),
                              steps.head_points(assembly, selections))
        fingerprint = steps.fingerprint(assembly, selections, request, tail, costing.language,
                                        text_counts(assembly, costing),
                                        points if target == "chat" else None)
        report = replace(report, cache=steps.report(previous, fingerprint, assembly))
    return FinalContext(
        messages=assembly.messages, sections=assembly.sections,
        system_parts=assembly.system_parts, tool_schemas=assembly.tool_schemas,
        schema_jsons=assembly.schema_jsons, total_tokens=total,
        available=plan.budget.available, report=report, language=costing.language,
        tokenizer=tokenizer, target=target, labels=assembly.labels,
        documents=assembly.documents, fenced=assembly.fenced,
        max_output_tokens=(plan.budget.reserved_output + plan.budget.reserved_reasoning) or None,
        message_tokens=assembly.message_tokens, stable_fingerprint=fingerprint, plan=plan,
        cache_points=points,
        image_rule=images, volatile=assembly.volatile, keys=assembly.keys,
    )


def plan_traits(plan: BuildPlan, sources: Mapping[str, ContextSource]
                ) -> list[tuple[str, SourceTraits]]:
    """Each of the plan's sources (in plan order) with its traits; unregistered ones left out."""
    return [(spec.source, traits_of(sources[spec.source])) for spec in plan.sources
            if spec.source in sources]


def unused_request_parts(plan: BuildPlan, request: Request,
                         sources: Mapping[str, ContextSource]) -> list[str]:
    """Warnings for request parts the plan has no source for (left out, but never silently)."""
    names = {spec.source for spec in plan.sources}
    return [
        f"request.{part} was given but plan {plan.name!r} has no {source} source; left out"
        for part, source, _ in request_parts(sources)
        if getattr(request, part) and source not in names
    ]


def caps_not_applied(gathered: list[Gathered]) -> list[str]:
    """A warning for each never-cut source over its ``max_tokens``: the cap cannot apply.

    A source that may not be cut is shown whole (a plan's ``system`` and ``user`` are never
    cut unless it says ``cuttable: true``), so its cap has no effect, and nothing else would
    say so.
    """
    return [f"source {g.spec.source} takes {g.need} tokens, over its max_tokens "
            f"{g.spec.max_tokens}, but is never cut, so the cap has no effect (cuttable: true "
            "caps it)"
            for g in gathered if not g.spec.cuttable and g.spec.max_tokens is not None
            and g.need > g.spec.max_tokens]


def added_sources(plan: BuildPlan, request: Request, sources: Mapping[str, ContextSource]
                  ) -> tuple[BuildPlan, list[str]]:
    """``plan`` covering every part of ``request`` when the plan asks for it, with notes."""
    if not plan.add_missing_sources:
        return plan, []
    missing = missing_sources(plan, request, sources)
    if not missing:
        return plan, []
    notes = [f"request.{part} was given and plan {plan.name!r} has no {source} source; added "
             f"one (weight {added_weight(plan, traits.added):g})"
             for part, source, traits in request_parts(sources)
             if source in missing and traits.added is not None]
    return covering(plan, request, sources), notes


def _shows_prompt(plan: BuildPlan, request: Request,
                  sources: Mapping[str, ContextSource]) -> bool:
    """Whether the build shows a system prompt (the request has one, a source renders it)."""
    return bool(request.system) and any(t.prompt for _, t in plan_traits(plan, sources))


def framing_tokens(plan: BuildPlan, request: Request, sources: Mapping[str, ContextSource],
                   costing: Costing) -> int:
    """Tokens of a chat rendering that no source owns and every context pays.

    The reply priming and, with a system prompt, the system message's frame.
    """
    frame = costing.tokenizer.frame
    return frame.reply + (frame.system if _shows_prompt(plan, request, sources) else 0)


def never_cut_tokens(plan: BuildPlan, request: Request, sources: Mapping[str, ContextSource],
                     never_cut: list[Gathered], costing: Costing) -> int:
    """Tokens the never-cut parts take in the target rendering.

    Chat: their counts and the framing no source owns. Text: their own prompt, rendered and
    counted exactly (separators, joins and escapes included), so a prompt that fits is never
    refused for separators of parts it does not show.
    """
    if costing.target != "text":
        return framing_tokens(plan, request, sources, costing) + sum(g.need for g in never_cut)
    kept = {g.spec.source: list(g.units) for g in never_cut}
    question = next((g.spec.source for g in never_cut if g.traits.question), None)
    assembly = assemble(plan, kept, request.user_input, costing, note=False, repeat=False,
                        question=question)
    return exact_tokens(assembly, costing)[1]


def text_separator_tokens(gathered: list[Gathered], costing: Costing) -> int:
    """The separator lines the text rendering gives what ``gathered`` offers (0 for chat).

    One per source that offers messages (its section), and the tool list's when a tool
    definition is offered; each with the line break that joins it. A system part pays for its
    own (``gather``).
    """
    if costing.target != "text":
        return 0
    candidates = [(g.spec.source, c) for g in gathered for u in g.units for c in u.candidates]
    sections = dict.fromkeys(name for name, c in candidates
                             if not c.is_schema and c.message.role != "system")
    if any(c.is_schema for _, c in candidates):
        sections[TOOL_LIST] = None
    return sum(costing.tokenizer.count(separator(name, costing.language)) + 1
               for name in sections)


def data_note_tokens(plan: BuildPlan, request: Request, gathered: list[Gathered],
                     costing: Costing, stable: bool = False) -> int:
    """Cost of the note that fenced text is data, when the build may need it (else 0).

    Needed when anything fenced was offered; also when the request brings tools (or the build
    keeps a stable prefix) and the plan has a source that may show fenced parts
    (``SourceTraits.fenced``), so the note, part of the cacheable prefix, is there from the
    first call of an agent loop.
    """
    offered = any(c.item.untrusted for g in gathered for u in g.units for c in u.candidates)
    loop = (bool(request.tools) or stable) and any(g.traits.fenced for g in gathered)
    if not (offered or loop):
        return 0
    return note_cost(request, gathered, costing)


def note_cost(request: Request, gathered: list[Gathered], costing: Costing) -> int:
    """Tokens the note that fenced text is data costs in this build's system message."""
    prompt = bool(request.system) and any(g.traits.prompt for g in gathered)
    frame = 0 if prompt else costing.tokenizer.frame.system  # the note may open the message
    return costing.tokenizer.count(DATA_NOTE[costing.language]) + 2 + frame


def _question_at(plan: BuildPlan, sources: Mapping[str, ContextSource]) -> int | None:
    """Position in the plan of the source that renders the user's input (None: there is none)."""
    return next((i for i, (_, traits) in enumerate(plan_traits(plan, sources))
                 if traits.question), None)


def repeat_tokens(plan: BuildPlan, request: Request, sources: Mapping[str, ContextSource],
                  costing: Costing) -> int:
    """Cost of repeating the question at the tail (0 unless the plan asks and a part follows)."""
    at = _question_at(plan, sources)
    follows = at is not None and at < len(plan.sources) - 1
    if not (plan.repeat_question and follows):
        return 0
    question = repeated_question(request.user_input, costing).content
    return costing.tokenizer.count(question) + costing.tokenizer.frame.user + 1


def lead_tokens(plan: BuildPlan, sources: Mapping[str, ContextSource], costing: Costing) -> int:
    """Cost of the lead message Anthropic needs, set aside when a conversation may start mid-round.

    A message source placed before the user's input with ``partial_rounds: true`` (history)
    often keeps the assistant's message as its oldest; setting the lead aside up front spares
    the exact count a second pass. Elsewhere it is rare and the exact count deals with it.
    """
    if costing.target != "chat":
        return 0
    at = _question_at(plan, sources)
    leading = plan.sources if at is None else plan.sources[:at]
    if not any(traits_of(sources[spec.source]).offers == "messages"
               and core_options(spec.source, spec.options).partial_rounds is True
               for spec in leading if spec.source in sources):
        return 0
    return costing.tokenizer.count(ANTHROPIC_LEAD) + costing.tokenizer.frame.user


def blank_input_tokens(request: Request, costing: Costing) -> int:
    """What Anthropic's rendering adds for a blank user input (its text stands in), set aside.

    The input cannot be cut, so tokens found only by the exact count would fail a build
    that fits; other blank user messages are rare and the exact count deals with them.
    """
    if costing.target != "chat" or request.images or not is_blank(request.user_input):
        return 0
    return costing.tokenizer.count(ANTHROPIC_BLANK_USER)


def labels_language(request: Request, cache: CachePolicy | None,
                    previous: Fingerprint | None) -> str:
    """The language of the build's labels and data note: the user input's.

    A build that continues a cache line keeps the line's language instead: the labels and the
    note sit in the system message, and a user who writes one message in another language
    would otherwise make every provider re-read the whole request.
    """
    language = language_of(check_text(request.user_input, "user_input"))
    if (cache is not None and previous is not None and previous.stable
            and previous.language in DATA_NOTE and previous.language != language
            and _last_user_language(request.history) != language):
        return previous.language
    return language


def _last_user_language(history: Sequence[object]) -> str | None:
    """The language of the newest user message in ``history`` with text (None: there is none).

    A cache line keeps its labels' language through one message in another language (a
    greeting, a quoted name); once the user writes two in a row in another one, the labels
    follow them: a session that opened with "你好" and went on in English is not labelled in
    Chinese for good, and the switch re-sends the prompt once, not on every change.
    """
    for index in range(len(history) - 1, -1, -1):
        message = parse_listed(history, "history", index)  # the history source's parse
        if message.role == "user" and message.content:
            return language_of(message.content)
    return None


def reserve(pool: int, tokens: int) -> tuple[bool, int]:
    """Set ``tokens`` aside if the pool has them: (reserved, what is left)."""
    if 0 < tokens <= pool:
        return True, pool - tokens
    return False, pool


def gather_all(plan: BuildPlan, request: Request, sources: Mapping[str, ContextSource],
               costing: Costing, options: Mapping[str, FrozenOptions] | None = None,
               caps: dict[str, int] | None = None, reaches: Mapping[str, int] | None = None
               ) -> tuple[list[Gathered], int]:
    """Gather the never-cut sources first (they fix the pool), then the others up to the pool.

    ``options``: other options to read some cuttable sources with (a stable-prefix build reads
    a continued layout's source as of its last cut); their ``Gathered`` keeps the plan's spec.
    ``reaches``: how far back to read such a source at most (``gather_source``'s ``reach``).
    ``caps`` is filled with what each cuttable source was read up to.
    """
    available = plan.budget.available
    missing = [spec.source for spec in plan.sources if spec.source not in sources]
    if missing:
        named = ", ".join(with_closest(name, list(sources)) for name in missing)
        raise PlanError(f"plan {plan.name!r} names unregistered sources: {named}")
    for spec in plan.sources:
        model = options_model_of(sources[spec.source])
        if model is not None:
            checked_options(spec.source, spec.options, model)
    out_of_order = conversation_order_error(
        plan.name, [(spec.source, traits_of(sources[spec.source])) for spec in plan.sources])
    if out_of_order is not None:
        raise out_of_order
    specs = list(enumerate(plan.sources))
    fixed = [gather_source(spec, i, sources[spec.source], request, available, costing)
             for i, spec in specs if not spec.cuttable]
    pool = available - never_cut_tokens(plan, request, sources, fixed, costing)
    if pool < 0 or not all(g.complete for g in fixed):
        fail_budget(plan, fixed, costing.tokenizer,
                    "the never-cut parts alone exceed the budget")
    rest = []
    for i, spec in specs:
        if not spec.cuttable:
            continue
        cap = min(pool, spec.max_tokens if spec.max_tokens is not None else pool)
        other = options.get(spec.source) if options else None
        g = gather_source(spec if other is None else replace(spec, options=other), i,
                          sources[spec.source], request, cap, costing,
                          reach=reaches.get(spec.source) if reaches else None)
        g.spec = spec
        rest.append(g)
        if caps is not None:
            caps[spec.source] = cap
    _, pool = reserve(pool, text_separator_tokens(rest, costing))
    return sorted(fixed + rest, key=lambda g: g.position), pool


def with_closest(name: str, known: list[str]) -> str:
    """``name``, and the closest of ``known`` when there is one (a misspelt source name)."""
    close = difflib.get_close_matches(name, known, n=1)
    return f"{name} (did you mean {close[0]!r}?)" if close else name


def fail_budget(plan: BuildPlan, gathered: list[Gathered], tokenizer: CountingTokenizer,
                why: str) -> NoReturn:
    """Raise ``BudgetError`` with a report of what was asked for.

    An item far over the budget is counted only until it passes it (a 10 MB message is not
    tokenized whole to be refused), so its count is a lower bound: the report's warnings and
    the message say so, with an estimate from its length, rather than passing it off as exact.
    """
    partial = partly_counted(gathered, tokenizer)
    report = make_report(plan, gathered, {}, {}, [], partial, tokenizer,
                         sum(g.need for g in gathered))
    more = f"; {partial[0]}" if partial else ""
    raise BudgetError(f"{why} (available {plan.budget.available} tokens){more}", report)


def partly_counted(gathered: list[Gathered], tokenizer: CountingTokenizer) -> list[str]:
    """A line for each item whose count stopped past the budget: counted so far, and estimated."""
    return [f"{c.item.key}: counting stopped at {c.tokens:,} tokens, past the budget; about "
            f"{extrapolated(c.message.content, c.tokens, tokenizer):,} tokens in all "
            "(estimated from its length)"
            for g in gathered for unit in g.units for c in unit.candidates
            if not c.complete_count]


def turn_left_out(gathered: list[Gathered], selections: Mapping[str, Selection],
                  request: Request) -> list[str]:
    """A warning when this turn's calls and results were all left out (its digest aside).

    Each left-out message has its decision; this says what it means for an agent loop: the
    model does not see the calls it made this turn, and may make them again and again.
    """
    if not request.turn:
        return []
    for g in gathered:
        if g.traits.message_list != "turn":
            continue
        selection = selections.get(g.spec.source)
        kept = [] if selection is None else [u for u in selection.kept if "digest" not in (
            u.candidates[0].item.metadata)]
        if not kept:
            return [f"none of this turn's {len(request.turn)} call and result message(s) fit "
                    f"source {g.spec.source}'s budget: the model will not see the calls it "
                    "made and may make them again (give the plan more room)"]
    return []


def require_user_input(report: BuildReport, plan: BuildPlan,
                       sources: Mapping[str, ContextSource]) -> None:
    """Raise ``BudgetError`` when the build would show none of the user's input.

    Only a plan that lets the input's source be cut gets here: cut it may be, but a context
    without the question answers one nobody asked (with the prompt cuttable too, it would be
    empty).
    """
    questions = {name for name, traits in plan_traits(plan, sources) if traits.question}
    row = next((r for r in report.sources if r.source in questions), None)
    if row is not None and row.items == 0 and row.dropped > 0:
        raise BudgetError("the user's input does not fit, even cut "
                          f"(available {report.available} tokens)", report)


def allocate(plan: BuildPlan, gathered: list[Gathered], pool: int) -> dict[str, Allocation]:
    """Grants for the cuttable sources; never-cut sources are granted what they need."""
    claims = [
        Claim(name=g.spec.source, weight=g.spec.weight, need=min(g.need, pool),
              max_tokens=g.spec.max_tokens, min_tokens=g.spec.min_tokens,
              rank=(g.layer, g.position))
        for g in gathered if g.spec.cuttable
    ]
    total_weight = sum(spec.weight for spec in plan.sources)
    allocations = allocate_budget(pool, claims, total_weight, plan.budget.available)
    for g in gathered:
        if not g.spec.cuttable:
            allocations[g.spec.source] = Allocation(share=g.need, grant=g.need)
    return allocations


def add_digests(gathered: list[Gathered], sources: Mapping[str, ContextSource],
                request: Request, allocations: Mapping[str, Allocation],
                selections: dict[str, Selection], costing: Costing,
                skip: frozenset[str] = frozenset(), brought: int = 0) -> None:
    """Let sources with ``digest_share`` stand in for what they left out (``core.digest``).

    ``brought``: tokens a digest brings along besides its own (the data note, when nothing
    else the build shows is fenced), taken from its room.
    """
    for g in gathered:
        if g.spec.cuttable and g.error is None and g.spec.source not in skip:
            add_digest(g, sources[g.spec.source], request, allocations[g.spec.source].grant,
                       selections, costing,
                       lambda g, grant: _prune_whole(g, grant, request.user_input, costing),
                       brought=brought)


def _prune_whole(g: Gathered, grant: int, query: str, costing: Costing) -> Selection:
    """``prune_source`` without the digest's reserve (there is no digest to make room for)."""
    return prune_source(g, grant, query, costing, reserve=False)


def prune(gathered: list[Gathered], allocations: Mapping[str, Allocation], query: str,
          costing: Costing) -> dict[str, Selection]:
    """Fit every source into its grant."""
    return {g.spec.source: prune_source(g, allocations[g.spec.source].grant, query, costing)
            for g in gathered}


def give_back(gathered: list[Gathered], allocations: dict[str, Allocation],
              selections: dict[str, Selection], pool: int, query: str,
              costing: Costing, skip: frozenset[str] = frozenset()) -> None:
    """Hand tokens a source left unused to sources that dropped something, by priority.

    Sources in ``skip`` keep what they have (a stable-prefix layout, or a cut that leaves room
    on purpose), though what they leave unused is handed on. What a source keeps free for its
    digest (``digest_reserve``) is not unused: its digest, or the source itself, takes it.
    """
    cuttable = [g for g in gathered if g.spec.cuttable]
    used = {g.spec.source: _holds(g, selections, allocations, skip) for g in cuttable}
    for g in sorted(cuttable, key=lambda g: (g.layer, g.position)):
        leftover = pool - sum(used.values())
        if g.spec.source in skip:
            continue
        selection = selections[g.spec.source]
        dropped = [d.tokens_before for d in selection.decisions if d.action == "dropped"]
        if not dropped and g.complete:
            continue  # it has everything it wanted
        if leftover < min([*dropped, MIN_CUT_TOKENS]):
            continue  # too little left over to add, or cut in, anything that was left out
        ceiling = g.spec.max_tokens if g.spec.max_tokens is not None else pool
        grant = min(selection.tokens + leftover, ceiling)
        if grant > allocations[g.spec.source].grant:
            selections[g.spec.source] = prune_source(g, grant, query, costing)
            allocations[g.spec.source] = Allocation(share=allocations[g.spec.source].share,
                                                    grant=grant)
            used[g.spec.source] = _holds(g, selections, allocations, skip)


def _holds(g: Gathered, selections: Mapping[str, Selection],
           allocations: Mapping[str, Allocation], skip: frozenset[str]) -> int:
    """Tokens source ``g`` holds of the pool: what it kept, and the room kept for its digest.

    A source in ``skip`` is a stable-prefix build's, whose digest room is its layout's.
    """
    name = g.spec.source
    reserve = 0 if name in skip else digest_reserve(g, allocations[name].grant)
    return selections[name].tokens + reserve


def fit_exactly(plan: BuildPlan, gathered: list[Gathered], selections: dict[str, Selection],
                query: str, costing: Costing, *, note: bool, repeat: bool,
                tail: frozenset[str] = frozenset(), tail_last: bool = False
                ) -> tuple[Assembly, int]:
    """Assemble and count exactly, dropping the least important kept unit while over budget.

    Joins, the Anthropic lead message and the text rendering's escapes are only known once the
    context is assembled, so the exact count has the last word.
    """
    question = next((g.spec.source for g in gathered if g.traits.question), None)
    while True:
        _drop_loops_without_reasoning(selections)
        kept = {name: selection.kept for name, selection in selections.items()}
        ordered = frozenset(name for name, selection in selections.items() if selection.ordered)
        assembly = assemble(plan, kept, query, costing, note=note, repeat=repeat,
                            ordered=ordered, tail=tail, tail_last=tail_last, question=question)
        total, checked = exact_tokens(assembly, costing)
        excess = checked - plan.budget.available
        if excess <= 0:
            return assembly, total
        victim = _least_important(gathered, selections)
        if victim is None:
            fail_budget(plan, gathered, costing.tokenizer,
                        "the context does not fit after cutting")
        _shrink_or_drop(*victim, excess, query, costing)


def _drop_loops_without_reasoning(selections: dict[str, Selection]) -> None:
    """Drop each kept call whose tool loop's reasoning is not kept (``NEEDS_REASONING``).

    With extended thinking on, the Messages API refuses a request whose open tool loop lost
    the thinking block it opened with. Such a loop's reasoning is its oldest message, the
    first a newest-first cut lets go: the calls that need it go too, each reported, and the
    request reads as if the loop had not started. A unit that carries reasoning names
    itself, so dropping one never strands another.
    """
    for selection in selections.values():
        needing = [(unit, str(c.item.metadata[NEEDS_REASONING])) for unit in selection.kept
                   for c in unit.candidates if NEEDS_REASONING in c.item.metadata]
        if not needing:
            continue
        kept_keys = {c.item.key for unit in selection.kept for c in unit.candidates}
        stranded = [(unit, key) for unit, key in needing if key not in kept_keys]
        if not stranded:
            continue
        gone = {id(unit) for unit, _ in stranded}
        selection.kept[:] = [unit for unit in selection.kept if id(unit) not in gone]
        for unit, key in stranded:
            selection.decisions.extend(drop_decisions(
                unit, f"budget: the reasoning its tool loop opened with ({key}) did not fit, "
                      "and the provider refuses the loop without it"))


def _shrink_or_drop(g: Gathered, selection: Selection, unit: Unit, excess: int, query: str,
                    costing: Costing) -> None:
    """Make room for ``excess`` tokens: cut ``unit`` by that much if it can be cut, else drop it.

    A few tokens over (a join, a frame) should not cost a whole document.
    """
    cutter = make_cutter(g.spec.strategy, query, costing)
    target = unit.tokens - excess - 2
    cut = cutter(unit, target) if cutter is not None and target >= MIN_CUT_TOKENS else None
    if cut is None:
        round_units = _with_its_round(g, selection, unit)
        selection.kept[:] = [u for u in selection.kept if not any(u is r for r in round_units)]
        for dropped in round_units:
            selection.decisions.extend(drop_decisions(dropped, "budget: exact recount"))
    else:
        selection.kept[selection.kept.index(unit)] = cut
        selection.decisions.extend(cut_decisions(unit, cut))


def _with_its_round(g: Gathered, selection: Selection, unit: Unit) -> list[Unit]:
    """``unit`` and the kept units of its round, when the source keeps that round whole.

    Pruning keeps a round whole or not at all unless ``partial_rounds`` lets it part
    (``core.select``); the exact recount drops by the same rule, so a round's reply never
    stays without the message that opened it. A round is the run of kept units around
    ``unit`` with its round number and messages next to each other: round numbers restart
    where a layout's pinned head or its recalled turns meet the newest rounds.
    """
    kept = selection.kept
    at = next(index for index, known in enumerate(kept) if known is unit)
    start, end = at, at + 1
    while start > 0 and _one_round(kept[start - 1], kept[start]):
        start -= 1
    while end < len(kept) and _one_round(kept[end - 1], kept[end]):
        end += 1
    same = kept[start:end]
    partial = partial_rounds(g)
    if len(same) == 1 or partial is True or (partial == "tool_rounds"
                                             and has_tool_activity(same)):
        return [unit]
    return same


_ROUND_GAP = 3
"""How far apart (in message positions) two kept units of one round may be: a round's kept
messages are next to each other but for one or two the build left out as duplicates."""


def _one_round(a: Unit, b: Unit) -> bool:
    """Whether units ``a`` and ``b``, next to each other in a selection, are of one round.

    The same round number, the later one not opening a round, and their messages at most
    ``_ROUND_GAP`` positions apart.
    """
    if a.round is None or a.round != b.round:
        return False
    first, second = (a, b) if _orders(a)[0] < _orders(b)[0] else (b, a)
    if second.candidates[0].item.round_start:
        return False
    return _orders(second)[0] - _orders(first)[1] <= _ROUND_GAP


def _orders(unit: Unit) -> tuple[float, float]:
    """The first and last message positions of ``unit``."""
    orders = [c.item.order for c in unit.candidates]
    return min(orders), max(orders)


def text_counts(assembly: Assembly, costing: Costing
                ) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
    """A text build's prompt as hashed and counted blocks, one per message (chat: None)."""
    if costing.target != "text":
        return None
    blocks = text_blocks(assembly.system_parts, assembly.schema_jsons, assembly.sections,
                         assembly.messages, costing.language, assembly.volatile)
    return counted_blocks(blocks, costing.tokenizer.count)


def exact_tokens(assembly: Assembly, costing: Costing) -> tuple[int, int]:
    """The target rendering's exact count, and the count the budget is checked against.

    Chat: the OpenAI count; the check adds what the Anthropic rendering adds to it (a lead
    message when the first message it shows is the assistant's, the text of blank user
    messages), by the rendering's own rules, so every rendering fits. Text: the prompt counted
    whole.
    """
    if costing.target == "text":
        text = render_text(assembly.system_parts, assembly.schema_jsons, assembly.sections,
                           assembly.messages, costing.language, assembly.volatile)
        total = costing.tokenizer.count(text)
        return total, total
    added = anthropic_added_tokens(assembly.messages, assembly.documents, costing.tokenizer)
    return assembly.chat_tokens, assembly.chat_tokens + added


def _least_important(gathered: list[Gathered], selections: dict[str, Selection]
                     ) -> tuple[Gathered, Selection, Unit] | None:
    for g in sorted(gathered, key=lambda g: (-g.layer, -g.position)):
        selection = selections[g.spec.source]
        if g.spec.cuttable and selection.kept:  # the oldest: last in keep order, first in render
            return g, selection, selection.kept[0 if selection.ordered else -1]
    return None
