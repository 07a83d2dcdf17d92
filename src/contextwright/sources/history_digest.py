r"""The history digest: exact values of the turns a build left out, as one compact fenced item.

The running summary's "confirmed key facts", but stateless: when the plan sets history's
``digest_share``, the builder keeps that share of history's grant free and, if rounds were left out,
asks ``HistorySource.digest`` for one item. That item says it is a digest of omitted messages (which
ones), and lists, per omitted message, the exact values first seen there (ids, codes, numbers,
dates, emails, addresses: ``compress.facts.extract_facts``) that the kept context does not already
show. What a kept item shows is its text as sent and its calls' arguments: a tool result shown
reduced, as one line or as a placeholder shows only what that text holds, not its original.
JSON (a tool result, a call's arguments) is read decoded, string by string, so a result written
with ``\uXXXX`` escapes (``json.dumps``' default) gives its values (``€1.200,50``), not pieces of
the escapes. Values are never paraphrased or cut: a value that does not fit is left out whole.

Which values come first when not all fit: those the user stated or the agent passed to a tool
(someone relied on them), then values repeated across omitted messages, then the newest. Only
the newest ``digest_scan`` omitted messages are read, so a long session costs what is read, and
each message's values are remembered per content. Of a text longer than ``READ_CHARS`` (a file
body, a batch of rows passed to a tool) only its head and tail are read.

Pure functions of the request and the kept items; nothing here knows budgets beyond ``cost``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from operator import attrgetter
from typing import Any, NamedTuple

from contextwright.compress.facts import extract_facts, fact_key, looks_like_fence_marker
from contextwright.compress.json_compact import MAX_COMPACT_CHARS, without_lone_surrogates
from contextwright.core.caches import BoundedCache, memoized, register_cache, text_bytes
from contextwright.core.items import ContextItem, Layer, Message, parse_listed, parsed_unchanged
from contextwright.core.request import Request

_ORDER = attrgetter("order")
DEFAULT_SCAN = 400
"""Omitted messages read for a digest unless ``digest_scan`` says otherwise."""
LABEL = "digest of omitted turns"


class Entry(NamedTuple):
    """The values of one omitted message, in the order they appear.

    A named tuple rather than a dataclass: a build makes one per omitted message it reads.
    """

    at: int
    """Position of the message in ``request.history``."""
    who: str
    """``user``, ``assistant``, or ``tool <name>``."""
    values: tuple[str, ...]
    """Exact values first seen in this message and absent from the kept context."""
    relied_on: bool
    """The user stated them or the agent passed them in a tool call."""


def history_digest(request: Request, options: Mapping[str, Any], kept: Sequence[ContextItem],
                   max_tokens: int, cost: Callable[[ContextItem], int], *,
                   language: str = "en") -> ContextItem | None:
    """The digest of omitted history messages, or None when no value is worth listing.

    ``language``: that of the build's labels (``en``, ``zh``); the digest's own words follow
    it, the values it lists are never translated.
    """
    return omitted_digest(request.history, "history", request.user_input, options, kept,
                          max_tokens, cost, language=language)


def omitted_digest(messages: Sequence[Mapping[str, Any]], where: str, user_input: str,
                   options: Mapping[str, Any], kept: Sequence[ContextItem], max_tokens: int,
                   cost: Callable[[ContextItem], int], *,
                   language: str = "en") -> ContextItem | None:
    """The digest of the ``messages`` not in ``kept`` (items ordered by message index).

    ``where`` names the list (``history``, ``turn``) in the text and is the key's namespace
    (``tool_results`` for ``turn``). ``language``: as for ``history_digest``.
    """
    wording = _wording(language)
    scan = int(options.get("digest_scan", DEFAULT_SCAN))
    memo = _memo_key(messages, where, user_input, scan, max_tokens, cost, language)
    if memo is not None:
        remembered = _remembered(memo, messages, kept)
        if remembered is not None:
            return remembered[0]
    kept_at = set(map(int, map(_ORDER, kept)))
    known = _known_values(kept, user_input, where)
    read: list[tuple[int, int, Message]] | None = [] if memo is not None else None
    entries, ranked = _ranked(_entries(messages, where, kept_at, known, scan, read))
    digest = None
    if ranked:
        size = len(messages)
        omitted = size - sum(map(range(size).__contains__, kept_at))
        digest = _fitting(entries, ranked, _Heading(omitted, where, wording), max_tokens, cost)
    if memo is not None and read is not None:
        _DIGESTS.put(memo, (tuple(kept), tuple(read), (digest,)))
    return digest


_DigestMemo = tuple[tuple[ContextItem, ...], tuple[tuple[int, int, Message], ...],
                    tuple[ContextItem | None]]


def _memo_bytes(_: tuple[object, ...], memo: _DigestMemo) -> int:
    """The texts an entry keeps alive (kept items, parsed messages, the digest) and its tuples."""
    items, read, (digest,) = memo
    texts = [item.message.content for item in items] + [m.content for _, _, m in read]
    if digest is not None:
        texts.append(digest.message.content)
    return sum(map(text_bytes, texts)) + 120 * (len(items) + len(read)) + 1_000


_DIGESTS: BoundedCache[tuple[object, ...], _DigestMemo] = BoundedCache(
    "sources.history_digest.digests", max_entries=1_024, share=0.01, size=_memo_bytes)
"""Digests made, by what they were made from: a build that keeps a stable prefix remakes the
digest of its last cut, from the same messages, on every call until the next cut. The caller's
messages are known by id, not kept alive: the parse each was checked against is kept, and a new
object at a freed id parses to another ``Message``."""


def _memo_key(messages: Sequence[Mapping[str, Any]], where: str, user_input: str, scan: int,
              max_tokens: int, cost: Callable[[ContextItem], int],
              language: str) -> tuple[object, ...] | None:
    """What a digest depends on besides the messages it reads and the kept items.

    None for a ``cost`` that cannot say what it counts with: the digest is then not remembered.
    """
    cost_key = getattr(cost, "memo_key", None)
    if cost_key is None:
        return None
    return (len(messages), where, user_input, scan, max_tokens, cost_key, language)


def _alike(a: ContextItem, b: ContextItem) -> bool:
    """Whether two kept items count alike for a digest (a source may make one anew).

    What a digest reads of a kept item: its position, and the texts whose values it knows
    (``_item_keys``).
    """
    return (a.order == b.order and a.raw == b.raw and a.message.content == b.message.content
            and a.message.tool_calls == b.message.tool_calls)


def _remembered(memo: tuple[object, ...], messages: Sequence[Mapping[str, Any]],
                kept: Sequence[ContextItem]) -> tuple[ContextItem | None] | None:
    """The digest remembered under ``memo`` if it was made from these very messages and items.

    Every message the digest read must be the same object at the same position, unchanged
    since it was parsed (``parsed_unchanged`` hands back the very parse it read): an edited or
    replaced message makes a new digest.
    """
    entry = _DIGESTS.get(memo) or _DIGESTS.revive(memo)
    if entry is None:
        return None
    items, read, digest = entry
    if len(items) != len(kept) or not all(
            a is b or _alike(a, b) for a, b in zip(items, kept, strict=True)):
        return None
    for index, raw_id, message in read:
        raw = messages[index]
        if id(raw) != raw_id or parsed_unchanged(raw) is not message:
            return None
    return digest


def _fitting(entries: Sequence[Entry], ranked: Sequence[str], heading: _Heading,
             max_tokens: int, cost: Callable[[ContextItem], int]) -> ContextItem | None:
    """The digest of the most values, taken in rank order, that costs at most ``max_tokens``.

    Exact counts of a long digest are what a build would pay for, so the guess comes from a
    per-value estimate (about four characters a token) and exact counts only confirm it: one
    count when the guess fits, a few more, each shrinking by the overshoot, when it does not.
    The item returned is the one last costed, so rendering it again costs nothing
    (``DigestCost`` remembers it).
    """
    whole = _item(entries, set(ranked), heading)
    whole_cost = cost(whole)
    if whole_cost <= max_tokens:
        return whole
    base = cost(_item(entries, set(), heading))
    room = (max_tokens - base) * 4
    count, used = 0, 0
    for value in ranked:  # each value costs its text, a separator, and maybe a new line label
        used += len(value) + 8
        if used > room:
            break
        count += 1
    for _ in range(8):
        if count <= 0:
            return None
        if count >= len(ranked):  # the whole digest again: its cost is known, and over
            spent = whole_cost
        else:
            item = _item(entries, set(ranked[:count]), heading)
            spent = cost(item)
            if spent <= max_tokens:
                return item
        count = min(count - 1, int(count * (max_tokens - base) / max(spent - base, 1)))
    return None


def _known_values(kept: Sequence[ContextItem], user_input: str,
                  where: str = "history") -> frozenset[str]:
    """The values the kept context already shows (as ``fact_key``), found the same way.

    Worked out from an earlier call's answer when there is one for the same input and list
    (``_KnownValues``): consecutive builds of a growing history, and the two digests a build
    may make, keep nearly the same items, so only the items kept or let go since are read.
    """
    by_id = dict(zip(map(id, kept), kept, strict=True))
    memo_key = (where, user_input)
    states = _KNOWN.get(memo_key) or _KNOWN.revive(memo_key) or ()
    base = min(states, key=lambda state: abs(len(state.items) - len(by_id)), default=None)
    state = _KnownValues.made(by_id, user_input) if base is None else base.moved_to(by_id)
    _KNOWN.put(memo_key, (state, *(s for s in states if s is not state))[:_KNOWN_STATES])
    return state.known


class _KnownValues(NamedTuple):
    """The value keys a set of kept items and the input show, with how many show each.

    Never changed once made (builds may run in several threads): ``moved_to`` makes another.
    """

    items: dict[int, ContextItem]
    """The kept items, by id (kept alive here, so an id names one item)."""
    counts: dict[str, int]
    """Each known key, and how many of the items (and the input, counted as one) show it."""
    known: frozenset[str]
    """The keys of ``counts``."""

    @classmethod
    def made(cls, items: dict[int, ContextItem], user_input: str) -> _KnownValues:
        """The known values of ``items`` and ``user_input``, read item by item."""
        counts: dict[str, int] = dict.fromkeys(_text_keys(user_input) if user_input else (), 1)
        _count_keys(counts, items.values(), 1)
        return cls(items, counts, frozenset(counts))

    def moved_to(self, items: dict[int, ContextItem]) -> _KnownValues:
        """The known values once the kept items are ``items`` (the same input)."""
        gone = self.items.keys() - items.keys()
        added = items.keys() - self.items.keys()
        if not gone and not added:
            return self
        counts = dict(self.counts)
        _count_keys(counts, (self.items[i] for i in gone), -1)
        _count_keys(counts, (items[i] for i in added), 1)
        return _KnownValues(items, counts, frozenset(counts))


def _count_keys(counts: dict[str, int], items: Iterable[ContextItem], step: int) -> None:
    """Add ``step`` to the count of each key each of ``items`` shows (a count of 0 goes)."""
    for item in items:
        for key in _item_keys(item):
            count = counts.get(key, 0) + step
            if count:
                counts[key] = count
            else:
                del counts[key]


_KNOWN_STATES = 4
"""Known values remembered per input and list: a build's digests keep fewer items than its
fuller second try does, so the closest in size of a few is the one to work from."""


def _known_bytes(_: tuple[str, str], states: tuple[_KnownValues, ...]) -> int:
    """The keys counted and the item slots; the items are their sources' (shared).

    Summed in C (``map(len, …)``): it is worked out on every call, over every key.
    """
    return sum(sum(map(len, state.counts)) + 110 * len(state.counts) + 100 * len(state.items)
               for state in states)


_KNOWN: BoundedCache[tuple[str, str], tuple[_KnownValues, ...]] = BoundedCache(
    "sources.history_digest.known", max_entries=256, share=0.005, size=_known_bytes)
"""The last known values worked out per (list, input): see ``_known_values``."""


_CACHE_LIMIT = 100_000


def _keys_bytes(keys: Iterable[str]) -> int:
    return sum(text_bytes(k) + 60 for k in keys) + 200


_ITEM_KEYS: BoundedCache[int, tuple[ContextItem, frozenset[str]]] = BoundedCache(
    "sources.history_digest.item_keys", max_entries=_CACHE_LIMIT, share=0.01,
    size=lambda _, entry: _keys_bytes(entry[1]))


def _item_keys(item: ContextItem) -> frozenset[str]:
    """The value keys one kept item shows: in its text as sent, and its calls' arguments.

    What is shown, never ``item.raw``: a tool result shown reduced, as one line or as a
    placeholder splits or leaves out values its original holds, and a value counted as shown
    that is not would be in neither the context nor the digest. JSON is read decoded
    (``_values``), as the digest reads omitted messages.

    Remembered per item object: items are immutable, and a history's items are re-yielded as
    the same objects on every build.
    """
    cached = _ITEM_KEYS.get(id(item)) or _ITEM_KEYS.revive(id(item))
    if cached is not None and cached[0] is item:
        return cached[1]
    texts = [item.message.content, *(call.arguments for call in item.message.tool_calls)]
    keys = frozenset(k for text in texts if text for k in _text_keys(text))
    _ITEM_KEYS.put(id(item), (item, keys))
    return keys


def _entries(history: Sequence[Mapping[str, Any]], where: str, kept_at: set[int],
             known: frozenset[str], scan: int,
             read_out: list[tuple[int, int, Message]] | None) -> list[Entry]:
    """Entries of the newest ``scan`` omitted messages, newest first (a value may repeat).

    Every message read is added to ``read_out`` (when given) as (position, id of the caller's
    object, its parse).
    """
    entries: list[Entry] = []
    names: dict[str, str] = {}
    read = 0
    for index in range(len(history) - 1, -1, -1):
        if index in kept_at:
            continue
        if read >= scan:
            break
        read += 1
        raw = history[index]
        message = parsed_unchanged(raw) or parse_listed(history, where, index)
        if read_out is not None:
            read_out.append((index, id(raw), message))
        if message.role == "tool" and not message.name:  # named after the call it answers
            names.update(_call_names(history, where, index, message, read_out))
            whole, keys, facts = _row(message, index, _who(message, names), remember=False)
        else:
            row = _ROWS.get((id(message), index)) or _ROWS.revive((id(message), index))
            whole, keys, facts = (row[1:] if row is not None and row[0] is message
                                  else _row(message, index, _who(message, names)))
        if whole is None:
            continue
        if keys.isdisjoint(known):
            entries.append(whole)
            continue
        fresh = tuple(v for v, k in facts if k not in known)
        if fresh:
            entries.append(whole._replace(values=fresh))
    return entries


_Row = tuple[Entry | None, frozenset[str], tuple[tuple[str, str], ...]]


def _row(message: Message, index: int, who: str, *, remember: bool = True) -> _Row:
    """The entry of ``message`` at ``index`` with all its values, their keys and pairs.

    The entry is None when the message has no values. With ``remember``, the row is kept for
    the next build (``_ROWS``).
    """
    values, keys, facts = _message_facts(message)
    whole = Entry(at=index, who=who, values=values,
                  relied_on=message.role == "user" or bool(message.tool_calls)) if values else None
    if remember:
        _ROWS.put((id(message), index), (message, whole, keys, facts))
    return whole, keys, facts


_ROWS: BoundedCache[tuple[int, int], tuple[Message, Entry | None, frozenset[str],
                                           tuple[tuple[str, str], ...]]] = BoundedCache(
    "sources.history_digest.rows", max_entries=_CACHE_LIMIT, share=0.005,
    size=lambda _, row: 2 * _keys_bytes(row[2]) + 200)
"""The digest's row of each message read, by its parse and position: a digest reads the same
omitted messages build after build, and most show none of the kept context's values, so their
row is used as it is. A message named after the call it answers is not kept here (its name
is read from that call on every build)."""


def _ranked(entries: list[Entry]) -> tuple[list[Entry], list[str]]:
    """(entries with each value under the oldest message holding it, values best first).

    Best first: values someone relied on (the user stated them, the agent passed them to a
    tool); then identifiers before dates, dates before other values, times of day last; then
    values repeated in more omitted messages; then the newest.
    """
    owner: dict[str, int] = {}
    count: dict[str, int] = {}
    relied: set[str] = set()
    for position, entry in enumerate(entries):  # newest first: the last writer is the oldest
        for value in entry.values:
            owner[value] = position
            count[value] = count.get(value, 0) + 1
        if entry.relied_on:
            relied.update(entry.values)
    shown = [_owned(e, p, owner) for p, e in enumerate(entries)]
    ranked = sorted(owner, key=lambda v: (
        v not in relied, _value_rank(v) if len(v) <= MEMO_CHARS else value_rank(v), -count[v],
        owner[v]))
    return [e for e in shown if e.values], ranked


def _owned(entry: Entry, position: int, owner: Mapping[str, int]) -> Entry:
    """``entry`` with only the values it owns (most own all of theirs: no copy then)."""
    values = tuple(v for v in entry.values if owner[v] == position)
    if len(values) == len(entry.values):
        return entry
    return Entry(at=entry.at, who=entry.who, relied_on=entry.relied_on, values=values)


_TIME = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp]\.?[Mm]\.?|[+-]\d+)?")
_DATE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}.*|\d{1,2}/\d{1,2}/\d{2,4}|.*\d月\d.*")


def value_rank(value: str) -> int:
    """0 identifiers (letters with digits, emails, urls), 1 dates, 2 other values, 3 times.

    An id names one thing exactly and is what a later call needs verbatim; a time of day or a
    price in a listing rarely is.
    """
    if _TIME.fullmatch(value):
        return 3
    if _DATE.fullmatch(value):
        return 1
    has_digit = any(ch.isdigit() for ch in value)
    has_alpha = any(ch.isalpha() for ch in value)
    if "@" in value or "://" in value or (has_digit and has_alpha and " " not in value):
        return 0
    return 2


_value_rank = lru_cache(maxsize=65_536)(value_rank)
MEMO_CHARS = 64
"""Values up to this long go through the ``lru_cache`` memos (rank, key): a value may be any
length, and only short entries make 65,536 of them a bound on memory as well."""


def _call_names(history: Sequence[Mapping[str, Any]], where: str, index: int,
                message: Message, read_out: list[tuple[int, int, Message]] | None
                ) -> dict[str, str]:
    """Tool names of the calls a tool result may answer (read lazily, going backwards)."""
    if message.role != "tool" or message.name:
        return {}
    for back in range(index - 1, max(index - 64, -1), -1):
        earlier = parse_listed(history, where, back)
        if read_out is not None:
            read_out.append((back, id(history[back]), earlier))
        if earlier.tool_calls:
            return {call.id: call.name for call in earlier.tool_calls}
    return {}


def _who(message: Message, names: Mapping[str, str]) -> str:
    if message.role != "tool":
        return str(message.role)
    name = message.name or names.get(message.tool_call_id or "")
    return f"tool {name}" if name else "tool"


_Facts = tuple[tuple[str, ...], frozenset[str], tuple[tuple[str, str], ...]]
_MESSAGE_FACTS: BoundedCache[int, tuple[Message, _Facts]] = BoundedCache(
    "sources.history_digest.message_facts", max_entries=_CACHE_LIMIT, share=0.01,
    size=lambda _, entry: 2 * _keys_bytes(entry[1][0]))


def _message_facts(message: Message) -> _Facts:
    """The message's values (once each, in order), their keys, and (value, key) pairs.

    Remembered per parsed message object (``parse_message`` hands back the same object while
    the dict is unchanged): the same omitted messages are read on every build.
    """
    cached = _MESSAGE_FACTS.get(id(message)) or _MESSAGE_FACTS.revive(id(message))
    if cached is not None and cached[0] is message:
        return cached[1]
    texts = [message.content, *(call.arguments for call in message.tool_calls)]
    values = tuple(dict.fromkeys(v for text in texts if text for v in _read_values(text)))
    if message.role == "assistant":
        # A marker-shaped value the model wrote is an earlier context's fence copied back.
        values = tuple(v for v in values if not looks_like_fence_marker(v))
    pairs = tuple((v, _key_of(v)) for v in values)
    facts = (values, frozenset(k for _, k in pairs), pairs)
    _MESSAGE_FACTS.put(id(message), (message, facts))
    return facts


_JSON_START = re.compile(r"\s*[\[{]")
"""What a JSON object or array starts with: most texts are prose, and are never parsed."""


_LEAF_BREAK = "\n|\n"
"""Between two decoded strings: a line break alone could be read across (``$`` then ``100``), a
bar no fact pattern takes."""


def _decoded(text: str) -> str | None:
    r"""A JSON text's keys and values as they read, in order, ``_LEAF_BREAK`` between them.

    Tools' JSON is mostly written with ``\uXXXX`` escapes (``json.dumps``' default): read
    raw, ``"\u20ac1.200,50"`` gives the fragment ``u20ac1`` and no amount. Decoded, each
    string is its value (``€1.200,50``), and an escaped line break or slash no longer glues
    letters to an id or breaks a URL. Numbers read as written. None when ``text`` is not JSON
    or too large to parse (``MAX_COMPACT_CHARS``: the raw text is read then).
    """
    if len(text) > MAX_COMPACT_CHARS:
        return None
    try:  # built-in hooks only: parsing stays in C; an object comes as its (key, value) pairs
        value = json.loads(text, parse_int=str, parse_float=str, parse_constant=str,
                           object_pairs_hook=list)
    except (ValueError, RecursionError):
        return None
    leaves: list[str] = []
    pending: list[Any] = [value]
    while pending:  # depth first, in document order, without recursion
        node = pending.pop()
        if isinstance(node, str):
            leaves.append(node)
        elif isinstance(node, list | tuple):  # an array, an object's pairs, or one pair
            pending.extend(reversed(node))
    return without_lone_surrogates(_LEAF_BREAK.join(leaves), text)


READ_CHARS = 32_768
"""An omitted text longer than this is read in part: its head and its tail, these many
characters in all. A digest holds what fits its share of the budget, chosen by rank, so it has
values to choose from in the parts read; extracting and ranking every value of a file body or
a batch of rows passed to a tool cost seconds a megabyte, to throw nearly all of them away."""
_TAIL_CHARS = READ_CHARS // 4
_HEAD_CHARS = READ_CHARS - _TAIL_CHARS
_LAST_SPACE = re.compile(r"(?s:.*)\s")
_SPACE = re.compile(r"\s")


def _read_values(text: str) -> tuple[str, ...]:
    """The values of an omitted text: all of it when short, its head and tail when long.

    A part ends at a line break or a space where it can, and a value that may run on past
    where a part was cut (it touches the cut and occurs nowhere else in the part) is left out:
    a digest shows values whole or not at all. Long JSON is decoded first (``_decoded``), and
    its decoded text read so.
    """
    if len(text) <= READ_CHARS:
        return _values(text)
    decoded = _decoded(text) if _JSON_START.match(text) else None
    if decoded is not None:
        text = decoded
        if len(text) <= READ_CHARS:
            return _values(text)
    head_end = _head_end(text)
    tail_start = _tail_start(text)
    head, tail = text[:head_end], text[tail_start:]
    head_values = _values(head)
    if text[head_end - 1] != "\n" and head_values and _runs_on(head, head_values[-1], last=True):
        head_values = head_values[:-1]
    tail_values = _values(tail)
    if text[tail_start - 1] != "\n" and tail_values and _runs_on(tail, tail_values[0], last=False):
        tail_values = tail_values[1:]
    return tuple(dict.fromkeys((*head_values, *tail_values)))


def _head_end(text: str) -> int:
    """Where the head ends: after its last line break, or space, in its second half."""
    floor = _HEAD_CHARS // 2
    line = text.rfind("\n", floor, _HEAD_CHARS)
    if line >= 0:
        return line + 1
    space = _LAST_SPACE.match(text, floor, _HEAD_CHARS)
    return space.end() if space is not None else _HEAD_CHARS


def _tail_start(text: str) -> int:
    """Where the tail starts: after the first line break, or space, in its first half."""
    start = len(text) - _TAIL_CHARS
    ceiling = start + _TAIL_CHARS // 2
    line = text.find("\n", start, ceiling)
    if line >= 0:
        return line + 1
    space = _SPACE.search(text, start, ceiling)
    return space.end() if space is not None else start


def _runs_on(part: str, value: str, *, last: bool) -> bool:
    """Whether ``value`` occurs in ``part`` only where the part was cut (its end or start)."""
    first, final = part.find(value), part.rfind(value)
    if first != final:
        return False
    if last:
        return final + len(value) >= len(part.rstrip())
    return first <= len(part) - len(part.lstrip())


@memoized("sources.history_digest.values", max_entries=32_768, share=0.01,
          size=lambda args, values: text_bytes(args[0]) + _keys_bytes(values))
def _values(text: str) -> tuple[str, ...]:
    """All values of ``text``; of JSON, those of its decoded keys and values (``_decoded``)."""
    decoded = _decoded(text) if _JSON_START.match(text) else None
    return extract_facts(text if decoded is None else decoded)


@memoized("sources.history_digest.text_keys", max_entries=32_768, share=0.01,
          size=lambda args, keys: text_bytes(args[0]) + _keys_bytes(keys))
def _text_keys(text: str) -> tuple[str, ...]:
    return tuple(map(_key_of, _values(text)))


@lru_cache(maxsize=65_536)
def _key(value: str) -> str:
    return fact_key(value)


def _key_of(value: str) -> str:
    """``fact_key``, remembered for values of at most ``MEMO_CHARS`` characters."""
    return _key(value) if len(value) <= MEMO_CHARS else fact_key(value)


_WORDING: dict[str, dict[str, str]] = {
    "en": {"opening": "Digest of {omitted} earlier message(s) left out for space: exact values "
                      "first seen in them, not shown elsewhere.",
           "user": "user", "assistant": "assistant", "system": "system", "tool": "tool"},
    "zh": {"opening": "因篇幅省略了 {omitted} 条较早的消息，"
                      "以下是其中首次出现、别处未显示的确切值。",
           "user": "用户", "assistant": "助手", "system": "系统", "tool": "工具"},
}
"""What a digest says around its values, by the build's labels' language (``core.fence``)."""


def _wording(language: str) -> Mapping[str, str]:
    """The wording of ``language``; one the labels do not know is an error."""
    wording = _WORDING.get(language)
    if wording is None:
        raise ValueError(f"unknown labels language {language!r}: expected one of "
                         f"{', '.join(_WORDING)}")
    return wording


class _Heading(NamedTuple):
    """What a digest's text says besides its values."""

    omitted: int
    """Messages left out."""
    where: str
    """The list they were left out of (``history``, ``turn``)."""
    wording: Mapping[str, str]
    """``_WORDING`` of the build's labels' language."""


