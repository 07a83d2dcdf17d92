"""The turn index of a request's history: ``TurnIndex`` fed from ``request.history``.

A history's turns are split and their texts built once, then extended as messages are appended,
so a build pays for the new messages only. The index assumes what agents do: history is
append-only. A message *replaced* by a different one is noticed (the turns are rebuilt); a
message dict edited in place after it was indexed is not.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextwright.core.caches import (
    ENTRY_BYTES,
    GrowingCache,
    MappingCache,
    register_cache,
    register_clear,
    text_bytes,
)
from contextwright.core.items import Message, parse_fresh
from contextwright.recall import turns as _turns
from contextwright.recall.bm25 import clear_postings
from contextwright.recall.turns import INDEX_LIMIT, TurnIndex, keep_bounded

RAW_BYTES = 120
"""What keeping one of the caller's messages costs an index: a list slot, and the message dict
itself once the caller has dropped its history (its text is counted with the turn's)."""

BRANCHES = 64
"""Histories indexed at once per first message object. Sessions written as ``[SYSTEM, *messages]``
with one module-level system dict all start with the same object: each keeps its own index (up
to this many sessions at once; then the least recently used is dropped), instead of every build
of one re-indexing the whole history the other's build replaced. Most are told apart by one
message comparison (``_Branches.longest_prefix_of``)."""


@dataclass(slots=True, eq=False)
class _Branches:
    """The indexes of the histories that start with one message object, least recent first."""

    indexes: list[TurnIndex] = field(default_factory=list)

    @property
    def raws(self) -> list[object]:
        """The messages of the most recently used history (what the last build indexed)."""
        return self.indexes[-1].raws if self.indexes else []

    @property
    def held(self) -> int:
        """Approximate bytes of every index kept."""
        return sum(index.held for index in self.indexes)

    @property
    def messages(self) -> int:
        """Messages of every index kept."""
        return sum(len(index.raws) for index in self.indexes)

    def longest_prefix_of(self, history: Sequence[Mapping[str, Any]]) -> TurnIndex | None:
        """The index of the most messages that ``history`` starts with (None: none fits).

        A branch whose last indexed message is not the history's at that place is passed over
        at the cost of one comparison; only a candidate is checked whole (``_starts_with``).
        """
        size = len(history)
        newest_first = self.indexes[::-1]  # sorted keeps the order of equal lengths
        for index in sorted(newest_first, key=lambda known: -len(known.raws)):
            known = len(index.raws)
            if known > size:
                continue
            last = index.raws[known - 1] if known else None
            if known and not (last is history[known - 1] or last == history[known - 1]):
                continue
            if _starts_with(history, index.raws):
                return index
        return None

    def use(self, index: TurnIndex) -> None:
        """Make ``index`` the most recently used, dropping the least recent over ``BRANCHES``."""
        if any(known is index for known in self.indexes):
            self.indexes = [known for known in self.indexes if known is not index]
        self.indexes.append(index)
        del self.indexes[:-BRANCHES]


_INDEXES: GrowingCache[int, _Branches] = GrowingCache(
    "recall.history.indexes", max_entries=INDEX_LIMIT, share=0.25,
    size=lambda branches: branches.held)
"""Turn indexes of recent histories by their first message object: at most ``INDEX_LIMIT``
first messages and ``INDEX_MESSAGES`` messages, and a share of the process-wide index budget in
bytes (``set_cache_limits``)."""
_INDEX_LOCK = threading.Lock()


def turn_index(history: Sequence[Mapping[str, Any]]) -> TurnIndex:
    """The turn index of ``history``, extended by the messages appended since the last build.

    What is returned is a view for this build (``TurnIndex.view``): read it, do not extend it.
    It holds the turns of ``history`` and no other, whatever other builds index meanwhile: an
    index whose lists were handed out closes its next turn into new lists
    (``TurnIndex.shared``), so a view never grows.

    Keyed by the history's first message object, so a session rebuilt into a new list each turn
    still hits; histories that share it (a module-level system message) keep an index each
    (``BRANCHES``). Every indexed message is checked before use: an index is used only if the
    messages it was built from equal the history's first ones. That is one list comparison,
    which settles each message by identity in C and compares contents only where a message was
    replaced by another object (equal contents make the same turns).
    """
    if not history:
        return TurnIndex()
    key = id(history[0])
    with _INDEX_LOCK:
        branches = _INDEXES.pop(key, None)  # put back last: the most recently used
        if branches is None:
            branches = _Branches()
        index = branches.longest_prefix_of(history)
        if index is None:
            index = TurnIndex()
        branches.use(index)
        try:
            _extend(index, history)
        finally:  # put back (now sized anew) even when a bad message stopped the extension
            _INDEXES[key] = branches
            _keep_bounded(key, branches, index)
        index.shared = True  # the next turn closed goes into new lists: this view keeps its
        return index.view()


def _keep_bounded(key: int, branches: _Branches, index: TurnIndex) -> None:
    """Hold ``_INDEXES`` to its bounds; the index in use (``index``) is always kept.

    Other first messages' indexes go first (least recently used first), then this first
    message's other branches.
    """
    keep_bounded(_INDEXES, lambda entry: entry.messages)
    while len(branches.indexes) > 1 and (branches.messages > _turns.INDEX_MESSAGES
                                         or _INDEXES.bytes > _INDEXES.max_bytes):
        del branches.indexes[0 if branches.indexes[0] is not index else 1]
        _INDEXES.evictions += 1
        _INDEXES[key] = branches  # sized anew


def _starts_with(history: Sequence[Mapping[str, Any]], raws: list[object]) -> bool:
    """Whether ``history`` starts with the messages ``raws`` (each the same object, or equal).

    A list is compared whole, with its new messages appended to ``raws`` for the comparison and
    taken off again: copying a long history's prefix to compare it cost more than comparing.
    """
    known = len(raws)
    if known > len(history):
        return False
    if isinstance(history, list):
        raws.extend(history[known:])
        try:
            return raws == history
        finally:
            del raws[known:]
    prefix = history[:known]
    return raws == (prefix if isinstance(prefix, list) else list(prefix))


def _extend(index: TurnIndex, history: Sequence[Mapping[str, Any]]) -> None:
    # Parsed without the shared parse cache: indexing reads every message once, and a cached
    # parse costs a deep copy of the message (a third of a cold index) and a cache slot the
    # messages builds show again and again need. A turn recalled later is parsed, and then
    # remembered, when it is first rendered: a few messages, once.
    add, keep = index.add, index.raws.append
    known = len(index.raws)
    try:
        for position in range(known, len(history)):
            raw = history[position]
            add(parse_fresh(raw, f"history[{position}]"), position)
            keep(raw)
    finally:
        index.held += RAW_BYTES * (len(index.raws) - known)


_Unit = tuple[tuple[Message, ...], list[Any]]


def _unit_bytes(key: tuple[object, ...], unit: _Unit) -> int:
    # Each message's text twice (the parse and the item rendered from it), and the objects.
    messages, items = unit
    return sum(2 * text_bytes(message.content) + ENTRY_BYTES for message in messages) + (
        300 * len(items))


RECALLED_UNITS: MappingCache[tuple[object, ...], _Unit] = MappingCache(
    "recall.history.recalled_units", max_entries=20_000, share=0.05, size=_unit_bytes,
    pool="indexes")
"""Recalled turns as the history source rendered them into items, per turn and options (kept
here so ``clear_recall_caches`` forgets them with the indexes); bounded by entries and bytes."""


def clear_recall_caches() -> None:
    """Forget every turn index, recalled unit and lexical postings (tests, memory pressure)."""
    with _INDEX_LOCK:
        _INDEXES.clear()
    RECALLED_UNITS.clear()
    clear_postings()


register_cache("recall.history.recalled_units", RECALLED_UNITS)
register_clear("recall.history.indexes", _INDEXES, clear_recall_caches)
