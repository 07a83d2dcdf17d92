"""Cutting in steps: a message source keeps its previous cut while it fits, then advances by a step.

With a previous build's ``Fingerprint`` (``core.cache``), each message source (one that offers
the messages of a request list, ``SourceTraits.message_list``: history, this turn's calls) is
offered its previous layout again: the messages it kept, in the order it showed
them, found again by their rendered hash, plus the messages appended since, plus (for a source
that recalls older turns) turns recalled for this input that fit a small allowance, or that are
shown after the run for this call only (the recall tail). When that fits the source's grant, the
build shows exactly it: the previous request is a prefix of this one, and the provider's cache
covers everything up to the newest messages (or up to the tail). When it does not fit (or
the previous layout cannot be found again: the list was edited, the plan changed), the source is
cut afresh, to leave ``CachePolicy.step`` of its grant free, so the following calls append again.

What a source shows of its older messages must not change between cuts either: tool-result tiers
are computed as of the list's length at the last cut (the option the source's ``Layout``
names, history's ``tier_anchor``), and the digest of left-out messages from the list as it was
then, without the current input (which changes every call).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from contextwright.analysis import asks
from contextwright.compress.facts import extract_facts
from contextwright.core.cache import CachePolicy, SourceLayout, message_hash, short_hash
from contextwright.core.cutting import KEEP_HEAD
from contextwright.core.digest import DigestCost, checked_digest, digest_share
from contextwright.core.gather import Candidate, Costing, Gathered, Unit, gather_source
from contextwright.core.items import ContextItem, detached, parse_message
from contextwright.core.plan import FrozenOptions, SourceSpec, thawed
from contextwright.core.request import Request
from contextwright.core.select import Selection, has_tool_activity
from contextwright.core.source import ContextSource, DigestingSource, Layout, traits_of
from contextwright.errors import InvalidInputError, PlanError

TAIL_SEARCH = 4096
"""How far back from the end the previous list's last message is looked for."""


def laid_out_list(g: Gathered) -> str:
    """The request list ``g``'s source reads (only message sources keep a layout)."""
    where = g.traits.message_list
    if where is None:
        raise ValueError(f"source {g.spec.source!r} offers no request list to lay out")
    return where


def candidate_hash(candidate: Candidate) -> str:
    """Hash of a candidate as rendered (remembered on it: candidates are never changed)."""
    if not candidate.rendered_hash:
        candidate.rendered_hash = message_hash(candidate.message)
    return candidate.rendered_hash


def raw_hash(raw: Mapping[str, Any], where: str) -> str:
    """Hash of one of the caller's messages, to find a list's previous end again."""
    return message_hash(parse_message(raw, where))


TAIL_MESSAGES = 4
"""How many of a list's last messages its ``tail`` hash covers: one message ("OK.") repeats."""


def tail_of(raw: Sequence[Mapping[str, Any]], where: str, end: int | None = None) -> str:
    """Hash of the last ``TAIL_MESSAGES`` messages of ``raw[:end]`` ('' for an empty list)."""
    end = len(raw) if end is None else end
    start = max(0, end - TAIL_MESSAGES)
    return short_hash("\x1f".join(raw_hash(raw[i], f"{where}[{i}]") for i in range(start, end)))


def locate(layout: SourceLayout, raw: Sequence[Mapping[str, Any]], where: str) -> int | None:
    """How far the previous list's end moved in ``raw`` (None: it is not there).

    0 when messages were only appended (checked first); negative when the list now starts
    later (a session read from a later message on). The end is known by its last few messages,
    not one, so a repeated reply is not taken for it.
    """
    if layout.length == 0:
        return 0
    expected = layout.length
    if expected <= len(raw) and tail_of(raw, where, expected) == layout.tail:
        return 0
    for end in range(len(raw), max(0, len(raw) - TAIL_SEARCH), -1):
        if end != expected and tail_of(raw, where, end) == layout.tail:
            return end - expected
    return None


