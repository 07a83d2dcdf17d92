"""The turn index of a request's history: ``TurnIndex`` fed from ``request.history``.

A history's turns are split and their texts built once, then extended as messages are appended,
so a build pays for the new messages only. The index assumes what agents do: history is
append-only. A message *replaced* by a different one is noticed (the turns are rebuilt); a
message dict edited in place after it was indexed is not.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
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
from contextwright.recall.turns import INDEX_LIMIT, TurnIndex, keep_bounded

RAW_BYTES = 120
"""What keeping one of the caller's messages costs an index: a list slot, and the message dict
itself once the caller has dropped its history (its text is counted with the turn's)."""

_INDEXES: GrowingCache[int, TurnIndex] = GrowingCache(
    "recall.history.indexes", max_entries=INDEX_LIMIT, share=0.25,
    size=lambda index: index.held)
"""Turn indexes of recent histories: at most ``INDEX_LIMIT`` of them and ``INDEX_MESSAGES``
messages, and a share of the process-wide cache budget in bytes (``set_cache_limits``)."""
_INDEX_LOCK = threading.Lock()


def turn_index(history: Sequence[Mapping[str, Any]]) -> TurnIndex:
    """The turn index of ``history``, extended by the messages appended since the last build.

    What is returned is a view for this build (``TurnIndex.view``): read it, do not extend it.

    Keyed by the history's first message object, so a session rebuilt into a new list each turn
    still hits. Every indexed message is checked before use: the index is kept only if the
    messages it was built from equal the history's first ones. That is one list comparison, which
    settles each message by identity in C and compares contents only where a message was
    replaced by another object (equal contents make the same turns).
    """
    if not history:
        return TurnIndex()
    key = id(history[0])
    with _INDEX_LOCK:
        index = _INDEXES.pop(key, None)  # put back last: the most recently used
        if index is None or not _starts_with(history, index.raws):
            index = TurnIndex()
        try:
            _extend(index, history)
        finally:  # put back (now sized anew) even when a bad message stopped the extension
            _INDEXES[key] = index
            keep_bounded(_INDEXES, lambda entry: len(entry.raws))
        return index.view()


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
    """Forget every turn index and recalled unit (tests, memory pressure)."""
    with _INDEX_LOCK:
        _INDEXES.clear()
    RECALLED_UNITS.clear()


register_cache("recall.history.recalled_units", RECALLED_UNITS)
register_clear("recall.history.indexes", _INDEXES, clear_recall_caches)
