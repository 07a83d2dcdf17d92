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
of truth for the messages. A store that keeps indexes (``IndexStore``: every shipped backend) also
keeps this one beside the session, so a fresh worker loads a long session's turns and postings
instead of analysing every message again: each extension appends one part (its turns' texts and
postings, ``encode_part``), never rewriting the parts before it, and the parts go with the session
when it is erased. Workers serving one session each append the range they indexed, so parts
may repeat or overlap one another: a worker loads the run of parts that reaches furthest from
the session's start, and writes no range the parts it read already reached. The parts hold no
messages: a worker that loaded them reads the messages of the turns it is about to show from
the store's log (``SessionHistorySource.unread_spans``, ``RecallIndexes.read_turns``). A part
that does not decode, has another format or analyzer, or does not fit the session is not used:
the turns are indexed from the messages (a warning says so) and the stored parts replaced.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import operator
import re
import threading
import zlib
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import repeat
from typing import Any, SupportsIndex, overload

from contextwright.analysis import analyzer
from contextwright.core.caches import GrowingCache, text_bytes
from contextwright.core.items import DETACHED_ORDER, ContextItem, detached, parse_message
from contextwright.core.plan import BuildPlan
from contextwright.core.request import Request
from contextwright.core.source import ContextSource, DigestingSource, traits_of
from contextwright.errors import StoreError
from contextwright.modes.config import ModeSettings, RecallSettings
from contextwright.recall.bm25 import PackedPostings, TurnList, TurnPostings, forget_postings
from contextwright.recall.interleave import Interleaving, Segment, interleave
from contextwright.recall.lexical import DATED_TERMS, dated_term_counts
from contextwright.recall.turns import (
    DEFAULT_RECALL_LIMIT,
    TURN_BYTES,
    RecallTurn,
    TurnIndex,
    TurnKey,
    TurnRecaller,
    rank_turns,
    turn_focus,
)
from contextwright.session import flow
from contextwright.session.flow import Flow
from contextwright.session.store import SessionKey, StoredIndex, StoredMessage
from contextwright.sources.conversation import cached_recalled_items, calls_since_cut
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
SLOT_BYTES = 8
"""What one message a loaded index part covers costs before it is read (its list slot)."""


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
                          limit=int(spec.options.get("recall_limit", DEFAULT_RECALL_LIMIT)))


def recall_tokens(plan: BuildPlan, recall: RecallSettings,
                  filled: Callable[[str], bool] = lambda source: True) -> int:
    """Estimated tokens recalled turns may take: ``share`` of the budget history can reach.

    That is the plan's available budget (history's ``max_tokens`` if lower) less the weighted
    shares of the other cut sources that ``filled(source)`` says have something to show this
    call (documents, tools, the session's summary), not history's own weighted share: the
    sources a call leaves empty hand their grants to history at build time, and a weighted
    share left them unused (a chat at 8,000 tokens showed about 2,700). Recalled turns are
    offered after the request's own messages, so they only take room those leave, and what
    does not fit the grant is cut; the estimate bounds how many are ranked and rendered.
    """
    spec = plan.spec("history")
    if spec is None or not recall.enabled:
        return 0
    available = plan.budget.available
    total = sum(s.weight for s in plan.sources) or 1.0
    reach = float(available)
    for other in plan.sources:
        if other is spec or not other.cuttable or not filled(other.source):
            continue
        share = available * other.weight / total
        reach -= share if other.max_tokens is None else min(share, other.max_tokens)
    if spec.max_tokens is not None:
        reach = min(reach, spec.max_tokens)
    return int(min(recall.share, MAX_RECALL_SHARE) * max(reach, 0.0))


# --------------------------------------------------------------------------- the index


class UnreadMessage(LookupError):
    """A message a loaded index covers that has not been read from the store yet."""

    def __init__(self, position: int) -> None:
        super().__init__(f"message {position} of the session has not been read from the store")
        self.position = position


class SessionMessages(Sequence[Mapping[str, Any]]):
    """A session's messages before the verbatim window, as far as this process has read them.

    Messages fed from the store are held as they came (``append``). Messages a stored index
    part covers are not in the part: they are read from the store's log when a build is about
    to show their turn (``fill``), so a fresh worker loading a long session's index reads none
    of its older messages, and the store keeps each message once. Reading one not read yet
    raises ``UnreadMessage``. A message, once held, is the same object on every read (caches
    key on it).
    """

    __slots__ = ("_items", "_lock", "unread")

    def __init__(self) -> None:
        self._items: list[Mapping[str, Any] | None] = []
        """The messages; None where one has not been read yet."""
        self._lock = threading.Lock()
        self.unread = 0
        """Messages not read yet (0 once every one is: the usual case, checked first)."""

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, at: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, at: slice) -> list[Mapping[str, Any]]: ...

    def __getitem__(self, at: int | slice) -> Mapping[str, Any] | list[Mapping[str, Any]]:
        if isinstance(at, slice):
            return [self[i] for i in range(*at.indices(len(self._items)))]
        item = self._items[at]
        if item is None:
            raise UnreadMessage(at + len(self._items) if at < 0 else at)
        return item

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by content

    def append(self, message: Mapping[str, Any]) -> None:
        """Add one message, as read from the store."""
        self._items.append(message)

    def add_unread(self, count: int) -> None:
        """Add ``count`` messages that are in the store but not read yet."""
        self._items.extend([None] * count)
        self.unread += count

    def is_read(self, start: int, end: int) -> bool:
        """Whether every message in ``[start, end)`` is held."""
        return not self.unread or None not in self._items[start:end]

    def fill(self, start: int, messages: Sequence[Mapping[str, Any]]) -> int:
        """Hold ``messages`` from position ``start`` on; how many were not held before.

        A message already held keeps its object (an earlier read of the same log).
        """
        added = 0
        with self._lock:
            for at, message in enumerate(messages, start):
                if self._items[at] is None:
                    self._items[at] = message
                    added += 1
            self.unread -= added
        return added