@dataclass(slots=True)
class StableOffer:
    """What a message source can show if its previous layout still fits."""

    units: list[Unit] = field(default_factory=list)
    """The previous layout, found again, in its render order."""
    appended: list[Unit] = field(default_factory=list)
    """Units of the messages appended since, oldest first."""
    recalled: list[Unit] = field(default_factory=list)
    """Turns recalled for this input that the layout does not show, best first."""
    ranked: list[Unit] = field(default_factory=list)
    """Every turn recalled for this input, best first, shown or not (for the coverage)."""
    shown: set[str] = field(default_factory=set)
    """Item keys of the messages the layout shows (a message recalled or plain: one key)."""
    anchor: int = 0
    """The list length tiers and the digest are computed as of (in this list's positions)."""
    digest_room: int = 0
    focus: float | None = None
    """How focused this input's recall is (``recall_focus`` of the source; None: unknown)."""
    asks: bool = True
    """Whether the input asks something (``analysis.asks``): one that does not cuts no run for
    its recall (``CachePolicy.recall_cuts``), and gets no recall tail when its recall is
    diffuse (``CachePolicy.diffuse_tail``)."""
    states_facts: bool = False
    """Whether the input states an exact value (``compress.facts``: an id, an amount, a date):
    a statement that names one refers back to something specific (``statement_tail="facts"``)."""
    failure: str | None = None
    """Why the previous layout cannot be continued (None: it can)."""

    @property
    def base_tokens(self) -> int:
        """Tokens of the layout and the appended messages."""
        return sum(u.tokens for u in self.units) + sum(u.tokens for u in self.appended)


def anchored_options(options: Mapping[str, Any], anchor: int, layout: Layout, *,
                     recall: bool) -> FrozenOptions:
    """A message source's options with tiers computed as of ``anchor`` (its ``layout`` names them).

    Without ``recall``, the source offers its plain newest-first stream (no recalled turns);
    a window of rounds may hold up to twice its rounds between cuts.
    """
    plain = thawed(options)
    if layout.anchor_option is not None:
        plain[layout.anchor_option] = anchor
    if not recall:
        if layout.recall_option is not None:
            plain[layout.recall_option] = 0
        window = layout.window_option
        if window is not None and plain.get(window) is not None:
            plain[window] = 2 * int(plain[window])
    return FrozenOptions(plain)


def offer(g: Gathered, source: ContextSource, request: Request, layout: SourceLayout,
          cap: int, costing: Costing, gathered_at: int | None = None,
          removed: frozenset[str] = frozenset()) -> StableOffer:
    """Find ``layout`` again among what ``source`` offers now (see the module docstring).

    ``gathered_at``: the anchor ``g`` was already gathered as of (its plain stream, see
    ``preanchored``), so it is not read again. ``removed``: keys normalisation took out of
    ``g`` (a duplicate, a lost key conflict); read again, they stay out.
    """
    name = g.spec.source
    where = laid_out_list(g)
    raw = getattr(request, where)
    shift = locate(layout, raw, where)
    if shift is None:
        return StableOffer(failure=f"{where} does not continue the previous build's")
    anchor = layout.anchor + shift
    if anchor > len(raw):
        return StableOffer(failure=f"{where} no longer holds the previous cut's messages")
    if anchor < 0:
        # The list moved on past the last cut (a session's window slid): the layout cannot go
        # on, but its leading units still offered as they were shown (turns recalled from the
        # session's store) are the next cut's pinned head, so the cache still covers them.
        return StableOffer(units=_leading(g, source, request, layout, shift, cap, costing),
                           failure=f"{where} no longer holds the previous cut's messages")
    options, shape = g.spec.options, g.traits.layout
    # The layout's messages moved by ``shift`` where the list lost messages at its start (a
    # window slid on); where messages were inserted, only those after the insertion moved.
    moved = min(shift, 0)
    if any(options.get(option) for option in shape.shaping_options) and gathered_at != anchor:
        plain = gather_source(replace(g.spec, options=anchored_options(options, anchor, shape,
                                                                       recall=False)),
                              g.position, source, request, cap, costing,
                              reach=None if layout.reach is None else layout.reach + moved)
        if plain.error is not None:  # nothing to match the layout against: cut afresh
            return StableOffer(failure=f"{name} cannot be read as of the last cut "
                                       f"({plain.error})")
        plain.units = without_keys(plain.units, removed)  # read again: keep them out
    else:  # no tiers, no recall, no window: what the source offered is the plain stream
        plain = g
    pool = [*plain.units, *(g.units if plain is not g else ()),
            *without_keys([*_lead_again(g, source, request, layout, shift, plain, cap, costing),
                           *_recalled_again(g, source, request, layout, shift, anchor, cap,
                                            costing)], removed)]
    if layout.reach is not None:
        pool = [u for u in pool if _may_be_shown(_earliest(u), layout, moved)]
    stable = StableOffer(anchor=anchor, digest_room=layout.digest_room)
    failed = _with_replayed_digest(pool, g, source, request, layout, anchor, costing)
    if failed is not None:
        return StableOffer(failure=failed)
    stable.units, missing = match_layout(layout.messages, pool)
    if missing is not None:
        if not plain.complete and missing == 0:
            stable.failure = ("its kept run starts past what it may read now (a smaller "
                              "budget, or a window of rounds that moved on)")
        elif not plain.complete and _read_short_of(
                plain, stable.units, None if layout.reach is None else layout.reach + moved):
            stable.failure = ("its kept run reaches back past what the budget reads now (the "
                              "messages appended since outgrew it)")
        else:
            stable.failure = (f"{name}'s previous message {missing} is no longer offered as "
                              "it was (changed, or cut differently)")
        return stable
    if shift > 0:
        # The previous end sits later in the list: messages were inserted before it (an earlier
        # turn edited in). They are not appended ones, and the layout cannot show them in their
        # place: cut afresh, as for a changed or deleted message, keeping only the layout's
        # leading units that precede the insertion (the prefix still cached).
        stable.units = _in_place(stable.units)
        stable.failure = (f"{where} has {shift} message{'s' if shift > 1 else ''} inserted "
                          "before the previous build's end (an edited history)")
        return stable
    end = layout.length + shift
    # By item key, not by rendering: a turn the layout shows plain (in its place) and the same
    # turn recalled (marked) are one turn, and must not be shown twice.
    shown = {c.item.key for u in stable.units for c in u.candidates}
    stable.appended = sorted(
        (u for u in plain.units if _first_order(u) >= end and not _recalled(u)),
        key=_first_order)
    shown.update(c.item.key for u in stable.appended for c in u.candidates)
    stable.ranked = [u for u in g.units if _recalled(u)]
    stable.recalled = [u for u in stable.ranked if not any(
        c.item.key in shown for c in u.candidates)]
    stable.shown = shown
    if stable.ranked:
        stable.asks = asks(request.user_input)
        stable.states_facts = not stable.asks and bool(extract_facts(request.user_input))
        focus_of = getattr(source, "recall_focus", None)
        if callable(focus_of):
            stable.focus = focus_of(request, options)
    return stable