def _speaker(who: str, wording: Mapping[str, str]) -> str:
    """``Entry.who`` in the digest's language: the role's word, then the tool's name if any."""
    role, _, name = who.partition(" ")
    word = wording.get(role, role)
    return f"{word} {name}" if name else word


def _item(entries: Sequence[Entry], chosen: set[str], heading: _Heading) -> ContextItem:
    omitted, where, wording = heading
    lines = []
    for entry in reversed(entries):  # oldest first, like the conversation
        values = [v for v in entry.values if v in chosen]
        if values:
            lines.append(f"- {_speaker(entry.who, wording)}, {where}[{entry.at}]: "
                         f"{'; '.join(values)}")
    text = wording["opening"].format(omitted=omitted) + "\n" + "\n".join(lines)
    reason = (f"digest of {omitted} omitted {where} message(s): {len(chosen)} exact value(s) "
              "first seen in them")
    namespace = "tool_results" if where == "turn" else where
    return ContextItem(key=f"{namespace}.digest", message=Message(role="assistant", content=text),
                       layer=Layer.HISTORY, group="digest", order=-1.0, untrusted=True,
                       label=LABEL, metadata={"digest": reason})


register_cache("sources.history_digest.item_keys", _ITEM_KEYS)
register_cache("sources.history_digest.known", _KNOWN)
register_cache("sources.history_digest.rows", _ROWS)
register_cache("sources.history_digest.digests", _DIGESTS)
register_cache("sources.history_digest.message_facts", _MESSAGE_FACTS)
register_cache("sources.history_digest.value_rank", _value_rank)
register_cache("sources.history_digest.values", _values)
register_cache("sources.history_digest.text_keys", _text_keys)
register_cache("sources.history_digest.key", _key)