@dataclass(slots=True)
class SessionTurns:
    """One session's messages before the verbatim window, split into complete turns.

    Lists only grow (appended under ``lock``), so a reader holding this object sees a consistent
    prefix; a session found replaced gets a new ``SessionTurns`` rather than an edited one.
    """

    tag: str
    """Identity of this incarnation of the session (part of each turn's recaller key)."""
    messages: SessionMessages = field(default_factory=SessionMessages)
    """The stored message dicts; ``messages[i]`` has seq ``i + 1``."""
    index: TurnIndex = field(default_factory=TurnIndex)
    """Complete turns over ``messages`` (positions are seq - 1), as ``HistorySource`` keeps them."""
    next_message: tuple[float, Mapping[str, Any]] | None = None
    """(created_at, message) of the message after ``messages`` when last read: it must read the
    same next time, or the session was replaced."""
    placed: dict[int, tuple[list[ContextItem], list[ContextItem]]] = field(
        default_factory=dict)
    """Recalled items as placed before the window (``DETACHED_ORDER``), per item list."""
    last_ranking: tuple[tuple[str, int, int, str | None], list[tuple[int, float]]] | None = None
    """(query, turns, limit) and the recaller's answer: an agent loop prepares the same turn
    again after each tool result, and the ranking cannot have changed."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    stored: StoredIndex | None = None
    """The store's parts of this index, read before the first extension and used by it."""
    epoch: str | None = None
    """The incarnation the stored parts belong to (None: the store keeps no index)."""
    persisted: int = 0
    """Messages the store's parts cover."""
    stored_to: int = 0
    """How far the store's parts reached when last read (another worker's parts may reach
    past this process's window): a part ending by then is not written again."""
    rewrite: bool = False
    """The stored parts are unusable: the next part written replaces them all."""
    fresh_terms: dict[str, None] = field(default_factory=dict)
    """The terms of the turns from position ``fresh_from`` on, in the order first met: the
    postings the next part stores, found without walking every term of a long session."""
    fresh_from: int = 0
    distrusted: bool = False
    """The stored parts did not fit the session's log: index the messages, never the parts."""


class LoadedTurns(TurnList):
    """A session's turn list whose turns loaded from stored parts are made when first read.

    A long session's parts hold tens of thousands of turns, and a build reads the few it
    ranks: making every ``RecallTurn`` when the parts load was the largest cost of the load,
    and so many new objects tracked by the garbage collector brought on full collections.
    Until made, a loaded turn's slot holds None; reading it (an index, a slice, iterating,
    comparing) makes it, once.
    """

    def __init__(self) -> None:
        super().__init__()
        self._firsts: list[int] = []
        """The position of each loaded run's first turn."""
        self._runs: list[tuple[Sequence[int], Sequence[str], Sequence[str | None], str]] = []
        """Each loaded run's starts, texts, timestamps and session tag."""
        self._lock = threading.Lock()

    def add_loaded(self, starts: Sequence[int], texts: Sequence[str],
                   stamps: Sequence[str | None], tag: str) -> None:
        """Append the turns a stored part describes, to be made when read."""
        self._firsts.append(len(self))
        self._runs.append((starts, texts, stamps, tag))
        self.extend([None] * len(starts))  # type: ignore[list-item]

    def _made(self, at: int) -> RecallTurn:
        run = bisect_right(self._firsts, at) - 1
        starts, texts, stamps, tag = self._runs[run]
        i = at - self._firsts[run]
        made = _stored_turn(starts[i], texts[i], f"{tag}:{starts[i] + 1}", stamps[i])
        with self._lock:  # two readers make one turn: the same object for both
            found = list.__getitem__(self, at)
            if found is None:
                list.__setitem__(self, at, made)
                return made
            return found

    @overload
    def __getitem__(self, at: SupportsIndex) -> RecallTurn: ...

    @overload
    def __getitem__(self, at: slice) -> list[RecallTurn]: ...

    def __getitem__(self, at: SupportsIndex | slice) -> RecallTurn | list[RecallTurn]:
        if isinstance(at, slice):
            return [self[i] for i in range(*at.indices(len(self)))]
        found = list.__getitem__(self, at)
        if found is None:
            position = at.__index__()
            return self._made(position + len(self) if position < 0 else position)
        return found

    def make_all(self) -> None:
        """Make every loaded turn not made yet (before the list is read as a plain list)."""
        if self._runs:
            for at in range(len(self)):
                if list.__getitem__(self, at) is None:
                    self._made(at)

    def __iter__(self) -> Iterator[RecallTurn]:
        return (self[at] for at in range(len(self)))

    def __reversed__(self) -> Iterator[RecallTurn]:
        return (self[at] for at in range(len(self) - 1, -1, -1))

    def __contains__(self, turn: object) -> bool:
        self.make_all()
        return list.__contains__(self, turn)

    def __eq__(self, other: object) -> bool:
        self.make_all()
        if isinstance(other, LoadedTurns):
            other.make_all()
        return list.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> list[RecallTurn]:
        """A plain list of every turn."""
        return list(self)

    def __add__(self, other: list[RecallTurn]) -> list[RecallTurn]:  # type: ignore[override]
        return [*self, *other]

    def index(self, turn: RecallTurn, *where: SupportsIndex) -> int:
        """As ``list.index``, every turn made first."""
        self.make_all()
        return list.index(self, turn, *where)

    def count(self, turn: RecallTurn) -> int:
        """As ``list.count``, every turn made first."""
        self.make_all()
        return list.count(self, turn)