def _read_short_of(plain: Gathered, matched: Sequence[Unit], reach: int | None) -> bool:
    """Whether ``plain`` stopped reading before the layout's messages it failed to match.

    Its oldest message read lies past the layout's ``reach`` (when the layout says it; else
    past the message after the ``matched`` ones): the run was not offered because the stream,
    read as far as the budget reaches, did not get back to it.
    """
    oldest = _oldest_read(plain)
    if oldest is None:
        return False
    if reach is not None:
        return oldest > reach
    shown = [order for u in matched for c in u.candidates if (order := c.item.order) >= 0]
    return oldest > (max(shown) + 1 if shown else 0)


def _oldest_read(plain: Gathered) -> float | None:
    """The list position of the oldest plain message ``plain`` read (None: none)."""
    return min((_first_order(u) for u in plain.units if not _recalled(u)), default=None)


def without_keys(units: list[Unit], keys: frozenset[str] | None) -> list[Unit]:
    """``units`` without those holding an item with one of ``keys``."""
    if not keys:
        return units
    return [u for u in units if not any(c.item.key in keys for c in u.candidates)]


def preanchored(spec: SourceSpec, source: ContextSource, request: Request,
                layout: SourceLayout) -> tuple[int, FrozenOptions, int | None] | None:
    """The anchor, options and reach to read ``spec``'s source with to continue ``layout``.

    A source whose layout goes on (its list only grew since the last cut) is matched against
    its plain stream as of the last cut (``offer``). Gathered that way from the start, it need
    not be read a second time: the build reads it once, as of the anchor, only back to where
    the layout's shown messages start (``SourceLayout.reach``), and reads it afresh only if
    the layout cannot go on. None where that does not apply: the list changed, the source
    offers its plain stream anyway, or it recalls turns for the input (which only its own
    options rank).
    """
    traits = traits_of(source)
    shape, options = traits.layout, spec.options
    where = traits.message_list
    if (where is None or not spec.cuttable
            or not any(options.get(option) for option in shape.shaping_options)
            or (shape.recall_option is not None and options.get(shape.recall_option))):
        return None
    raw = getattr(request, where)
    if locate(layout, raw, where) != 0 or not 0 <= layout.anchor <= len(raw):
        return None
    return (layout.anchor, anchored_options(options, layout.anchor, shape, recall=False),
            None if shape.recalls_always else layout.reach)


