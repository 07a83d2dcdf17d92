"""Pruning: fit one source's units into its grant, recording why each left-out unit went.

Contiguous sources (``SourceTraits.contiguous``: history, this turn's tool results, notes) keep a
newest-first run and drop everything older than the first unit that does not fit — oldest rounds
go first and the kept history has no holes. Other sources (documents, tools, examples) skip a unit
that does not fit and try the next. The first unit that does not fit may be cut to fit (its
longest cuttable item, around the query's keywords) unless the strategy is ``drop``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from contextwright.core.gather import MIN_CUT_TOKENS, Unit
from contextwright.core.report import Decision
from contextwright.core.source import PartialRounds

Cutter = Callable[[Unit, int], Unit | None]
"""Cuts a unit to at most the given tokens, or returns None when it cannot."""
__all__ = ["MIN_CUT_TOKENS", "Cutter", "PartialRounds", "Selection", "select_units"]
# PartialRounds (``core.source``): ``tool_rounds`` because an agent round can be dozens of
# messages, and its newest calls matter most; a chat round stays whole.


@dataclass(slots=True)
class Selection:
    """Units kept for one source and the decisions about the rest."""

    kept: list[Unit] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    ordered: bool = False
    """``kept`` is in render order (a stable-prefix layout), not keep order."""

    @property
    def tokens(self) -> int:
        """Tokens of the kept units."""
        return sum(u.tokens for u in self.kept)


def select_units(units: list[Unit], grant: int, *, contiguous: bool,
                 partial_rounds: PartialRounds,
                 cutter: Cutter | None, unit_cap: int | None = None) -> Selection:
    """Keep what fits in ``grant``; see the module docstring for the rules.

    ``unit_cap``: a unit larger than this is cut down to it first (when it has a cuttable
    item), so one huge tool result cannot crowd every older round out.
    """
    if contiguous:
        return _select_contiguous(units, grant, partial_rounds, cutter, unit_cap)
    return _select_greedy(units, grant, cutter, unit_cap)


def _select_greedy(units: list[Unit], grant: int, cutter: Cutter | None,
                   unit_cap: int | None = None) -> Selection:
    """Keep each unit that fits, in keep order; cut one that does not to what is left.

    With ``unit_cap`` (and a cutter), see ``_select_capped``.
    """
    if unit_cap is not None and cutter is not None:
        return _select_capped(units, grant, cutter, unit_cap)
    selection = Selection()
    room = grant
    for unit in units:
        if unit.tokens <= room:
            selection.kept.append(unit)
            room -= unit.tokens
            continue
        cut = cutter(unit, room) if cutter and room >= MIN_CUT_TOKENS else None
        if cut is not None:
            selection.kept.append(cut)
            selection.decisions.extend(cut_decisions(unit, cut))
            room -= cut.tokens
        else:
            selection.decisions.extend(drop_decisions(unit, "budget"))
    return selection


def _select_capped(units: list[Unit], grant: int, cutter: Cutter, cap: int) -> Selection:
    """Keep order, but a unit larger than ``cap`` takes at most the cap until the end.

    A unit that fits is kept; one that does not, but is within the cap, is cut to what is left
    (as without a cap). A unit larger than the cap is cut to the cap while that much is left,
    and otherwise waits: one huge document cannot push out the short ones after it. What is
    left at the end goes to the large units in keep order, each widened towards its whole
    size (or, for one that waited, cut to what is left).
    """
    room = grant
    placed: dict[int, Unit | None] = {}
    """What each unit became (itself, a cut of it, None: dropped), by its place in ``units``."""
    large: list[int] = []
    for place, unit in enumerate(units):
        if unit.tokens <= room:
            placed[place], room = unit, room - unit.tokens
            continue
        if unit.tokens > cap:
            large.append(place)
        target = cap if unit.tokens > cap else room
        cut = cutter(unit, target) if MIN_CUT_TOKENS <= target <= room else None
        placed[place] = cut
        room -= 0 if cut is None else cut.tokens
    for place in large:
        have = placed[place]
        held = 0 if have is None else have.tokens
        wider = cutter(units[place], held + room) if held + room >= MIN_CUT_TOKENS else None
        if wider is not None and held < wider.tokens <= held + room:
            placed[place], room = wider, room - (wider.tokens - held)
    selection = Selection()
    for place, unit in enumerate(units):
        kept = placed[place]
        if kept is None:
            selection.decisions.extend(drop_decisions(unit, "budget"))
            continue
        selection.kept.append(kept)
        if kept is not unit:
            selection.decisions.extend(cut_decisions(unit, kept))
    return selection


def _select_contiguous(units: list[Unit], grant: int, partial_rounds: PartialRounds,
                       cutter: Cutter | None, unit_cap: int | None) -> Selection:
    selection = Selection()
    kept = selection.kept
    room = grant
    index, size = 0, len(units)
    while index < size:
        # The units from ``index`` sharing its round (just it when it has none), their tokens
        # and the largest, in one pass: every build prunes history's rounds several times.
        first = units[index]
        end, tokens, largest = index + 1, first.tokens, first.tokens
        round_no = first.round
        if round_no is not None:
            while end < size and units[end].round == round_no:
                unit_tokens = units[end].tokens
                tokens += unit_tokens
                if unit_tokens > largest:
                    largest = unit_tokens
                end += 1
        round_units = units[index:end]
        if unit_cap is not None and cutter is not None and largest > unit_cap:
            round_units = [_capped(u, unit_cap, cutter, selection) for u in round_units]
            tokens = sum(u.tokens for u in round_units)
        if tokens <= room:  # the common case, decided without another call
            kept.extend(round_units)
            room -= tokens
            index = end
            continue
        fitted = _fit_round(round_units, room, unit_cap, cutter, selection)
        if fitted is not None:
            kept.extend(fitted)
            room -= sum(u.tokens for u in fitted)
            index = end
            continue
        if partial_rounds is True or (partial_rounds == "tool_rounds"
                                      and has_tool_activity(round_units)):
            index += _fill_partially(round_units, room, unit_cap, cutter, selection)
        break
    for unit in units[index:]:
        selection.decisions.extend(drop_decisions(unit, "budget: older than what fits"))
    return selection


def has_tool_activity(round_units: list[Unit]) -> bool:
    """Whether a round holds a tool call or result (``tool_rounds`` lets such a round part)."""
    return any(c.item.message.tool_calls or c.item.message.role == "tool"
               for unit in round_units for c in unit.candidates)


def _capped(unit: Unit, cap: int, cutter: Cutter, selection: Selection) -> Unit:
    if unit.tokens <= cap or cap < MIN_CUT_TOKENS:
        return unit
    cut = cutter(unit, cap)
    if cut is None:
        return unit
    selection.decisions.extend(cut_decisions(unit, cut))
    return cut


def _fit_round(round_units: list[Unit], room: int, unit_cap: int | None,
               cutter: Cutter | None, selection: Selection) -> list[Unit] | None:
    """The whole round, its biggest cuttable unit cut if needed; None if it cannot fit.

    A cut unit takes at most ``unit_cap`` (the source's ``max_item_share`` of the grant: half
    of history's), so one huge tool result cannot push every older round out. Without a cap
    (this turn's tool results, whose older calls are not read past a huge one) it takes all
    the room there is, rather than leaving half the grant empty.
    """
    total = sum(u.tokens for u in round_units)
    if total <= room:
        return round_units
    if cutter is None:
        return None
    biggest = max(range(len(round_units)), key=lambda i: round_units[i].tokens)
    target = round_units[biggest].tokens - (total - room)
    if unit_cap is not None:
        target = min(target, unit_cap)
    cut = _cut_within(cutter, round_units[biggest], target, retry=unit_cap is None)
    if cut is None:
        return None
    selection.decisions.extend(cut_decisions(round_units[biggest], cut))
    return [cut if i == biggest else unit for i, unit in enumerate(round_units)]


def _fill_partially(round_units: list[Unit], room: int, unit_cap: int | None,
                    cutter: Cutter | None, selection: Selection) -> int:
    """Keep the newest units of a round that does not fit whole; returns how many were used.

    The unit cut to fit takes at most ``unit_cap`` (None: all the room left), as in
    ``_fit_round``.
    """
    taken = 0
    for unit in round_units:
        if unit.tokens <= room:
            selection.kept.append(unit)
            room -= unit.tokens
            taken += 1
            continue
        target = room if unit_cap is None else min(room, unit_cap)
        cut = _cut_within(cutter, unit, target, retry=unit_cap is None) if cutter else None
        if cut is not None:
            selection.kept.append(cut)
            selection.decisions.extend(cut_decisions(unit, cut))
            taken += 1
        break
    return taken


_RETRY_MARGIN = 32
"""A cut that misses a large target is tried once more this fraction (1/32) lower."""


def _cut_within(cutter: Cutter, unit: Unit, target: int, *, retry: bool) -> Unit | None:
    """``unit`` cut to at most ``target`` tokens, or None (a target under ``MIN_CUT_TOKENS``).

    A cut keeps whole sentences or rows and is counted as rendered (fenced, framed), so near
    a large target it can stay a token or two over after its own tries. With ``retry`` (a
    source without an item cap, whose cut is given all the room: missing it would leave the
    whole grant empty) it is tried once more a little lower. A capped source does not retry:
    what its cut leaves goes to its older rounds or its digest, as it always did.
    """
    if target < MIN_CUT_TOKENS:
        return None
    cut = cutter(unit, target)
    lower = target - max(target // _RETRY_MARGIN, 1)
    if cut is None and retry and lower >= MIN_CUT_TOKENS:
        cut = cutter(unit, lower)
    return cut


def drop_decisions(unit: Unit, reason: str) -> list[Decision]:
    """One ``dropped`` decision per item of ``unit``.

    A steady build drops the same older units in each of its prunes, build after build, so
    the decision is kept on the (cached) candidate, as ``compacted`` is: it is frozen and a
    function of the candidate, the source and the reason.
    """
    decisions = []
    for candidate in unit.candidates:
        images = candidate.message.images
        why = f"{reason} (with its {len(images)} image(s))" if images else reason
        known = candidate.dropped
        if known is None or known.reason != why or known.source != unit.source:
            known = candidate.dropped = Decision(
                source=unit.source, key=candidate.item.key, action="dropped", reason=why,
                tokens_before=candidate.tokens)
        decisions.append(known)
    return decisions


def cut_decisions(original: Unit, cut: Unit) -> list[Decision]:
    """``truncated`` decisions for the items whose text the cut changed."""
    return [
        Decision(source=original.source, key=before.item.key, action="truncated",
                 reason="too long: cut to fit (around the query's keywords, else the head)",
                 tokens_before=before.tokens, tokens_after=after.tokens,
                 detail=before.item.message.content)
        for before, after in zip(original.candidates, cut.candidates, strict=True)
        if before.message.content != after.message.content
    ]