def _new_session_turns() -> SessionTurns:
    return SessionTurns(tag="", index=TurnIndex(turns=LoadedTurns()))


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
    postings = _postings(turns)
    if postings is not None:  # kept for the store, and read by the lexical recaller
        before = postings.held
        counted = list(map(dated_term_counts, index.turns[len(postings):]))
        postings.add_all(counted)
        for counts in counted:  # postings are kept only for a store that keeps parts
            turns.fresh_terms.update(dict.fromkeys(counts))
        index.held += postings.held - before


def _carry_postings(turns: SessionTurns) -> None:
    """Keep postings with the session's turn list from now on (it is still empty)."""
    if isinstance(turns.index.turns, TurnList):
        turns.index.turns.postings = TurnPostings(terms=DATED_TERMS)


def _postings(turns: SessionTurns) -> TurnPostings | None:
    postings = getattr(turns.index.turns, "postings", None)
    return postings if isinstance(postings, TurnPostings) else None


# --------------------------------------------------------------------------- the stored index

INDEX_FORMAT = 5
"""Version of a stored part's layout; a part of another version is not used (it is rebuilt).
Format 2 added each turn's timestamp and date terms in the postings; format 3 the messages,
so a fresh worker reads none of the session's older messages; format 4 checks a part with a
CRC-32 rather than BLAKE2b; format 5 leaves the messages out again (a part of a long session
was 40% messages, a second copy of the log): a worker that loaded the parts reads the turns a
build shows from the log, by seq (``IndexStore.read_spans``)."""
_TERMS = analyzer("recall")
"""The lexical recaller's analyzer: stored postings are in its terms (and its date terms)."""


def _analyzer_fingerprint() -> str:
    # The configuration and what it makes of a probe text: postings analysed otherwise are
    # not used (a new stemmer or stop list changes one or the other).
    config = _TERMS.config
    probe = ("Painting paints painted shopping cities ORD-7731 nora_vance_5172 the THANKS "
             "上海的天气 东京 ok a-b x 12 ＲＴ２０２４")
    dated = RecallTurn(index=0, key="probe", timestamp="2023-05-08T13:56:00",
                       text="yesterday, last month, two weeks ago, on 3 June 2022, 上个月")
    described = [config.name, config.words, list(config.cjk), config.min_length,
                 config.identifiers, sorted(config.stopwords), config.stem.__qualname__,
                 sorted(_TERMS.term_counts(probe).items()), DATED_TERMS,
                 sorted(dated_term_counts(dated).items())]
    return hashlib.blake2b(json.dumps(described, ensure_ascii=True).encode(),
                           digest_size=8).hexdigest()


ANALYZER_FINGERPRINT = _analyzer_fingerprint()


class CorruptIndex(Exception):
    """A stored part does not decode or does not fit the session (why, in its message)."""


def _ints(values: Sequence[int]) -> str:
    return base64.b64encode(array("i", values).tobytes()).decode("ascii")


def _array(text: object, what: str) -> array[int]:
    if not isinstance(text, str):
        raise CorruptIndex(f"{what} is not text")
    values = array("i")
    try:
        values.frombytes(base64.b64decode(text.encode("ascii"), validate=True))
    except ValueError as exc:
        raise CorruptIndex(f"{what} does not decode") from exc
    return values


def encode_part(turns: SessionTurns) -> tuple[str, int] | None:
    """The part that stores what ``turns`` holds past the stored parts, and where it ends.

    None when there is nothing new. The turns' texts, positions, token estimates and call
    counts, their messages (one JSON text per turn, after those before the first turn), and
    the postings of their terms (``position << 3 | count``, as ``TurnPostings`` keeps them), in
    ASCII JSON after its checksum.
    """
    index, begin = turns.index, turns.persisted
    end = len(turns.messages)
    if end <= begin:
        return None
    first = bisect_left(index.turns, begin, key=lambda turn: turn.index)
    new = index.turns[first:]
    part: dict[str, Any] = {
        "format": INDEX_FORMAT, "analyzer": ANALYZER_FINGERPRINT, "tag": turns.tag,
        "begin": begin, "end": end, "first": first, "calls": index.calls,
        "starts": _ints([turn.index for turn in new]), "ends": _ints(index.ends[first:]),
        "tokens": _ints(index.tokens[first:]), "calls_after": _ints(index.calls_after[first:]),
        "texts": [turn.text for turn in new], "stamps": [turn.timestamp for turn in new]}
    postings = _postings(turns)
    if postings is not None and len(postings) == len(index.turns):
        part["postings"] = _encode_postings(
            postings, first, turns.fresh_terms if turns.fresh_from <= first else None)
    body = json.dumps(part, ensure_ascii=True, separators=(",", ":"))
    return f"{_digest(body)} {body}", end


CHECKSUM_DIGITS = 8
"""A part opens with its CRC-32 in this many hex digits, then a space, then its JSON."""


_JSON = json.JSONDecoder()


def _digest(body: str) -> str:
    # Damage anywhere in a part (a truncated write, a flipped byte) fails this check, not
    # just damage that breaks the JSON or the structure. A CRC finds such accidents (every
    # burst of up to 32 bits, all but 1 in 2**32 of the rest) at a fifth of a cryptographic
    # hash's cost, which a fresh worker pays on every byte of a long session's index; the
    # parts are no defence against whoever may write to the store, and need none.
    return f"{zlib.crc32(body.encode('ascii', 'replace')):08x}"