def _in_place(units: Sequence[Unit]) -> list[Unit]:
    """The leading plain ``units`` that follow one another in the list, with no message between.

    After an insertion, they are what the previous request showed in the same place (a gap
    may be the inserted messages: what follows it is no longer where it was shown).
    """
    run: list[Unit] = []
    last: float | None = None
    for unit in units:
        orders = sorted(c.item.order for c in unit.candidates)
        if _recalled(unit) or _is_digest(unit) or (last is not None and orders[0] != last + 1):
            break
        run.append(unit)
        last = orders[-1]
    return run


class _Turns:
    """A source's ``recalled_turns`` seen as a source, so gathering costs them as usual."""

    def __init__(self, source: ContextSource, starts: Sequence[int]) -> None:
        self.namespace = source.namespace
        self._source = source
        self._starts = starts

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        recalled_turns = getattr(self._source, "recalled_turns")  # noqa: B009
        yield from recalled_turns(request, options, self._starts)


def _leading(g: Gathered, source: ContextSource, request: Request, layout: SourceLayout,
             shift: int, cap: int, costing: Costing) -> list[Unit]:
    """The leading units of ``layout`` still offered as shown (by ``g`` or as recalled turns).

    Tiers are as of the list's start: the last cut's messages are gone. Only a run of them
    from the layout's first message counts (``pinned_head`` takes what fits its share).
    """
    pool = [*g.units, *_recalled_again(g, source, request, layout, shift, 0, cap, costing)]
    units, _ = match_layout(layout.messages, pool)
    return units


def _lead_again(g: Gathered, source: ContextSource, request: Request, layout: SourceLayout,
                shift: int, plain: Gathered, cap: int, costing: Costing) -> list[Unit]:
    """The layout's leading plain messages (``SourceLayout.lead``) when ``plain`` stopped short.

    ``plain`` reads newest first only as far as the budget: past a cut, a long list's pinned
    head (its oldest shown messages) lies beyond that. It is read where it is, newest first from
    its end back to its start: what is read does not grow with the list. The lead holds no
    tool result (whose tier counts the calls after it), so it renders as it would in the
    whole list.
    """
    if plain.complete or len(layout.lead) != 2:
        return []
    start, stop = layout.lead[0] + shift, layout.lead[1] + shift
    oldest = _oldest_read(plain)
    reached = stop if oldest is None else oldest
    if start < 0 or start >= reached:
        return []
    where = laid_out_list(g)
    shorter = replace(request, **{where: getattr(request, where)[:min(stop, int(reached))]})
    return gather_source(plain.spec, g.position, source, shorter, cap, costing,
                         reach=start).units


def _recalled_again(g: Gathered, source: ContextSource, request: Request,
                    layout: SourceLayout, shift: int, anchor: int, cap: int,
                    costing: Costing) -> list[Unit]:
    """The layout's recalled turns, offered again as they were shown (if the source can).

    A turn ``g`` offers recalled already, rendered as the layout shows it, is found there:
    it is not read again.
    """
    if not layout.recalled or not callable(getattr(source, "recalled_turns", None)):
        return []
    shown = set(layout.messages)
    offered = {int(_first_order(u)) for u in g.units if _recalled(u) and all(
        (c.rendered_hash or candidate_hash(c)) in shown for c in u.candidates)}
    # A detached start (a session's stored turn) does not move with the list.
    starts = [moved for start in layout.recalled
              if (moved := start if detached(start) else start + shift) not in offered]
    if not starts:
        return []
    spec = replace(g.spec, options=anchored_options(g.spec.options, anchor, g.traits.layout,
                                                    recall=True))
    return gather_source(spec, g.position, _Turns(source, starts), request, cap, costing).units


