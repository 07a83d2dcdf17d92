"""Recalled turns that end up in their place are shown as plain history.

A history source may offer an older turn out of order (recall) with a marker on its opening
item, and the unmarked item as ``metadata["in_sequence"]``. Whether the marker is needed is only
known after pruning: when every history message after the turn is kept as well, nothing was left
out between it and the recent rounds, so the turn simply reads in its place. This step swaps
such an item for its unmarked form. The swap only removes text, so the budget still holds.
"""

from __future__ import annotations

from dataclasses import replace

from contextwright.core.gather import Candidate, Costing, Gathered, Unit, cached_candidate
from contextwright.core.request import Request
from contextwright.core.select import Selection

IN_SEQUENCE = "in_sequence"
"""Metadata key of an item's form for when it turns out to be in sequence."""


def show_in_sequence(gathered: list[Gathered], selections: dict[str, Selection],
                     request: Request, costing: Costing) -> None:
    """Unmark the history source's kept recalled turns that nothing kept-out follows."""
    for g in gathered:
        if g.spec.source != "history" or g.error is not None:
            continue
        selection = selections[g.spec.source]
        if not any(IN_SEQUENCE in u.candidates[0].item.metadata for u in selection.kept):
            continue
        start = _kept_tail_start(selection, len(request.history))
        selection.kept[:] = [_unmarked(u, costing) if _in_tail(u, start) else u
                             for u in selection.kept]


def _kept_tail_start(selection: Selection, size: int) -> int:
    """The first history position from which every message to the end is kept."""
    kept = {int(c.item.order) for u in selection.kept for c in u.candidates
            if c.item.order == int(c.item.order)}
    start = size
    while start > 0 and start - 1 in kept:
        start -= 1
    return start


def _in_tail(unit: Unit, start: int) -> bool:
    first = unit.candidates[0].item
    return IN_SEQUENCE in first.metadata and first.order >= start


def _unmarked(unit: Unit, costing: Costing) -> Unit:
    plain = unit.candidates[0].item.metadata[IN_SEQUENCE]
    first: Candidate = cached_candidate(plain, costing, unit.candidates[0].tokens)
    return replace(unit, candidates=[first, *unit.candidates[1:]], tokens=-1)