def _encode_postings(postings: TurnPostings, first: int,
                     fresh: Iterable[str] | None = None) -> dict[str, Any]:
    """The postings of the turns from position ``first`` on.

    ``fresh``: every term of those turns (a superset will do), if known; else every term is
    looked at, which in a long session costs far more than the few turns a part adds.
    """
    floor = first << 3
    terms, offsets, codes = [], [0], array("i")
    known = postings.postings
    for term, codes_of in (known.items() if fresh is None
                           else ((term, known[term]) for term in fresh if term in known)):
        if codes_of and codes_of[-1] >= floor:
            start = bisect_left(codes_of, floor)
            terms.append(term)
            codes.extend(codes_of[start:])
            offsets.append(len(codes))
    big = [[term, position, count] for (term, position), count in postings.big_counts.items()
           if position >= first]
    return {"terms": terms, "offsets": _ints(offsets),
            "codes": base64.b64encode(codes.tobytes()).decode("ascii"),
            "lengths": _ints(postings.lengths[first:]), "big": big}


def _decode_part(text: str, turns: SessionTurns, begin: int | None = None,
                 first: int | None = None) -> dict[str, Any]:
    """A stored part, checked against the session and the index it must follow.

    ``begin`` and ``first``: where the index ends (messages, turns), so where the part must
    begin (None: anywhere, as its own fields say).
    """
    # Read in place: a long session's part is tens of megabytes, and splitting off its body
    # would copy it once more.
    if text[CHECKSUM_DIGITS:CHECKSUM_DIGITS + 1] != " ":  # formats before 4: a 32-digit BLAKE2b
        raise CorruptIndex(f"a part does not open with a format {INDEX_FORMAT} checksum: "
                           "another version wrote it, or it is damaged")
    encoded = memoryview(text.encode("ascii", "replace"))
    if text[:CHECKSUM_DIGITS] != f"{zlib.crc32(encoded[CHECKSUM_DIGITS + 1:]):08x}":
        raise CorruptIndex("a part does not match its checksum")
    try:
        part, decoded_to = _JSON.raw_decode(text, CHECKSUM_DIGITS + 1)
    except (TypeError, ValueError, RecursionError) as exc:
        raise CorruptIndex("a part does not decode") from exc
    if decoded_to != len(text):
        raise CorruptIndex("a part has more after its JSON")
    if not isinstance(part, dict):
        raise CorruptIndex("a part is not an object")
    if part.get("format") != INDEX_FORMAT or part.get("analyzer") != ANALYZER_FINGERPRINT:
        raise CorruptIndex(f"a part has format {part.get('format')!r} or another analyzer "
                           f"(this version reads format {INDEX_FORMAT})")
    if not isinstance(part.get("tag"), str) or not part["tag"] or (
            turns.tag and part["tag"] != turns.tag):
        raise CorruptIndex("a part belongs to another incarnation of the session")
    begin = _place(part, begin, first)
    for name in ("starts", "ends", "tokens", "calls_after"):  # machine ints: no type to check
        part[name] = _array(part.get(name), name)
    starts, ends = part["starts"], part["ends"]
    count = len(starts)
    texts, stamps = part.get("texts"), part.get("stamps")
    if not (isinstance(texts, list) and isinstance(stamps, list)) or (
            not len(ends) == len(part["tokens"]) == len(part["calls_after"]) == len(texts)
            == len(stamps) == count):
        raise CorruptIndex("a part's turn lists are missing or differ in length")
    # json.loads makes exact ``str``s: the set of types is a check at C speed.
    if not ({*map(type, texts)} <= {str} and {*map(type, stamps)} <= {str, type(None)}):
        raise CorruptIndex("a part's texts or timestamps are malformed")
    end, calls = part.get("end"), part.get("calls")
    if not (isinstance(end, int) and isinstance(calls, int) and end >= begin):
        raise CorruptIndex("a part has values of the wrong type")
    # Turns tile the part after its first user message: each ends where the next starts.
    if count and (starts[0] < begin or ends[-1] != end or ends[:-1] != starts[1:]
                  or not all(map(operator.lt, starts, ends))):
        raise CorruptIndex("a part's turns are out of order or leave messages out")
    return part


def _place(part: dict[str, Any], begin: int | None, first: int | None) -> int:
    """The message ``part`` begins at: ``begin`` (with turn ``first``) when one is required."""
    if begin is not None:
        if part.get("begin") != begin or part.get("first") != first:
            raise CorruptIndex("the parts are not contiguous")
        return begin
    at, turn = part.get("begin"), part.get("first")
    if not (isinstance(at, int) and isinstance(turn, int) and min(at, turn) >= 0):
        raise CorruptIndex("a part has values of the wrong type")
    return at


def _load_part(turns: SessionTurns, part: dict[str, Any]) -> None:
    """Add a checked part's turns (and postings) to ``turns``; its messages stay unread."""
    if not turns.tag:  # the first part names the incarnation (as ``_tag`` made it)
        turns.tag = part["tag"]
        turns.index.key = _session_key(turns.tag)
    index, tag = turns.index, turns.tag
    begin, end = part["begin"], part["end"]
    count = len(part["starts"])
    postings = _postings(turns)
    if postings is not None:
        _load_postings(postings, part.get("postings"), part["first"], count)
    if not isinstance(index.turns, LoadedTurns):
        raise AssertionError("a session's turns are a LoadedTurns list")
    index.turns.add_loaded(part["starts"], part["texts"], part["stamps"], tag)
    index.ends.extend(part["ends"])
    index.tokens.extend(part["tokens"])
    index.calls_after.extend(part["calls_after"])
    index.calls = part["calls"]
    turns.messages.add_unread(end - begin)
    texts = part["texts"]
    index.held += (SLOT_BYTES * (end - begin) + 2 * sum(map(text_bytes, texts))
                   + count * (len(tag) + 8 + TURN_BYTES))


def _stored_turn(start: int, text: str, key: str, stamp: str | None) -> RecallTurn:
    """``RecallTurn(index=start, text=text, key=key, timestamp=stamp)``, made in half the time.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` after
    binding keywords; setting them directly is the same object, and a long session's index
    loads tens of thousands of turns. ``RecallTurn`` has no ``__post_init__`` to skip.
    """
    turn = _NEW_TURN(RecallTurn)
    _SET(turn, "index", start)
    _SET(turn, "text", text)
    _SET(turn, "key", key)
    _SET(turn, "timestamp", stamp)
    return turn


