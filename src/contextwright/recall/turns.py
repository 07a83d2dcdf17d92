"""The seam of recall (``RecallTurn``, ``TurnRecaller``) and the one incremental turn index.

A ``TurnIndex`` splits a message list into complete turns (a user message and everything up to
the next one) as messages are fed to it, one at a time, oldest first: a turn is built once,
when the next user message closes it, and never again. Two adapters feed it: the request's
history (``recall.history``, for ``HistorySource``) and a session's stored messages
(``manager.recall``, for ``ContextManager``).

Its state is plain data (turns of ints and strings, lists of ints) that only grows, so it can
be extended by appending, shared by readers holding a shorter prefix, and saved beside a session.
"""

from __future__ import annotations

import hashlib
import inspect
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from contextwright.compress.json_compact import compact_tool_result
from contextwright.core.caches import GrowingCache, text_bytes
from contextwright.core.items import Message
from contextwright.tokens import estimate_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallTurn:
    """One complete older turn (a user message and everything up to the next one)."""

    index: int
    """Position of the turn's first message in the indexed message list."""
    text: str
    """The turn's text: user and assistant content, tool calls, tool results compacted."""
    key: str
    """Stable identity (message id if present, else content hash), for caches across builds."""
    timestamp: str | None = None
    """When the turn was said: the first of its messages' timestamps, as the caller gave it
    (recallers index turns under its date, ``recall.dates``)."""


@runtime_checkable
class TurnRecaller(Protocol):
    """Ranks older turns by relevance to a query. Must be safe to call from many threads."""

    def rank(self, query: str, turns: Sequence[RecallTurn], *, limit: int
             ) -> list[tuple[int, float]]:
        """(position in ``turns``, score), best first, only turns above the relevance threshold."""
        ...


def rank_turns(recaller: TurnRecaller, query: str, turns: Sequence[RecallTurn], *, limit: int,
               now: str | None) -> list[tuple[int, float]]:
    """``recaller.rank``, told when ``query`` is asked (``now``) if its ``rank`` takes it.

    "What did I say yesterday?" names no date; asked on 8 May it means 7 May. The shipped
    recallers take ``now`` (an ISO 8601 timestamp); a user's recaller, or a subclass whose
    ``rank`` has the protocol's signature, is asked as the protocol says.
    """
    ranked: list[tuple[int, float]] = _ask(recaller, "rank", query, turns, limit, now)
    return ranked


def turn_focus(recaller: TurnRecaller, query: str, turns: Sequence[RecallTurn], *, limit: int,
               now: str | None) -> float | None:
    """How focused ``query``'s recall is, from 0 to 1, if ``recaller`` can say (a ``focus``).

    None when it cannot (a user's recaller, the hybrid one) or the query has nothing to match:
    a stable-prefix build then treats the input as focused, as it did before recallers could
    tell (see ``LexicalTurnRecaller.focus``).
    """
    if not callable(getattr(recaller, "focus", None)):
        return None
    focus: float | None = _ask(recaller, "focus", query, turns, limit, now)
    return focus


def _ask(recaller: TurnRecaller, method: str, query: str, turns: Sequence[RecallTurn],
         limit: int, now: str | None) -> Any:
    """``recaller.<method>(query, turns, limit=...)``, with ``now`` if the method takes it."""
    call: Callable[..., Any] = getattr(recaller, method)
    if now is not None and _takes_now(recaller, method):
        return call(query, turns, limit=limit, now=now)
    return call(query, turns, limit=limit)


def _takes_now(recaller: TurnRecaller, method: str) -> bool:
    """Whether ``recaller.<method>`` has a ``now`` keyword (read off its code, not called)."""
    code = getattr(getattr(type(recaller), method, None), "__code__", None)
    if code is None:
        return False
    keywords = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    return "now" in keywords or bool(code.co_flags & inspect.CO_VARKEYWORDS)


