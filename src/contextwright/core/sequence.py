"""Recalled turns that end up in their place are shown as plain history.

A source that recalls (``SourceTraits.recalls``: history) may offer an older turn out of order
with a marker line on its opening item, named by ``metadata["keep_head"]`` (so a cut keeps it
too). Whether the marker is needed is
only known after pruning: when every history message after the turn is kept as well, nothing was
left out between it and the recent rounds, so the turn simply reads in its place. This step drops
the marker line of such an item. It only removes text, so the budget still holds.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from contextwright.core.caches import BoundedCache, register_cache, text_bytes
from contextwright.core.cutting import KEEP_HEAD, split_head
from contextwright.core.gather import Costing, Gathered, Unit, cached_candidate
from contextwright.core.items import ContextItem
from contextwright.core.request import Request
from contextwright.core.select import Selection


def show_in_sequence(gathered: list[Gathered], selections: dict[str, Selection],
                     request: Request, costing: Costing) -> None:
    """Unmark the kept recalled turns that nothing left out follows, for each recalling source."""
    for g in gathered:
        where = g.traits.message_list
        if not g.traits.recalls or where is None or g.error is not None:
            continue
        selection = selections[g.spec.source]
        if not any(KEEP_HEAD in u.candidates[0].item.metadata for u in selection.kept):
            continue
        start = _kept_tail_start(selection, len(getattr(request, where)))
        selection.kept[:] = [_unmarked(u, costing) if _in_tail(u, start) else u
                             for u in selection.kept]


def _kept_tail_start(selection: Selection, size: int) -> int:
    """The first list position from which every message to the end is kept."""
    kept = {int(c.item.order) for u in selection.kept for c in u.candidates
            if c.item.order == int(c.item.order)}
    start = size
    while start > 0 and start - 1 in kept:
        start -= 1
    return start


def _in_tail(unit: Unit, start: int) -> bool:
    first = unit.candidates[0].item
    return KEEP_HEAD in first.metadata and first.order >= start


def _unmarked(unit: Unit, costing: Costing) -> Unit:
    first = unit.candidates[0]
    plain = cached_candidate(_plain_item(first.item), costing, first.tokens)
    return replace(unit, candidates=[plain, *unit.candidates[1:]], tokens=-1)


_PLAIN: BoundedCache[int, tuple[ContextItem, ContextItem]] = BoundedCache(
    "core.sequence.plain", max_entries=20_000, share=0.03,
    size=lambda _, entry: text_bytes(entry[1].message.content) + 600)
_PLAIN_LOCK = threading.Lock()


def _plain_item(item: ContextItem) -> ContextItem:
    """``item`` without its marker line.

    The same object for the same item, so its rendering is cached across builds like the
    marked one's.
    """
    with _PLAIN_LOCK:
        known = _PLAIN.get(id(item)) or _PLAIN.revive(id(item))
        if known is not None and known[0] is item:
            return known[1]
    _, body = split_head(item)
    metadata = {k: v for k, v in item.metadata.items() if k != KEEP_HEAD}
    if "recalled" in metadata:
        metadata["recalled"] = f"{metadata['recalled']}; in sequence, shown unmarked"
    plain = replace(item, message=replace(item.message, content=body), metadata=metadata)
    with _PLAIN_LOCK:
        _PLAIN.put(id(item), (item, plain))
    return plain


register_cache("core.sequence.plain", _PLAIN)