_NEW_TURN = object.__new__
_SET = object.__setattr__


def _load_postings(postings: TurnPostings, stored: object, first: int, count: int) -> None:
    if not isinstance(stored, dict):
        raise CorruptIndex("a part has no postings")
    terms, big = stored.get("terms"), stored.get("big")
    offsets = _array(stored.get("offsets"), "offsets")
    codes = _array(stored.get("codes"), "postings")
    lengths = _array(stored.get("lengths"), "lengths")
    if not isinstance(terms, list) or not isinstance(big, list) or len(offsets) != len(
            terms) + 1 or len(lengths) != count or len(postings) != first or (
            offsets and offsets[-1] != len(codes)):
        raise CorruptIndex("a part's postings do not fit its turns")
    if not {*map(type, terms)} <= {str} or len(set(terms)) != len(terms) or (
            not all(map(operator.lt, offsets, offsets[1:]))) or (offsets and offsets[0] != 0):
        raise CorruptIndex("a part's postings are malformed")
    # A term's postings ascend (the writer appends them in turn order): its first and last
    # bound them all, which is far cheaper than reading every posting.
    floor, ceiling = first << 3, (first + count) << 3
    if terms and (min(map(codes.__getitem__, offsets[:-1])) < floor
                  or max(map(codes.__getitem__, map(operator.sub, offsets[1:], repeat(1))))
                  >= ceiling):
        raise CorruptIndex("a part's postings point outside its turns")
    big_counts: dict[tuple[str, int], int] = {}
    for entry in big:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                and isinstance(entry[1], int) and isinstance(entry[2], int)):
            raise CorruptIndex("a part's large counts are malformed")
        big_counts[entry[0], entry[1]] = entry[2]
    # Checked before anything is added: a bad part leaves the index as it was.
    known = len(postings.postings)
    if not isinstance(postings.postings, PackedPostings):
        packed = PackedPostings()
        packed.update(postings.postings)
        postings.postings = packed
    postings.postings.add_block(terms, offsets, codes)
    postings.big_counts.update(big_counts)
    postings.lengths.extend(lengths)
    postings.total_length += sum(lengths)
    postings.held += 4 * (len(codes) + count) + 150 * len(big_counts) + 250 * (
        len(postings.postings) - known)


def _load_stored(key: SessionKey, turns: SessionTurns, limit: int) -> None:
    """Load the stored parts that tile the session up to message ``limit`` at most.

    ``turns.persisted``: where the loaded parts end; ``turns.stored_to``: where the stored
    parts reach. No message is read (the parts describe them). Workers serving one session
    each append a part for the range they indexed, so parts may repeat a range or overlap
    one: the loaded parts are the run from the session's start that reaches furthest, and a
    part that only repeats what they hold is passed over (checked to agree with them). The
    first part names the session's incarnation. A part that does not decode or does not fit
    is reported, and the stored parts are then replaced by the next write.
    """
    stored, turns.stored = turns.stored, None
    if stored is None or not stored.parts:
        return
    begin = reach = 0
    try:
        heads = [_head(text, turns) for text in stored.parts]
        if len({head.tag for head in heads}) > 1:
            raise CorruptIndex("a part belongs to another incarnation of the session")
        for at in _tiling(heads, limit):
            part = _decode_part(stored.parts[at], turns, begin, len(turns.index.turns))
            _load_part(turns, part)
            begin = part["end"]
        _check_repeats(turns.index, heads, begin)
        reach = max(begin, _reach(heads))
    except CorruptIndex as exc:
        _reset(turns)
        turns.rewrite = True
        logger.warning("recall index rebuilt user=%s session=%s: %s", key.user_id,
                       key.session_id, exc, extra={"contextwright": {
                           "event": "recall_index_rebuilt", "user_id": key.user_id,
                           "session_id": key.session_id, "reason": str(exc)}})
        return
    turns.persisted, turns.stored_to = begin, reach
    turns.fresh_from = len(turns.index.turns)  # the loaded turns' terms are stored already


@dataclass(frozen=True, slots=True)
class _Head:
    """Where a stored part sits in the session: its messages ``[begin, end)``, its first turn."""

    begin: int
    end: int
    first: int
    tag: str


_HEAD = re.compile(r'\{\s*"format"\s*:\s*(\d+)\s*,\s*"analyzer"\s*:\s*"([^"\\]*)"\s*,'
                   r'\s*"tag"\s*:\s*"([^"\\]+)"\s*,\s*"begin"\s*:\s*(\d+)\s*,'
                   r'\s*"end"\s*:\s*(\d+)\s*,\s*"first"\s*:\s*(\d+)\s*,')
"""The opening of a part as ``encode_part`` writes it: where it sits, read without decoding."""


def _head(text: str, turns: SessionTurns) -> _Head:
    """Where a stored part sits, read from its opening.

    A part passed over is then never decoded (a long session's part is tens of megabytes).
    An opening that does not read so (another layout, damage) is decoded and checked whole.
    """
    opens = text[CHECKSUM_DIGITS:CHECKSUM_DIGITS + 1] == " "
    found = _HEAD.match(text, CHECKSUM_DIGITS + 1) if opens else None
    if found is not None and int(found[1]) == INDEX_FORMAT and found[2] == ANALYZER_FINGERPRINT:
        begin, end, first = int(found[4]), int(found[5]), int(found[6])
        if end >= begin:
            return _Head(begin=begin, end=end, first=first, tag=found[3])
    part = _decode_part(text, turns)
    return _Head(begin=part["begin"], end=part["end"], first=part["first"], tag=part["tag"])


