"""Recalled turns that end up in their place are shown as plain history.

A source that recalls (``SourceTraits.recalls``: history) may offer an older turn out of order
with a marker line on its opening item, named by ``metadata["keep_head"]`` (so a cut keeps it
too). Whether the marker is needed is
only known after pruning: when every history message after the turn is kept as well, nothing was
left out between it and the recent rounds, so the turn simply reads in its place. This step drops
the marker line of such an item. It only removes text, so the budget still holds.

Before that, items that share a head line (``SharedHead``: recalled turns of one day, the day
said once) get its full form on the first of their group in reading order: the source put it
on the first it offered, which a better-ranked later turn may be. The two swap heads, which
moves text without adding any (a swap that would cost a token more is not made).
"""

from __future__ import annotations

import threading
from dataclasses import replace

from contextwright.core.caches import BoundedCache, register_cache, text_bytes
from contextwright.core.cutting import KEEP_HEAD, SHARED_HEAD, SharedHead, split_head
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
        _share_heads(selection, costing)
        start = _kept_tail_start(selection, len(getattr(request, where)))
        selection.kept[:] = [_unmarked(u, costing) if _in_tail(u, start) else u
                             for u in selection.kept]


def _share_heads(selection: Selection, costing: Costing) -> None:
    """Give each ``SharedHead`` group's full head to its first kept item in reading order."""
    groups: dict[str, list[int]] = {}
    for at, unit in enumerate(selection.kept):
        shared = unit.candidates[0].item.metadata.get(SHARED_HEAD)
        if isinstance(shared, SharedHead):
            groups.setdefault(shared.group, []).append(at)
    for members in groups.values():
        members.sort(key=lambda at: selection.kept[at].candidates[0].item.order)
        first = selection.kept[members[0]]
        holder = next((at for at in members if _head(selection.kept[at]) == _shared(
            selection.kept[at]).full), None)
        if holder is None or holder == members[0]:
            continue
        swapped = _with_head(first, _shared(first).full, costing), _with_head(
            selection.kept[holder], _shared(first).short, costing)
        if sum(u.tokens for u in swapped) <= first.tokens + selection.kept[holder].tokens:
            selection.kept[members[0]], selection.kept[holder] = swapped


def _shared(unit: Unit) -> SharedHead:
    shared = unit.candidates[0].item.metadata[SHARED_HEAD]
    assert isinstance(shared, SharedHead)
    return shared


def _head(unit: Unit) -> str:
    return str(unit.candidates[0].item.metadata.get(KEEP_HEAD, ""))


def _with_head(unit: Unit, head: str, costing: Costing) -> Unit:
    """``unit`` with its opening item's head line replaced by ``head``."""
    first = unit.candidates[0]
    item = _reheaded(first.item, head)
    moved = cached_candidate(item, costing, first.tokens + costing.tokenizer.count(head))
    return replace(unit, candidates=[moved, *unit.candidates[1:]], tokens=-1)


_REHEADED: BoundedCache[tuple[int, str], tuple[ContextItem, ContextItem]] = BoundedCache(
    "core.sequence.reheaded", max_entries=20_000, share=0.02,
    size=lambda _, entry: text_bytes(entry[1].message.content) + 600)


def same_but_head(one: ContextItem, other: ContextItem) -> None:
    """Note that ``one`` and ``other`` are one item with two head lines (``KEEP_HEAD``).

    A source that makes both forms of an item says so, and a head moved from one to the
    other (``_share_heads``) hands back the source's own object, whose rendering the builder
    already has, rather than a copy to render anew.
    """
    with _PLAIN_LOCK:
        _REHEADED.put((id(one), str(other.metadata.get(KEEP_HEAD, ""))), (one, other))
        _REHEADED.put((id(other), str(one.metadata.get(KEEP_HEAD, ""))), (other, one))


def _reheaded(item: ContextItem, head: str) -> ContextItem:
    """``item`` with ``head`` for its head line.

    The same object for the same item and head, so its rendering is cached across builds
    like the item's.
    """
    key = (id(item), head)
    with _PLAIN_LOCK:
        known = _REHEADED.get(key) or _REHEADED.revive(key)
        if known is not None and known[0] is item:
            return known[1]
    _, body = split_head(item)
    moved = replace(item, message=replace(item.message, content=head + body),
                    metadata={**item.metadata, KEEP_HEAD: head})
    with _PLAIN_LOCK:
        _REHEADED.put(key, (item, moved))
    return moved


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
register_cache("core.sequence.reheaded", _REHEADED)