def match_layout(hashes: Sequence[str], pool: Sequence[Unit]) -> tuple[list[Unit], int | None]:
    """Units of ``pool`` that render as ``hashes``, in that order; else the first missing index.

    A unit matches where all its messages (in render order) follow one another in ``hashes``, so
    a turn kept whole once and as separate blocks now is found all the same.
    """
    by_first: dict[str, list[tuple[Unit, list[str]]]] = {}
    seen: set[int | tuple[int, ...]] = set()
    for unit in pool:
        candidates = unit.candidates
        # The same candidates offered twice (the plain stream and the source's own share
        # most messages) match alike: the first, which would be taken, is enough.
        if len(candidates) == 1:  # most units: no tuple, no sort
            only = candidates[0]
            identity: int | tuple[int, ...] = id(only)
            rendered = [only.rendered_hash or candidate_hash(only)]
        else:
            identity = tuple(map(id, candidates))
            rendered = [candidate_hash(c) for c in sorted(candidates, key=_order)]
        if identity in seen:
            continue
        seen.add(identity)
        alike = by_first.get(rendered[0])
        if alike is None:
            by_first[rendered[0]] = [(unit, rendered)]
        else:
            alike.append((unit, rendered))
    # Each first message's units by order (stable: pool order among equal orders), so the
    # next one along is found by bisection: a session that says one thing again and again
    # (the same question asked daily) has hundreds of alike units, and looking at every one
    # of them for every message made this quadratic.
    ordered = {first: sorted(alike, key=lambda entry: _first_order(entry[0]))
               for first, alike in by_first.items() if len(alike) > 1}
    orders = {first: [_first_order(unit) for unit, _ in alike]
              for first, alike in ordered.items()}
    units: list[Unit] = []
    shown: set[str] = set()  # two messages that render alike are two units, not one twice

    def first_fit(entries: Sequence[tuple[Unit, list[str]]], index: int) -> Unit | None:
        for unit, rendered in entries:  # every entry's first hash is ``hashes[index]``
            candidates = unit.candidates
            if (candidates[0].item.key in shown if len(candidates) == 1
                    else any(c.item.key in shown for c in candidates)):
                continue
            if len(rendered) == 1 or list(hashes[index:index + len(rendered)]) == rendered:
                return unit
        return None

    index = 0
    last = float("-inf")
    while index < len(hashes):
        first = hashes[index]
        # Alike messages: take the one that keeps the run in order (the next one along),
        # else the first that fits in the pool's order.
        alike = ordered.get(first)
        found = first_fit(alike[bisect_right(orders[first], last):], index) if alike else None
        if found is None:
            found = first_fit(by_first.get(first, ()), index)
        if found is None:
            return units, index
        last = max(last, _first_order(found))
        if len(found.candidates) == 1:  # most units: no generator
            shown.add(found.candidates[0].item.key)
        else:
            shown.update(c.item.key for c in found.candidates)
        units.append(found)
        index += len(found.candidates)
    return units, None


def _with_replayed_digest(pool: list[Unit], g: Gathered, source: ContextSource,
                          request: Request, layout: SourceLayout, anchor: int,
                          costing: Costing) -> str | None:
    """Add the layout's digest, made again, to ``pool``; or say why it cannot be made.

    A source is third-party code: when its digest fails, the build cuts afresh, where a
    failing digest fails a required source and is reported for an optional one.
    """
    if not layout.digest_room:
        return None
    try:
        digest = replay_digest(g, source, request, layout, anchor, pool, costing)
    except (InvalidInputError, PlanError):
        raise
    except Exception as exc:
        return f"{g.spec.source}'s digest cannot be made again ({type(exc).__name__})"
    if digest is not None:
        pool.append(digest)
    return None


def replay_digest(g: Gathered, source: ContextSource, request: Request, layout: SourceLayout,
                  anchor: int, pool: Sequence[Unit], costing: Costing) -> Unit | None:
    """The digest as the last cut made it: the list up to ``anchor``, no input, the same room."""
    if (not (g.traits.digestible and isinstance(source, DigestingSource))
            or digest_share(g.spec.options, g.spec.source) <= 0):
        return None
    frozen = digest_request(request, laid_out_list(g), anchor)
    shown = set(layout.messages)
    kept = [c.item for u in pool for c in u.candidates
            if candidate_hash(c) in shown and 0 <= c.item.order < anchor]
    cost = DigestCost(costing, layout.digest_room + 1, remember=True)
    item = source.digest(frozen, g.spec.options, _unique(kept), layout.digest_room, cost)
    if item is None:
        return None
    candidate = cost.render(checked_digest(item, g.spec.source))
    return Unit(source=g.spec.source, candidates=[candidate], round=None, rank=0)