def _tiling(heads: Sequence[_Head], limit: int) -> list[int]:
    """The parts (positions in ``heads``) that tile the session from its start furthest.

    Each begins where the one before ends, and all end by message ``limit``. Of parts that
    reach as far, the one stored first is taken.
    """
    starting: dict[int, list[int]] = {}
    for at, head in enumerate(heads):
        if head.begin < head.end <= limit:
            starting.setdefault(head.begin, []).append(at)
    reach: dict[int, int] = {}
    step: dict[int, int] = {}
    for bound in sorted({0, *starting, *(heads[at].end for ats in starting.values()
                                          for at in ats)}, reverse=True):
        reach[bound] = bound
        for at in starting.get(bound, ()):
            if reach[heads[at].end] > reach[bound]:
                reach[bound], step[bound] = reach[heads[at].end], at
    tiling, bound = [], 0
    while bound in step:
        tiling.append(step[bound])
        bound = heads[step[bound]].end
    return tiling


def _reach(heads: Sequence[_Head]) -> int:
    """Where the stored parts reach, tiling the session from its start."""
    tiling = _tiling(heads, max((head.end for head in heads), default=0))
    return heads[tiling[-1]].end if tiling else 0


def _check_repeats(index: TurnIndex, heads: Sequence[_Head], loaded: int) -> None:
    """Refuse parts that repeat the loaded messages (up to ``loaded``) with other turns.

    Such a part begins at a turn boundary of the loaded index, as its first turn: else the
    two disagree on the session's turns, and neither is to be trusted.
    """
    ends = index.ends
    for head in heads:
        if head.end > loaded:
            continue
        agrees = head.begin == head.first == 0 or (
            0 < head.first <= len(ends) and ends[head.first - 1] == head.begin)
        if not agrees:
            raise CorruptIndex("two stored parts disagree on the session's turns")


def _reset(turns: SessionTurns) -> None:
    """Empty the index again (a part failed to load half-way)."""
    fresh = _new_session_turns()
    if _postings(turns) is not None:
        _carry_postings(fresh)
    turns.index, turns.messages, turns.tag = fresh.index, fresh.messages, ""
    turns.fresh_terms, turns.fresh_from = {}, 0


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
        self._keeps_index = True
        """Whether the store keeps indexes (``IndexStore``); found out on first use."""

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
            if self._keeps_index and not turns.tag and not turns.messages:
                yield from self._read_stored(key, turns)
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
                yield from self._persist(key, turns)
            return turns
        logger.warning("recall skipped user=%s session=%s: the session changed while read",
                       key.user_id, key.session_id, extra={"contextwright": {
                           "event": "recall_skipped", "user_id": key.user_id,
                           "session_id": key.session_id}})
        return None

    def _read_stored(self, key: SessionKey, turns: SessionTurns) -> Flow[None]:
        """Read the store's parts of a session about to be indexed (once per entry)."""
        try:
            stored = yield from flow.read_index(key)
        except AttributeError:  # a store that keeps no index
            self._keeps_index = False
            return
        with turns.lock:
            if not turns.tag and not turns.messages and turns.epoch is None and stored:
                turns.epoch = stored.epoch
                _carry_postings(turns)
                if turns.distrusted:
                    turns.rewrite = True
                else:
                    turns.stored = stored

    def _persist(self, key: SessionKey, turns: SessionTurns) -> Flow[None]:
        """Append what the index gained to the store's parts (replace them if unusable).

        The range is claimed under the session's lock, so two builds in this process never
        write the same turns; a write that fails is not retried (the next part replaces all).
        A call cancelled while it claims or writes (a deadline on ``aprepare``) counts as a
        failed write: left claimed, the range would be a hole that later parts skip.
        """
        if turns.epoch is None:
            return
        settled = False  # stored, or nothing claimed: the claimed range needs no undoing
        try:
            claimed = yield from flow.compute(partial(_claim_part, turns))
            if claimed is None:
                settled = True
                return
            text, replace_all = claimed
            try:
                settled = yield from flow.append_index(key, text, epoch=turns.epoch,
                                                       replace=replace_all)
            except StoreError as exc:
                logger.warning("recall index not stored user=%s session=%s (%s)", key.user_id,
                               key.session_id, type(exc).__name__, extra={"contextwright": {
                                   "event": "recall_index_not_stored", "user_id": key.user_id,
                                   "session_id": key.session_id}})
        finally:
            if not settled:
                with turns.lock:  # erased meanwhile, or unknown: whatever is stored is replaced
                    turns.rewrite = True
                    turns.persisted = 0

    def read_turns(self, key: SessionKey, turns: SessionTurns,
                   spans: Sequence[tuple[int, int]]) -> Flow[bool]:
        """Read the messages of ``spans`` (positions ``[start, end)``) from the store's log.

        False when they cannot be read as the loaded parts describe them: the session's
        incarnation is gone (an erase racing this call: the entry is dropped), the store keeps
        parts but cannot read spans, or the log does not hold the messages the parts cover
        (the entry is distrusted: the session's next use indexes its messages instead).
        """
        if not spans:
            return True
        if turns.epoch is None:
            raise AssertionError("only a session loaded from stored parts has unread messages")
        wanted = [(start + 1, end) for start, end in spans]  # seqs, inclusive
        try:
            read = yield from flow.read_spans(key, wanted, epoch=turns.epoch)
        except AttributeError:  # keeps parts, cannot read spans: index the messages
            self._keeps_index = False
            self.distrust(key, turns, "the store cannot read a session's messages by seq")
            return False
        if read is None:
            self._replace(key, turns)
            return False
        filled = yield from flow.compute(partial(_fill, turns, spans, read))
        if not filled:
            self.distrust(key, turns, "the session's log does not hold the messages its "
                          "stored recall index covers")
        return filled

    def distrust(self, key: SessionKey, broken: SessionTurns, reason: str) -> None:
        """Drop ``broken``, whose stored parts do not fit the session's log.

        The checks a part passes when loaded do not read the messages it covers (a fresh
        worker reads only the turns it shows), so a part that does not fit the log can show
        only then. The session's next use indexes its messages from the store, not the parts,
        and replaces the parts with what it indexed.
        """
        with self._lock:
            if self._entries.get(key) is broken:
                fresh = _new_session_turns()
                fresh.distrusted = True
                self._entries[key] = fresh
        _forget_postings(broken)
        logger.warning("recall index rebuilt user=%s session=%s: %s", key.user_id,
                       key.session_id, reason, extra={"contextwright": {
                           "event": "recall_index_rebuilt", "user_id": key.user_id,
                           "session_id": key.session_id, "reason": reason}})

    def forget(self, user_id: str, session_id: str | None = None) -> None:
        """Drop the index of one session, or of every session of ``user_id``.

        The lexical recallers' postings of those sessions go too: their words are the
        session's, and nothing of an erased session is kept.
        """
        with self._lock:
            dropped = [self._entries.pop(k) for k in [
                k for k in self._entries if k.user_id == user_id and (
                    session_id is None or k.session_id == session_id)]]
        for turns in dropped:
            _forget_postings(turns)

    def _entry(self, key: SessionKey) -> SessionTurns:
        with self._lock:
            turns = self._entries.get(key)
            if turns is None:
                turns = self._entries[key] = _new_session_turns()
            self._entries.move_to_end(key)
            return turns

    def _replace(self, key: SessionKey, stale: SessionTurns) -> None:
        with self._lock:
            if self._entries.get(key) is stale:
                del self._entries[key]
        _forget_postings(stale)

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


