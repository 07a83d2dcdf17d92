"""Session-wide recall: older turns, no longer shown verbatim, brought back when relevant.

The manager shows the rounds after the running summary verbatim; older rounds live on in the
summary only. When the session's mode asks for recall, ``SessionHistorySource`` adds the older
turns a ``TurnRecaller`` ranks relevant to the user's text: whole turns (a user message through its
answer and tool pairs), verbatim, in their original order, before the recent rounds, marked as
recalled by ``HistorySource``'s own ``cached_recalled_items``.

The turns are indexed per session in this process (``RecallIndexes``): a derived cache, bounded
(least recently used sessions dropped first), extended with only the messages that passed the
summary boundary since it was last extended, and checked against the store on every use, so a
session erased and started again elsewhere is noticed and re-read. The store stays the only source
of truth. This module reads the store (as a step of the manager's flows); it never writes it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from contextwright.core.caches import GrowingCache, text_bytes
from contextwright.core.items import ContextItem, parse_message
from contextwright.core.plan import BuildPlan
from contextwright.core.request import Request
from contextwright.core.source import ContextSource, DigestingSource
from contextwright.modes.config import ModeSettings, RecallSettings
from contextwright.recall.interleave import Interleaving, Segment, interleave
from contextwright.recall.turns import TurnIndex, TurnKey, TurnRecaller
from contextwright.session import flow
from contextwright.session.flow import Flow
from contextwright.session.store import SessionKey, StoredMessage
from contextwright.sources.conversation import cached_recalled_items
from contextwright.tokens import estimate_tokens

logger = logging.getLogger("contextwright.session")

MAX_RECALL_SHARE = 0.9
"""As in ``HistorySource``: recalled turns never crowd out every recent round."""
MAX_INDEXED_SESSIONS = 1_000
"""Sessions indexed at most, whatever their size (the message bound usually binds first)."""
_PLACED_LIMIT = 4_096
MESSAGE_BYTES = 400
"""What one stored message costs an index besides its text: the decoded dict and its list
slot (its text is counted twice: the dict's and the turn's)."""


def session_recall(settings: ModeSettings, plan: BuildPlan) -> RecallSettings:
    """The recall a mode asks for: its own ``recall`` setting, else its plan's history options.

    A plan's ``recall_share`` ranks the rounds of the request; with a running summary those
    all fit, so the manager applies it session-wide instead. Without a summary the plan's recall
    stays with the rounds read (the manager's ``max_read_messages``) unless the mode sets
    ``recall`` itself.
    """
    if settings.recall is not None:
        return settings.recall
    spec = plan.spec("history")
    if spec is None or not settings.enable_summary:
        return RecallSettings()
    share = float(spec.options.get("recall_share", 0) or 0)
    return RecallSettings(share=min(share, MAX_RECALL_SHARE),
                          limit=int(spec.options.get("recall_limit", 8)))


def recall_tokens(plan: BuildPlan, recall: RecallSettings) -> int:
    """Estimated tokens recalled turns may take: ``share`` of history's nominal budget share."""
    spec = plan.spec("history")
    if spec is None or not recall.enabled:
        return 0
    total = sum(s.weight for s in plan.sources) or 1.0
    nominal = plan.budget.available * spec.weight / total
    if spec.max_tokens is not None:
        nominal = min(nominal, spec.max_tokens)
    return int(min(recall.share, MAX_RECALL_SHARE) * nominal)


# --------------------------------------------------------------------------- the index


@dataclass(slots=True)
class SessionTurns:
    """One session's messages before the verbatim window, split into complete turns.

    Lists only grow (appended under ``lock``), so a reader holding this object sees a consistent
    prefix; a session found replaced gets a new ``SessionTurns`` rather than an edited one.
    """

    tag: str
    """Identity of this incarnation of the session (part of each turn's recaller key)."""
    messages: list[Mapping[str, Any]] = field(default_factory=list)
    """The stored message dicts; ``messages[i]`` has seq ``i + 1``."""
    index: TurnIndex = field(default_factory=TurnIndex)
    """Complete turns over ``messages`` (positions are seq - 1), as ``HistorySource`` keeps them."""
    next_message: tuple[float, Mapping[str, Any]] | None = None
    """(created_at, message) of the message after ``messages`` when last read: it must read the
    same next time, or the session was replaced."""
    placed: dict[tuple[int, int], tuple[list[ContextItem], list[ContextItem]]] = field(
        default_factory=dict)
    """Recalled items as placed before a window starting at a position, per item list."""
    last_ranking: tuple[tuple[str, int, int], list[tuple[int, float]]] | None = None
    """(query, turns, limit) and the recaller's answer: an agent loop prepares the same turn
    again after each tool result, and the ranking cannot have changed."""
    lock: threading.Lock = field(default_factory=threading.Lock)


class StaleIndex(Exception):
    """The store no longer holds what the index was built from (erased, expired, replaced)."""


def _tag(key: SessionKey, first: StoredMessage) -> str:
    # Deterministic, so an index dropped from the cache and rebuilt finds a hybrid recaller's
    # vectors again; the first message's time tells a session started again apart.
    text = f"{key.user_id}\x00{key.session_id}\x00{first.created_at!r}"
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def _check_next(turns: SessionTurns, stored: StoredMessage) -> None:
    if turns.next_message is not None and turns.next_message != (stored.created_at,
                                                                  stored.message):
        raise StaleIndex


def _extend(turns: SessionTurns, new: Sequence[StoredMessage]) -> None:
    """Feed ``new`` to the session's turn index and close the turn it ends with.

    ``new`` is gap-free, starts right after ``messages`` and ends before a user message.
    """
    index = turns.index
    if index.open_start is not None:  # the region always ends before a user message
        raise AssertionError("an indexed session ends inside a turn")
    closed = len(index.turns)
    for stored in new:
        index.add(parse_message(stored.message, f"session[seq {stored.seq}]"), stored.seq - 1)
        turns.messages.append(stored.message)
    index.close(len(turns.messages))
    index.held += MESSAGE_BYTES * len(new) + sum(
        text_bytes(turn.text) for turn in index.turns[closed:])


def _session_key(tag: str) -> TurnKey:
    """Turns keyed by the session's incarnation and seq.

    A hybrid recaller then finds its vectors again after the index is rebuilt.
    """
    return lambda start, messages, text: f"{tag}:{start + 1}"


class RecallIndexes:
    """The turn indexes of recently served sessions, bounded by the messages they hold."""

    def __init__(self, max_messages: int) -> None:
        """Keep at most about ``max_messages`` indexed messages (the newest session always)."""
        self._max_messages = max_messages
        self._entries: GrowingCache[SessionKey, SessionTurns] = GrowingCache(
            "manager.recall.sessions", max_entries=MAX_INDEXED_SESSIONS, share=0.25,
            size=lambda turns: turns.index.held)
        self._lock = threading.Lock()

    def turns_before(self, key: SessionKey, begin: int, read: Sequence[StoredMessage]
                     ) -> Flow[SessionTurns | None]:
        """The session's turns before seq ``begin`` (a user message), caught up with the store.

        ``read`` is what the caller just read of the session's tail (it holds ``begin``);
        messages the index lacks come from it, or from one store read when it does not reach
        back far enough. None when the session changed under this call (an erase racing it).
        Indexing is CPU work under the session's lock, so it runs as a computation (on a
        worker thread under an event loop); the store read happens outside the lock.
        """
        for _ in range(2):  # a stale index is dropped and rebuilt once
            turns = self._entry(key)
            added = yield from flow.compute(partial(_catch_up, key, turns, begin, read, None))
            if isinstance(added, _NeedsRead):
                older = yield from flow.read(key, after=added.after)
                added = yield from flow.compute(partial(_catch_up, key, turns, begin, read,
                                                        older))
            if added is None or isinstance(added, _NeedsRead):
                self._replace(key, turns)
                continue
            if added:
                self._evict(key, turns)
            return turns
        logger.warning("recall skipped user=%s session=%s: the session changed while read",
                       key.user_id, key.session_id, extra={"contextwright": {
                           "event": "recall_skipped", "user_id": key.user_id,
                           "session_id": key.session_id}})
        return None

    def forget(self, user_id: str, session_id: str | None = None) -> None:
        """Drop the index of one session, or of every session of ``user_id``."""
        with self._lock:
            for key in [k for k in self._entries if k.user_id == user_id and (
                    session_id is None or k.session_id == session_id)]:
                del self._entries[key]

    def _entry(self, key: SessionKey) -> SessionTurns:
        with self._lock:
            turns = self._entries.get(key)
            if turns is None:
                turns = self._entries[key] = SessionTurns(tag="")
            self._entries.move_to_end(key)
            return turns

    def _replace(self, key: SessionKey, stale: SessionTurns) -> None:
        with self._lock:
            if self._entries.get(key) is stale:
                del self._entries[key]

    def _evict(self, keep: SessionKey, grown: SessionTurns) -> None:
        """Drop the least recently used sessions while over the bounds; ``keep`` stays.

        ``grown`` (the entry of ``keep`` that was just extended) is put back, so it is sized
        anew and is the newest: the byte bound never drops it.
        """
        with self._lock:
            if self._entries.get(keep) is grown:
                self._entries[keep] = grown
            held = sum(len(t.messages) for t in self._entries.values())
            while len(self._entries) > 1 and (held > self._max_messages
                                              or len(self._entries) > MAX_INDEXED_SESSIONS):
                oldest = next(iter(self._entries))
                if oldest == keep:
                    self._entries.move_to_end(keep)
                    continue
                dropped = self._entries.pop(oldest)
                held -= len(dropped.messages) if dropped is not None else 0
            self._entries.trim()


@dataclass(frozen=True, slots=True)
class _NeedsRead:
    """The tail the caller read does not reach back to the index's end: read after ``after``."""

    after: int


def _catch_up(key: SessionKey, turns: SessionTurns, begin: int, read: Sequence[StoredMessage],
              older: Sequence[StoredMessage] | None) -> int | _NeedsRead | None:
    """Extend ``turns`` to every message before seq ``begin``; how many messages were added.

    ``older`` is a read of the session after the index's end, if ``read`` was not enough (else
    ``_NeedsRead`` says from where). None: the index is stale (the session was replaced).
    """
    with turns.lock:
        try:
            return _extend_to(key, turns, begin, read, older)
        except StaleIndex:
            return None


def _extend_to(key: SessionKey, turns: SessionTurns, begin: int,
               read: Sequence[StoredMessage], older: Sequence[StoredMessage] | None
               ) -> int | _NeedsRead:
    upto = len(turns.messages)
    if begin - 1 < upto:
        raise StaleIndex  # the verbatim window never moves back in one session
    if begin - 1 == upto:
        _check_next(turns, _at(read, begin))
        turns.next_message = _next(read, begin)
        return 0
    # The index may have grown since ``older`` was read (after an earlier end): it only grows,
    # so what ``older`` holds past the current end is still what the index lacks.
    source = read if read and read[0].seq <= upto + 1 else older
    if source is None:
        return _NeedsRead(after=upto)
    new = [stored for stored in source if upto < stored.seq < begin]
    if len(new) != begin - 1 - upto or new[0].seq != upto + 1:
        raise StaleIndex  # not gap-free: the session changed between the two reads
    _check_next(turns, new[0])
    if not turns.tag:  # the first extension starts at seq 1
        turns.tag = _tag(key, new[0])
        turns.index.key = _session_key(turns.tag)
    _extend(turns, new)
    turns.next_message = _next(read, begin)
    return len(new)


def _at(read: Sequence[StoredMessage], seq: int) -> StoredMessage:
    found = next((stored for stored in read if stored.seq == seq), None)
    if found is None:
        raise StaleIndex
    return found


def _next(read: Sequence[StoredMessage], begin: int) -> tuple[float, Mapping[str, Any]]:
    stored = _at(read, begin)
    return stored.created_at, stored.message


# --------------------------------------------------------------------------- the source


class SessionHistorySource:
    """History for one prepared call: the request's rounds, with relevant older turns recalled.

    Wraps the history source the manager would use (``history``) and interleaves recalled turns
    into its newest-first stream the way ``HistorySource`` does, after the newest ``anchor``
    rounds (the mode's window; the plan's ``recent_rounds`` if more): at a round boundary, a
    recalled turn is offered while recalled turns hold less than ``share`` of the (estimated)
    tokens offered so far, so whatever prefix the budget keeps is about that share recalled. In
    all, recalled turns take at most about ``max_tokens`` (``recall_tokens``: ``share`` of
    history's share of the budget) and at most ``limit`` turns. A recalled turn is placed before
    the request's history (negative order, so it is never taken for one of the request's
    messages, read or unread), keyed ``history.recalled.m<seq - 1>``, and its report reason
    names its seqs.
    """

    namespace = "history"

    def __init__(self, *, history: ContextSource, turns: SessionTurns, recaller: TurnRecaller,
                 recall: RecallSettings, max_tokens: int, begin: int, recent_calls: int,
                 anchor: int) -> None:
        """``begin``: seq of the first message of the request's history."""
        self._anchor = anchor
        self._history = history
        self._turns = turns
        self._recaller = recaller
        self._share = min(recall.share, MAX_RECALL_SHARE)
        self._limit = recall.limit
        self._max_tokens = max_tokens
        self._offset = begin - 1
        self._recent_calls = recent_calls

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """The wrapped stream, with recalled turns offered at round boundaries."""
        ranked = self._ranked(request.user_input)
        if not ranked:
            yield from self._history.build(request, options)
            return
        index = self._index(options)
        old = Request(user_input=request.user_input, history=self._turns.messages)
        segments = (Segment((item,), estimate_tokens(item.message.content) + 4,
                            bool(item.round_start))
                    for item in self._history.build(request, options))
        rule = Interleaving(share=self._share, max_tokens=self._max_tokens,
                            anchor=max(self._anchor, int(options.get("recent_rounds", 0) or 0)))
        yield from interleave(segments, ranked, index, rule, recalled=lambda position, score:
                              self._placed(old, options, index, position, score))

    def digest(self, request: Request, options: Mapping[str, Any],
               kept: Sequence[ContextItem], max_tokens: int,
               cost: Callable[[ContextItem], int]) -> ContextItem | None:
        """The wrapped source's digest of what was left out (recalled turns count as shown)."""
        if isinstance(self._history, DigestingSource):
            return self._history.digest(request, options, kept, max_tokens, cost)
        return None

    def _ranked(self, query: str) -> list[tuple[int, float]]:
        turns = self._turns
        with turns.lock:  # the recaller extends its own index from this growing list
            asked = (query, len(turns.index.turns), self._limit)
            if turns.last_ranking is not None and turns.last_ranking[0] == asked:
                ranked = turns.last_ranking[1]
            else:
                ranked = self._recaller.rank(query, turns.index.turns, limit=self._limit)
                turns.last_ranking = (asked, ranked)
            ends = turns.index.ends
            # Another thread may have indexed past this call's window: never recall what the
            # request shows.
            return [(p, score) for p, score in ranked if ends[p] <= self._offset]

    def _index(self, options: Mapping[str, Any]) -> TurnIndex:
        """The index as ``cached_recalled_items`` reads it.

        With tool tiers on, a recalled turn's results are as old as the call blocks after it,
        the request's included.
        """
        index = self._turns.index
        if not options.get("tool_full") or not self._recent_calls:
            return index
        return index.view(extra_calls=self._recent_calls)

    def _placed(self, old: Request, options: Mapping[str, Any], index: TurnIndex,
                position: int, score: float) -> list[ContextItem]:
        """One recalled turn's items, keyed apart from the request's and ordered before them."""
        items = cached_recalled_items(old, options, index, position, score)
        cache_key = (id(items), self._offset)
        cached = self._turns.placed.get(cache_key)
        if cached is not None and cached[0] is items:
            return cached[1]
        turn, end = index.turns[position], index.ends[position]
        reason = (f"recalled: older turn relevant to the input, no longer shown verbatim "
                  f"(score {score:.2f}, seq {turn.index + 1}-{end})")
        placed = [replace(
            item, key=f"history.recalled.{item.key.removeprefix('history.')}",
            order=item.order - self._offset, group=f"session-{item.group}",
            metadata={**item.metadata, "recalled": reason} if "recalled" in item.metadata
            else item.metadata) for item in items]
        if len(self._turns.placed) >= _PLACED_LIMIT:
            self._turns.placed.clear()
        self._turns.placed[cache_key] = (items, placed)
        return placed