def asked_at(*messages: Sequence[Mapping[str, Any]], scan: int = 64) -> str | None:
    """When a request is asked, as far as its messages tell it.

    The newest timestamp among the last ``scan`` messages of each list (the turn's, then the
    history's), else None.
    """
    for listed in messages:
        for raw in reversed(listed[-scan:]):
            stamp = raw.get("timestamp") if isinstance(raw, Mapping) else None
            if isinstance(stamp, str) and stamp:
                return stamp
    return None


TurnKey = Callable[[int, Sequence[Message], str], str]
"""A turn's key from its start position, its messages and its text."""


def content_key(start: int, messages: Sequence[Message], text: str) -> str:
    """The first message's id, else a hash of the turn's text."""
    first_id = messages[0].id
    return first_id if first_id is not None else hashlib.blake2b(
        text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


class Lineage:
    """What the turn lists of one index have in common: the lists it copies keep it.

    A recaller that keeps postings per turn list keys them by it, so the copies an index hands
    to later builds (``Turns.grown``) extend the same postings; it is referenced weakly there,
    and goes when the index and every build's copy have gone.
    """

    __slots__ = ("__weakref__",)


class Turns(list[RecallTurn]):
    """The turn list of a ``TurnIndex``: a ``list`` that knows its ``lineage``.

    Every list of one lineage holds the same turns at the positions it shares with another
    (a copy is only ever extended), so what is known of one list's first n turns holds for
    any other's.
    """

    __slots__ = ("__weakref__", "lineage")

    def __init__(self, turns: Iterable[RecallTurn] = (), lineage: Lineage | None = None) -> None:
        super().__init__(turns)
        self.lineage = lineage if lineage is not None else Lineage()

    def grown(self) -> Turns:
        """A copy to extend, of the same lineage (readers of this list keep it as it is)."""
        return Turns(self, self.lineage)


def lineage_of(turns: Sequence[RecallTurn]) -> Lineage | None:
    """The lineage of an index's turn list (None for any other sequence)."""
    return turns.lineage if isinstance(turns, Turns) else None


@dataclass(slots=True)
class TurnIndex:
    """The complete turns of one message list, built as messages are fed (``add``)."""

    turns: list[RecallTurn] = field(default_factory=Turns)
    """Complete turns, oldest first; a list that only grows while the history only grows."""
    ends: list[int] = field(default_factory=list)
    """One past the last message of each turn."""
    tokens: list[int] = field(default_factory=list)
    """Estimated tokens of each turn's text (for sharing the budget, not for counting it)."""
    calls_after: list[int] = field(default_factory=list)
    """Tool-call blocks before each turn's end (turned into "after" with ``calls``)."""
    calls: int = 0
    """Tool-call blocks in the indexed messages, the open turn's included."""
    raws: list[object] = field(default_factory=list)
    """The message objects fed so far, when the adapter keeps them (identity-checked by the
    request-history adapter on every use)."""
    open_start: int | None = None
    """Where the newest, still open turn begins (None before the first user message)."""
    open_messages: list[Message] = field(default_factory=list)
    """The open turn's messages, parsed (each message is parsed once, when it is fed)."""
    key: TurnKey = content_key
    """How a closed turn is keyed."""
    held: int = 0
    """Approximate bytes the index holds (its turns, and what adapters add for the messages
    they keep), for the byte bound of the caches that keep indexes."""
    shared: bool = False
    """Views of the lists were handed to readers that others may not wait for: the next turn
    closed goes into copies (``unshare``). Set by the adapter that hands them out."""

    def calls_newer_than(self, position: int) -> int:
        """Tool-call blocks after the end of ``turns[position]``."""
        return self.calls - self.calls_after[position]

    def may_hold_calls(self, position: int) -> bool:
        """Whether ``turns[position]`` may hold tool calls (False: it surely holds none).

        The first turn also counts the calls of any messages before it.
        """
        before = self.calls_after[position - 1] if position else 0
        return self.calls_after[position] > before

    def add(self, message: Message, position: int) -> None:
        """Feed the next message, at ``position``; a user message closes the open turn."""
        if message.role == "user":
            self.close(position)
            self.open_start, self.open_messages = position, []
        if message.tool_calls:
            self.calls += 1
        if self.open_start is not None:
            self.open_messages.append(message)

    def close(self, end: int) -> None:
        """Close the open turn, if any, at ``end`` (one past its last message)."""
        start, messages = self.open_start, self.open_messages
        if start is None:
            return
        if self.shared:
            self.unshare()
        text = turn_text(messages)
        key = self.key(start, messages, text)
        stamp = next((message.timestamp for message in messages if message.timestamp), None)
        self.turns.append(RecallTurn(index=start, text=text, key=key, timestamp=stamp))
        self.held += text_bytes(text) + len(key) + TURN_BYTES
        self.ends.append(end)
        self.tokens.append(estimate_tokens(text))
        self.calls_after.append(self.calls)
        self.open_start, self.open_messages = None, []

    def view(self, *, extra_calls: int = 0) -> TurnIndex:
        """The index as of now, for one reader: its lists, its own call count.

        The lists are shared, not copied: an adapter that lets other readers extend the index
        while this one reads marks it ``shared``, and the index closes its next turn into new
        lists (``unshare``), so this reader's stay as they were; one that extends under a lock
        its readers hold (the manager's session index) extends them in place.
        ``extra_calls``: call blocks after the indexed messages that age its turns' tool
        results too. The adapter's ``raws`` stay with it.
        """
        return TurnIndex(turns=self.turns, ends=self.ends, tokens=self.tokens,
                         calls_after=self.calls_after, calls=self.calls + extra_calls,
                         key=self.key)

    def unshare(self) -> None:
        """Give the index copies of its lists before they change, for views handed out.

        A build reads its view while another build (of a longer history with the same first
        messages) extends the index: the reader keeps the lists it was given, whole and
        unchanging, and ranks, recalls and counts only the turns of its own history. The turn
        list keeps its lineage (``Turns.grown``), so a recaller's postings of it are extended,
        not rebuilt.
        """
        turns = self.turns
        self.turns = turns.grown() if isinstance(turns, Turns) else Turns(turns)
        self.ends, self.tokens = self.ends.copy(), self.tokens.copy()
        self.calls_after = self.calls_after.copy()
        self.shared = False


def turn_text(messages: Sequence[Message]) -> str:
    """What a recaller reads of a turn: contents, calls with arguments, compacted results."""
    parts = []
    for message in messages:
        if message.role == "tool":
            parts.append(compact_tool_result(message.name, message.content) or message.content)
            continue
        if message.content:
            parts.append(message.content)
        parts.extend(f"{call.name} {call.arguments}" for call in message.tool_calls)
    return "\n".join(parts)


DEFAULT_RECALL_LIMIT = 400
"""Turns recalled at most per call unless a plan's ``recall_limit`` or a mode's ``recall``
says otherwise: the share of the budget is what bounds what is shown, the count only the
work (a default of 8 once gave a plan that set only its share a handful of turns)."""
TURN_BYTES = 400
"""What one turn costs an index besides its text and key: its ``RecallTurn``, key and text
objects, four list slots and ints (measured with ``tracemalloc``, rounded up)."""

_Sized = TypeVar("_Sized")
INDEX_LIMIT = 1_000
"""At most this many histories are indexed at once (least recently used dropped first) ..."""
INDEX_MESSAGES = 500_000
"""... and their messages together at most this many (an index holds its turns' text), so a
server seeing many long sessions keeps a bounded index, not one per session ever seen."""


def keep_bounded(cache: OrderedDict[Any, _Sized], size: Callable[[_Sized], int]) -> None:
    """Drop the least recently used entries (the front) until ``cache`` is within the limits.

    The limits are ``INDEX_LIMIT`` entries and ``INDEX_MESSAGES`` of what ``size`` counts,
    and, for a ``GrowingCache``, its byte bound (a share of the process-wide cache budget).
    The newest entry (the back) is always kept, however large.
    """
    total = sum(size(entry) for entry in cache.values())
    while len(cache) > 1 and (len(cache) > INDEX_LIMIT or total > INDEX_MESSAGES):
        _, dropped = cache.popitem(last=False)
        total -= size(dropped)
        if isinstance(cache, GrowingCache):
            cache.evictions += 1
    if isinstance(cache, GrowingCache):
        cache.trim()