def _forget_postings(turns: SessionTurns | None) -> None:
    """Drop what the lexical recallers indexed of ``turns`` (a stale or erased session).

    An index merely evicted for room lets its postings go with it (they hold it weakly).
    """
    if turns is not None:
        forget_postings(turns.index.turns)


def _claim_part(turns: SessionTurns) -> tuple[str, bool] | None:
    """The part to write for ``turns`` and whether it replaces the others (None: no news).

    The range is claimed: a concurrent build of the session writes only what comes after it.
    """
    with turns.lock:
        replace_all = turns.rewrite
        if replace_all:
            turns.persisted = turns.stored_to = 0
        elif turns.stored_to > turns.persisted:  # the store holds more than this process wrote
            if len(turns.messages) <= turns.stored_to:
                return None
            if _turn_starts_at(turns.index, turns.stored_to):
                turns.persisted = turns.stored_to  # continue the stored parts, not repeat them
        encoded = encode_part(turns)
        if encoded is None:
            return None
        text, end = encoded
        turns.persisted, turns.rewrite = end, False
        turns.fresh_terms, turns.fresh_from = {}, len(turns.index.turns)
        return text, replace_all


def _turn_starts_at(index: TurnIndex, position: int) -> bool:
    """Whether a turn of ``index`` begins at message ``position`` (a part may begin there)."""
    at = bisect_left(index.ends, position)
    return at < len(index.ends) and index.ends[at] == position and at + 1 < len(index.turns)


