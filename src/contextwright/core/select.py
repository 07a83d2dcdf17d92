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

from contextwright.core.gather import Unit
from contextwright.core.report import Decision
from contextwright.core.source import PartialRounds

MIN_CUT_TOKENS = 48
"""A cut item shorter than this says too little to be worth its framing."""

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

    With ``unit_cap``, a unit is cut to at most the cap on the first pass, so one huge
    document leaves room for the smaller ones after it; what is still left at the end goes
    back to the units cut to the cap, best first.
    """
    selection = Selection()
    room = grant
    cuts: dict[int, Unit] = {}
    """Originals of the kept units that were cut, by their place in ``kept``."""
    held_back: list[int] = []
    """Places of the cuts that the cap made smaller than the room then left."""
    decided: list[int | list[Decision]] = []
    """In unit order: a cut's place in ``kept`` (decided once widening is done), or drops."""
    for unit in units:
        if unit.tokens <= room:
            selection.kept.append(unit)
            room -= unit.tokens
            continue
        target = room if unit_cap is None else min(room, unit_cap)
        cut = cutter(unit, target) if cutter and target >= MIN_CUT_TOKENS else None
        if cut is None and cutter and target < room:  # too little for a cut: take the room
            target = room
            cut = cutter(unit, room)
        if cut is None:
            decided.append(drop_decisions(unit, "budget"))
            continue
        if target < room:
            held_back.append(len(selection.kept))
        cuts[len(selection.kept)] = unit
        decided.append(len(selection.kept))
        selection.kept.append(cut)
        room -= cut.tokens
    if cutter is not None:
        _widen(selection.kept, cuts, held_back, room, cutter)
    for entry in decided:
        selection.decisions.extend(entry if isinstance(entry, list)
                                   else cut_decisions(cuts[entry], selection.kept[entry]))
    return selection


def _widen(kept: list[Unit], cuts: dict[int, Unit], held_back: list[int], room: int,
           cutter: Cutter) -> None:
    """Give ``room`` back to the units the cap cut short, best first."""
    for place in held_back:
        if room <= 0:
            break
        wider = cutter(cuts[place], kept[place].tokens + room)
        if wider is not None and kept[place].tokens < wider.tokens <= kept[place].tokens + room:
            room -= wider.tokens - kept[place].tokens
            kept[place] = wider


def _select_contiguous(units: list[Unit], grant: int, partial_rounds: PartialRounds,
                       cutter: Cutter | None, unit_cap: int | None) -> Selection:
    selection = Selection()
    room = grant
    index = 0
    while index < len(units):
        round_units = _same_round(units, index)
        if unit_cap is not None and cutter is not None and any(
                u.tokens > unit_cap for u in round_units):
            round_units = [_capped(u, unit_cap, cutter, selection) for u in round_units]
        tokens = sum(u.tokens for u in round_units)
        if tokens <= room:  # the common case, decided without another call
            selection.kept.extend(round_units)
            room -= tokens
            index += len(round_units)
            continue
        fitted = _fit_round(round_units, room, grant, cutter, selection)
        if fitted is not None:
            selection.kept.extend(fitted)
            room -= sum(u.tokens for u in fitted)
            index += len(round_units)
            continue
        if partial_rounds is True or (partial_rounds == "tool_rounds"
                                      and has_tool_activity(round_units)):
            index += _fill_partially(round_units, room, grant, cutter, selection)
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


def _fit_round(round_units: list[Unit], room: int, grant: int, cutter: Cutter | None,
               selection: Selection) -> list[Unit] | None:
    """The whole round, its biggest cuttable unit cut if needed; None if it cannot fit.

    A cut item takes at most half of the grant, so one huge tool result cannot push every
    older round out.
    """
    total = sum(u.tokens for u in round_units)
    if total <= room:
        return round_units
    if cutter is None:
        return None
    biggest = max(range(len(round_units)), key=lambda i: round_units[i].tokens)
    target = min(round_units[biggest].tokens - (total - room), grant // 2)
    cut = cutter(round_units[biggest], target) if target >= MIN_CUT_TOKENS else None
    if cut is None:
        return None
    selection.decisions.extend(cut_decisions(round_units[biggest], cut))
    return [cut if i == biggest else unit for i, unit in enumerate(round_units)]


def _same_round(units: list[Unit], start: int) -> list[Unit]:
    """The units from ``start`` that share its round (just that unit when it has no round)."""
    first = units[start]
    round_no = first.round
    if round_no is None:
        return [first]
    end, size = start + 1, len(units)
    while end < size and units[end].round == round_no:
        end += 1
    return units[start:end]


def _fill_partially(round_units: list[Unit], room: int, grant: int, cutter: Cutter | None,
                    selection: Selection) -> int:
    """Keep the newest units of a round that does not fit whole; returns how many were used."""
    taken = 0
    for unit in round_units:
        if unit.tokens <= room:
            selection.kept.append(unit)
            room -= unit.tokens
            taken += 1
            continue
        target = min(room, grant // 2)
        cut = cutter(unit, target) if cutter and target >= MIN_CUT_TOKENS else None
        if cut is not None:
            selection.kept.append(cut)
            selection.decisions.extend(cut_decisions(unit, cut))
            taken += 1
        break
    return taken


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