def _may_be_shown(item: ContextItem, layout: SourceLayout, shift: int) -> bool:
    """Whether ``item`` may be one ``layout`` shows, besides rendering like one of them.

    A plain message of the list that lies before the layout's reach, outside its lead, was
    not shown, even if it reads like a shown one (the same reply twice): it is not matched
    for it, and the digest of the last cut counts it as left out. ``item`` is a unit's
    first (a recalled turn's marked opening speaks for the turn). ``shift``: how far the
    layout's positions moved back in the list (a window that slid on).
    """
    order = item.order - shift
    if layout.reach is None or item.order < 0 or order >= layout.reach:
        return True
    if KEEP_HEAD in item.metadata or "digest" in item.metadata:
        return True
    return bool(layout.lead) and layout.lead[0] <= order < layout.lead[1]


def digest_request(request: Request, where: str, end: int) -> Request:
    """``request`` as a digest between cuts sees it: its list up to ``end``, no input."""
    return replace(request, user_input="", **{where: getattr(request, where)[:end]})


def _unique(items: list[ContextItem]) -> list[ContextItem]:
    return list({item.key: item for item in reversed(items)}.values())[::-1]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a previous layout is continued, and if not, why the cut advances."""

    selection: Selection | None
    """The continued layout (None: the source is cut afresh)."""
    why: str = ""
    """Why the cut advances, in words."""
    outgrown: bool = False
    """The layout no longer fits (its run or its window grew past the grant): the cut is forced
    by the messages appended, not by what this input needs recalled."""
    transient: frozenset[str] = frozenset()
    """Item keys of the recalled turns shown after the kept run for this call only."""


def decide(stable: StableOffer, grant: int, policy: CachePolicy,
           max_rounds: int | None) -> Verdict:
    """The continued layout when it fits ``grant``, else why the cut must advance."""
    if stable.failure is not None:
        return Verdict(None, stable.failure)
    base = [*stable.units, *stable.appended]
    tokens = stable.base_tokens
    if tokens > grant:
        return Verdict(None, f"its kept run no longer fits its grant ({tokens} > {grant} tokens)",
                       outgrown=True)
    if max_rounds is not None and _rounds(base) > 2 * max_rounds:
        return Verdict(None, f"its window passed {2 * max_rounds} rounds", outgrown=True)
    room = grant - tokens
    extra = _fitting(stable.recalled, min(room, int(grant * policy.recall_share)))
    diffuse = stable.focus is not None and stable.focus < policy.min_recall_focus
    # What this input's recall is too weak a reason to cut the run for: a diffuse match, or a
    # statement (it asks nothing of the past; ``recall_cuts``).
    holds = diffuse or (policy.recall_cuts == "questions" and not stable.asks)
    coverage = recall_coverage(stable, extra, grant)
    if coverage >= policy.min_recall_coverage:
        return Verdict(Selection(kept=[*base, *extra], ordered=True))
    if policy.recall_tail and _tail_for(stable, diffuse, policy):
        # The input needs turns the run lacks: shown after it for this call only, in the room
        # it leaves, they serve the input while the run (and the cache over it) stays as it was.
        tail = _fitting(stable.recalled, room)  # the best that fit, shown in their order
        if holds or recall_coverage(stable, tail, grant) >= policy.min_recall_coverage:
            return Verdict(Selection(kept=[*base, *sorted(tail, key=_first_order)],
                                     ordered=True),
                           transient=frozenset(c.item.key for u in tail for c in u.candidates))
    if holds:
        return Verdict(Selection(kept=[*base, *extra], ordered=True))
    # Too little of what the recaller ranks best for this input would be shown: what the input
    # needs matters more than the cache, so cut afresh (recall has its full share).
    return Verdict(None, f"the layout shows {coverage:.0%} of the turns recalled for this input "
                         f"(under {policy.min_recall_coverage:.0%})")


def _tail_for(stable: StableOffer, diffuse: bool, policy: CachePolicy) -> bool:
    """Whether the input may be shown a recall tail (``statement_tail``, ``diffuse_tail``).

    A tail is paid for uncached on every call that shows one. An input that asks nothing gets
    none when the policy gives statements none. A focused input may; a diffuse one, per the
    policy (its recalled turns match little of it).
    """
    if not stable.asks and (policy.statement_tail is False or (
            policy.statement_tail == "facts" and not stable.states_facts)):
        return False
    if not diffuse or policy.diffuse_tail == "always":
        return True
    return policy.diffuse_tail == "questions" and stable.asks


def _fitting(units: Sequence[Unit], room: int) -> list[Unit]:
    """The units that fit ``room``, taken in order (a unit too large is passed over)."""
    taken: list[Unit] = []
    for unit in units:
        if unit.tokens <= room:
            taken.append(unit)
            room -= unit.tokens
    return taken


def recall_coverage(stable: StableOffer, extra: Sequence[Unit], grant: int) -> float:
    """Share (by tokens) of the best recalled turns, up to half the grant, that would be shown.

    1.0 when nothing is recalled for this input.
    """
    return covered_share(stable.ranked,
                         stable.shown | {c.item.key for u in extra for c in u.candidates}, grant)


def covered_share(ranked: Sequence[Unit], shown: set[str], grant: int) -> float:
    """Share (by tokens) of the best of ``ranked`` (``best_recalled``) that ``shown`` holds whole.

    1.0 when nothing is ranked.
    """
    total = covered = 0
    for unit in _best(ranked, grant):
        total += unit.tokens
        if all(c.item.key in shown for c in unit.candidates):
            covered += unit.tokens
    return covered / total if total else 1.0


def best_recalled(ranked: Sequence[Unit], grant: int) -> frozenset[str]:
    """Item keys of the best recalled turns, by rank, up to half the grant (at least one)."""
    return frozenset(c.item.key for unit in _best(ranked, grant) for c in unit.candidates)


def _best(ranked: Sequence[Unit], grant: int) -> Iterator[Unit]:
    total = 0
    for unit in ranked:
        if total + unit.tokens > grant // 2 and total:
            return
        total += unit.tokens
        yield unit


def pinned_head(units: Sequence[Unit], cap: int) -> list[Unit]:
    """The leading units of a layout (render order), before any digest or tool result, in ``cap``.

    Kept through a cut, they keep the provider's cache warm past the system prompt even when
    the newest messages no longer fit. A head does not end inside a round without tool calls:
    a question kept without its reply would be read as answered by whatever follows the head.
    (A round with calls may part, as when it is cut afresh: its question stays, the head ends
    before its first call.)
    """
    head: list[Unit] = []
    used = 0
    for at, unit in enumerate(units):
        if _is_digest(unit) or used + unit.tokens > cap or any(
                c.message.role == "tool" for c in unit.candidates):
            break  # a tool result's tier is recomputed at a cut: it could not stay as shown
        if _question_without_its_next(unit, units[at + 1] if at + 1 < len(units) else None):
            break
        head.append(unit)
        used += unit.tokens
    return head[:whole_rounds(units, len(head))]


def _question_without_its_next(unit: Unit, following: Unit | None) -> bool:
    """Whether ``unit`` opens a round of the list whose next message the layout lacks.

    A layout found again after an edit lacks the edited message: a question whose reply was
    edited would be kept in the head without it, read as answered by whatever follows.
    """
    first = unit.candidates[0].item
    if (not first.round_start or _recalled(unit) or first.order < 0
            or first.order != int(first.order)):
        return False
    if following is None:  # the layout (as found again) ends with it: its round may go on
        return True
    if _is_digest(following):  # what the cut left of its round is listed right after it
        return False
    return _first_order(following) != max(c.item.order for c in unit.candidates) + 1


def whole_rounds(units: Sequence[Unit], end: int) -> int:
    """Where a head of ``units`` ending at ``end`` ends when it must not part a round.

    ``end``, or the start of the round ``units[end]`` goes on with if that round has no tool
    calls (so a head ``units[:end]`` would part it).
    """
    if end == 0 or end >= len(units) or units[end].candidates[0].item.round_start is not False:
        return end
    start = end - 1
    while start > 0 and not units[start].candidates[0].item.round_start:
        start -= 1
    stop = end
    while stop < len(units) and units[stop].candidates[0].item.round_start is False:
        stop += 1
    return end if has_tool_activity(list(units[start:stop])) else start


def after_head(g: Gathered, head: Sequence[Unit]) -> Gathered:
    """``g`` without the head's messages or plain messages older than it (recalled ones stay).

    Its oldest kept round follows the head: a round without calls may not part there (with
    ``partial_rounds: true``, only a round with calls may), or its reply would be read as
    the answer to the head's last message.
    """
    keys = {c.item.key for u in head for c in u.candidates}
    end = max(c.item.order for u in head for c in u.candidates)
    units = [u for u in g.units
             if not any(c.item.key in keys for c in u.candidates)
             and (_recalled(u) or _first_order(u) > end)]
    spec = g.spec
    if spec.options.get("partial_rounds") is True:
        spec = replace(spec, options=FrozenOptions({**thawed(spec.options),
                                                    "partial_rounds": "tool_rounds"}))
    return replace(g, spec=spec, units=units)


def in_render_order(selection: Selection) -> Selection:
    """A freshly cut selection as an ordered one: units in the order they render."""
    selection.kept.sort(key=_first_order)
    selection.ordered = True
    return selection


def layout_of(selection: Selection, raw: Sequence[Mapping[str, Any]], where: str, anchor: int,
              digest_room: int) -> SourceLayout:
    """What the next build needs to find this selection again."""
    hashes = tuple(candidate_hash(c) for u in selection.kept
                   for c in sorted(u.candidates, key=_order))
    # Positions in this list; a session's older turns, recalled from its store, sit before
    # it (negative: the source's ``recalled_turns`` finds them again by that position).
    recalled = tuple(sorted({int(_first_order(u)) for u in selection.kept if _recalled(u)}))
    lead = lead_of(selection.kept)
    return SourceLayout(messages=hashes, length=len(raw), tail=tail_of(raw, where),
                        anchor=anchor, digest_room=digest_room, recalled=recalled,
                        lead=lead, reach=reach_of(selection.kept, lead, len(raw)))


def reach_of(units: Sequence[Unit], lead: tuple[int, ...], length: int) -> int:
    """``SourceLayout.reach`` of a layout showing ``units``, ``lead`` its lead.

    The plain messages count: a recalled turn shown marked is offered again apart
    (``_recalled_again``), one shown unmarked in its place is read with the stream; the lead
    is read where it is (``_lead_again``) unless nothing separates it from the rest.
    """
    start, stop = lead if lead else (length, length)
    orders = [c.item.order for u in units
              if not _is_digest(u) and KEEP_HEAD not in u.candidates[0].item.metadata
              for c in u.candidates if c.item.order >= 0 and not start <= c.item.order < stop]
    reach = int(min(orders)) if orders else length
    return start if lead and reach <= stop else reach


def lead_of(units: Sequence[Unit]) -> tuple[int, ...]:
    """``(start, stop)`` of the leading plain units that follow one another in the list.

    Empty when the layout opens with no such unit. A unit with a tool result ends the lead:
    its tier would not render alike in a list read only up to it (``_lead_again``).
    """
    run = _in_place(units)
    run = run[:next((i for i, u in enumerate(run)
                     if any(c.message.role == "tool" for c in u.candidates)), len(run))]
    orders = [c.item.order for u in run for c in u.candidates]
    if not orders or min(orders) < 0 or any(order != int(order) for order in orders):
        return ()
    return int(min(orders)), int(max(orders)) + 1


def digest_room_of(selection: Selection, grant: int) -> int:
    """The room a fresh cut's digest had: the grant less what the rest of the source kept."""
    digests = [u for u in selection.kept if _is_digest(u)]
    if not digests:
        return 0
    return grant - sum(u.tokens for u in selection.kept if not _is_digest(u))


def _is_digest(unit: Unit) -> bool:
    return "digest" in unit.candidates[0].item.metadata


def _recalled(unit: Unit) -> bool:
    return "recalled" in unit.candidates[0].item.metadata


def _order(candidate: Candidate) -> float:
    return candidate.item.order


def _earliest(unit: Unit) -> ContextItem:
    """The item of ``unit`` first in the list."""
    candidates = unit.candidates
    if len(candidates) == 1:
        return candidates[0].item
    return min((c.item for c in candidates), key=lambda item: item.order)


def _first_order(unit: Unit) -> float:
    candidates = unit.candidates
    if len(candidates) == 1:  # most units; a layout's matching asks for each many times
        return candidates[0].item.order
    return min([c.item.order for c in candidates])


def _rounds(units: Sequence[Unit]) -> int:
    return sum(1 for u in units for c in u.candidates
               if c.item.round_start and c.message.role == "user")