def _fill(turns: SessionTurns, spans: Sequence[tuple[int, int]],
          read: Sequence[StoredMessage]) -> bool:
    """Hold the messages ``read`` for ``spans``; False if it is not exactly those messages."""
    by_seq = {stored.seq: stored.message for stored in read}
    wanted = {seq for start, end in spans for seq in range(start + 1, end + 1)}
    if by_seq.keys() != wanted or max(wanted) > len(turns.messages):
        return False
    added = 0
    for start, end in spans:
        added += turns.messages.fill(start, [by_seq[seq] for seq in range(start + 1, end + 1)])
    turns.index.held += MESSAGE_BYTES * added
    return True


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
    if not turns.tag and turns.stored is not None:  # first use: the store's parts, if any
        _load_stored(key, turns, begin - 1)
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
    if not turns.tag:  # nothing stored was loaded: the first extension starts at seq 1
        turns.tag = _tag(key, new[0])
        turns.index.key = _session_key(turns.tag)
    if new:
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
    the budget history can reach) and at most ``limit`` turns. A recalled turn is placed before
    the request's history (``DETACHED_ORDER`` plus its session position, so it is never taken
    for one of the request's messages, read or unread, and keeps its order, items and cached
    rendering as the window slides on), keyed ``history.recalled.m<seq - 1>``, and its report
    reason names its seqs.
    """

    namespace = "history"

    def __init__(self, *, history: ContextSource, turns: SessionTurns, recaller: TurnRecaller,
                 recall: RecallSettings, max_tokens: int, begin: int, recent_calls: int,
                 anchor: int, now: str | None = None) -> None:
        """A source over ``history`` that recalls from ``turns``.

        ``begin``: seq of the first message of the request's history; ``now``: when the user's
        message was said (its timestamp), to date the time words of the query.
        """
        derived = traits_of(self)  # the registered history's, as for any replacement of it
        self.traits = replace(derived, layout=replace(derived.layout, recalls_always=True))
        """As the history source it wraps, but its stream holds recalled stored turns
        whatever the options say."""
        self._anchor = anchor
        self._history = history
        self._turns = turns
        self._recaller = recaller
        self._share = min(recall.share, MAX_RECALL_SHARE)
        self._limit = recall.limit
        self._max_tokens = max_tokens
        self._offset = begin - 1
        self._recent_calls = recent_calls
        self._now = now
        self.unread: set[tuple[int, int]] = set()
        """Turns (``[start, end)`` positions) a build would have shown but whose messages this
        process has not read from the store: they were left out, and the manager reads them
        and builds again (``unread_spans`` reads the ranked ones before the first build)."""

    @property
    def turns(self) -> SessionTurns:
        """The session index this source recalls from."""
        return self._turns

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """The wrapped stream, with recalled turns offered at round boundaries.

        A ranked turn whose messages are not read yet is left out and noted in ``unread``.
        """
        ranked = self._readable(self._ranked(request.user_input))
        if not ranked:
            yield from self._history.build(request, options)
            return
        index = self._index(options)
        # Calls of the request's history (the window) since the last cut: the tiers of a
        # recalled turn's results count the calls after it up to the cut, as the history
        # source counts them (the session's older messages are another list).
        since_cut = calls_since_cut(request, options)
        old = Request(user_input=request.user_input, history=self._turns.messages)
        segments = (Segment((item,), estimate_tokens(item.message.content) + 4,
                            bool(item.round_start))
                    for item in self._history.build(request, options))
        rule = Interleaving(share=self._share, max_tokens=self._max_tokens,
                            anchor=max(self._anchor, int(options.get("recent_rounds", 0) or 0)))
        yield from interleave(segments, ranked, index, rule, recalled=lambda position:
                              self._placed(old, options, index, position, since_cut))

    def digest(self, request: Request, options: Mapping[str, Any],
               kept: Sequence[ContextItem], max_tokens: int,
               cost: Callable[[ContextItem], int]) -> ContextItem | None:
        """The wrapped source's digest of what was left out (recalled turns count as shown)."""
        if isinstance(self._history, DigestingSource):
            return self._history.digest(request, options, kept, max_tokens, cost)
        return None

    def recalled_turns(self, request: Request, options: Mapping[str, Any],
                       starts: Sequence[int]) -> Iterator[ContextItem]:
        """The turns opening at ``starts`` as recalled, shown as an earlier build showed them.

        A start is a position in the request's history; a negative one is a stored turn before
        it (the order its items were placed at). A build that keeps a stable prefix offers
        them again whatever the current input ranks, so the cached run is found again.
        """
        own = [start for start in starts if start >= 0]
        if own and callable(getattr(self._history, "recalled_turns", None)):
            yield from self._history.recalled_turns(request, options, own)  # type: ignore[attr-defined]
        stored = sorted({self._stored_position(start) for start in starts if start < 0})
        if not stored:
            return
        index = self._index(options)
        since_cut = calls_since_cut(request, options)
        old = Request(user_input=request.user_input, history=self._turns.messages)
        for at in stored:
            position = bisect_left(index.turns, at, key=operator.attrgetter("index"))
            if (position < len(index.turns) and index.turns[position].index == at
                    and index.ends[position] <= self._offset
                    and self._readable([(position, 0.0)])):
                yield from self._placed(old, options, index, position, since_cut)

    def _stored_position(self, start: int) -> int:
        """The session position of a stored turn a layout names by ``start``.

        Detached (``DETACHED_ORDER`` plus the session position) as ``_placed`` orders them; a
        small negative start is how earlier versions wrote it: that far before the window.
        """
        return int(start - DETACHED_ORDER) if detached(start) else start + self._offset

    def recall_focus(self, request: Request, options: Mapping[str, Any]) -> float | None:
        """How focused the input's recall over the stored turns is (``turn_focus``)."""
        turns = self._turns
        with turns.lock:
            return turn_focus(self._recaller, request.user_input, turns.index.turns,
                              limit=self._limit, now=self._now)

    def unread_spans(self, query: str) -> list[tuple[int, int]]:
        """The turns ranked for ``query`` whose messages are not read yet (``[start, end)``)."""
        index, messages = self._turns.index, self._turns.messages
        if not messages.unread:
            return []
        spans = ((index.turns[p].index, index.ends[p]) for p, _ in self._ranked(query))
        return [span for span in spans if not messages.is_read(*span)]

    def _readable(self, ranked: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """``ranked`` without the turns whose messages are not read (noted in ``unread``)."""
        index, messages = self._turns.index, self._turns.messages
        if not messages.unread:
            return ranked
        kept = []
        for position, score in ranked:
            span = index.turns[position].index, index.ends[position]
            if messages.is_read(*span):
                kept.append((position, score))
            else:
                self.unread.add(span)
        return kept

    def _ranked(self, query: str) -> list[tuple[int, float]]:
        turns = self._turns
        with turns.lock:  # the recaller extends its own index from this growing list
            asked = (query, len(turns.index.turns), self._limit, self._now)
            if turns.last_ranking is not None and turns.last_ranking[0] == asked:
                ranked = turns.last_ranking[1]
            else:
                ranked = rank_turns(self._recaller, query, turns.index.turns, limit=self._limit,
                                    now=self._now)
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
                position: int, since_cut: int) -> list[ContextItem]:
        """One recalled turn's items, keyed apart from the request's and ordered before them.

        The same objects for every input that recalls the turn (the score is noted for the
        report apart from them, ``core.notes``), so their rendering is cached once.
        """
        items = cached_recalled_items(old, options, index, position, since_cut)
        cache_key = id(items)
        cached = self._turns.placed.get(cache_key)
        if cached is not None and cached[0] is items:
            return cached[1]
        turn, end = index.turns[position], index.ends[position]
        reason = (f"recalled: older turn relevant to the input, no longer shown verbatim "
                  f"(seq {turn.index + 1}-{end})")
        placed = [replace(
            item, key=f"history.recalled.{item.key.removeprefix('history.')}",
            order=DETACHED_ORDER + item.order, group=f"session-{item.group}",
            metadata={**item.metadata, "recalled": reason} if "recalled" in item.metadata
            else item.metadata) for item in items]
        if len(self._turns.placed) >= _PLACED_LIMIT:
            self._turns.placed.clear()
        self._turns.placed[cache_key] = (items, placed)
        return placed
