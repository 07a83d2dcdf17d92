"""Gathering: read each source's items (only as far as its budget can reach) into costed units.

A *candidate* is an item with the exact text it will render as (fenced if untrusted, labelled if
it joins the system message) and its token cost. A source declared ``fenced`` has its data marked
untrusted here (``_fenced_roles``), and what a source offers that no request may carry (text
that is not UTF-8, data in the user's voice) fails that source here, naming the item. A *unit*
is what is kept or dropped whole: one item, or the items sharing a group (a tool call with its
results). A failing optional source is isolated here and reported; a failing required source
fails the build; bad input and a bad plan (a source refusing its options) always raise: they are
the caller's to fix, and isolating them would quietly build without that source.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Literal

from contextwright.core.accounting import frame_tokens, schema_tokens
from contextwright.core.caches import BoundedCache, register_cache, text_bytes
from contextwright.core.fence import DEFAULT_FENCE_KEY, escape_lines, fence, label, separator
from contextwright.core.items import ContextItem, Message, check_text
from contextwright.core.plan import SourceSpec
from contextwright.core.report import Decision
from contextwright.core.request import Request
from contextwright.core.source import (
    DEFAULT_TRAITS,
    ContextSource,
    SourceTraits,
    core_options,
    traits_of,
)
from contextwright.core.text import text_block
from contextwright.errors import InvalidInputError, PlanError, SourceError
from contextwright.tokens import DEFAULT_IMAGES, CountingTokenizer, ImageTokenRule

logger = logging.getLogger("contextwright")
Target = Literal["chat", "text"]
SECTION_JOIN_TOKENS = 2
"""Allowance for the blank line and label that join a part to the system message."""


@dataclass(slots=True)
class Candidate:
    """An item as it will render, with its cost in tokens."""

    item: ContextItem
    message: Message
    tokens: int
    complete_count: bool = True
    """False when counting stopped early because the item is over the limit."""
    fingerprint: tuple[object, ...] = ()
    """(role, content, calls, the call a result answers) of the offered message, for
    de-duplication. Call ids count: a call made again with the same arguments (a retry, a poll)
    is another event, not a copy, however alike its result."""
    compacted: Decision | None = None
    """The report's ``compacted`` decision for this candidate, made once (see reporting)."""
    dropped: Decision | None = field(default=None, compare=False)
    """The last ``dropped`` decision made for this candidate (``select.drop_decisions``)."""
    rendered_hash: str = ""
    """Hash of ``message``, set the first time a stable-prefix build needs it (``core.stable``)."""

    def __post_init__(self) -> None:
        m = self.item.message
        self.fingerprint = (m.role, m.content, m.tool_call_id,
                            tuple((t.id, t.name, t.arguments) for t in m.tool_calls))
        if m.images:  # the same words with other images are another message
            self.fingerprint += (m.images,)

    @property
    def is_schema(self) -> bool:
        """A tool definition (rendered in the tools list, not as a message)."""
        return "schema" in self.item.metadata


@dataclass(slots=True)
class Unit:
    """Candidates kept or dropped together."""

    source: str
    candidates: list[Candidate]
    round: int | None
    rank: int
    tokens: int = -1
    """Sum of the candidates' tokens (computed when not given)."""

    def __post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = sum(c.tokens for c in self.candidates)


@dataclass(slots=True)
class Gathered:
    """What one source offered, as units in keep order."""

    spec: SourceSpec
    position: int
    traits: SourceTraits = DEFAULT_TRAITS
    """What the source is (``SourceTraits``): how it is cut, fenced, laid out."""
    units: list[Unit] = field(default_factory=list)
    complete: bool = True
    error: str | None = None
    layer: int = 5
    """The most constraining layer among the source's items (5 when it offered none)."""
    read_units: int = 0
    """Units read, before normalisation removed any."""
    read_positions: frozenset[int] = frozenset()
    """For a source that offers messages of a request list (history, the turn), the indexes of
    the messages read (recall reads out of order, so what was not read need not be a prefix);
    empty for other sources. Their items carry their message's index as ``order``."""
    offered: int | None = None
    """How many units the source offers in all (``offered_units``), when it did not offer them
    all and can say (None: unknown, or everything was read)."""
    omitted: list[Decision] = field(default_factory=list)
    """Items the source itself left out, with its reason (``metadata["omitted"]``)."""
    read_back_to: int | None = None
    """The list position it was read back to at most (``gather_source``'s ``reach``: a
    continued layout's source), None when read as far as the budget reaches."""
    digest_error: str | None = None
    """Why the source's digest failed and was left out (an optional source: ``core.digest``)."""
    stopped_at_large: bool = False
    """Reading stopped at a unit larger than all the source may take, having passed over
    ``PASS_OVER_LIMIT`` such units (a bound on the work), not because what it read filled it."""
    pinned_head_end: int | None = None
    """For a source cut after a pinned head (a stable-prefix build): the list position of the
    head's last message; messages between it and the rest are left out for that reason."""

    @property
    def need(self) -> int:
        """Tokens of everything read."""
        return sum(u.tokens for u in self.units)


@dataclass(frozen=True, slots=True)
class Costing:
    """How a build renders and counts: tokenizer, labels' language, target, fence key, images."""

    tokenizer: CountingTokenizer
    language: str
    target: Target = "chat"
    fence_key: bytes = DEFAULT_FENCE_KEY
    """The key fence markers are hashed with (``fence.fence_key``)."""
    images: ImageTokenRule = DEFAULT_IMAGES
    """How images are counted (the model's provider rule)."""

    @property
    def key(self) -> tuple[str, str, str, bytes, str]:
        """What a rendered candidate depends on besides its item."""
        return (self.tokenizer.name, self.language, self.target, self.fence_key,
                self.images.name)

    @property
    def neutral_key(self) -> tuple[str, str, str, bytes, str]:
        """``key`` for an item whose rendering does not depend on the labels' language."""
        return (self.tokenizer.name, "", self.target, self.fence_key, self.images.name)

    def key_for(self, item: ContextItem) -> tuple[str, str, str, bytes, str]:
        """What ``item``'s rendered candidate depends on (``render_candidate``).

        Only a labelled system part, or any item of the text rendering, reads the labels'
        language: a conversation's messages render alike whatever language the input is in,
        so a user who switches language does not have the history rendered and counted again.
        """
        if self.target == "text" or (item.message.role == "system" and not item.untrusted
                                     and item.key != "system.prompt"
                                     and "schema" not in item.metadata):
            return self.key
        return self.neutral_key


def render_candidate(item: ContextItem, costing: Costing, limit: int) -> Candidate:
    """Fence, label and count one item; counting stops early above ``limit``."""
    message = item.message
    tokenizer = costing.tokenizer
    if "schema" in item.metadata:
        return Candidate(item, message, schema_tokens(message.content, tokenizer))
    if item.untrusted:
        message = with_content(message, fence(message.content, item.label or item.namespace,
                                              costing.fence_key))
    elif message.role == "system" and item.key != "system.prompt":
        heading = label(item.label or item.namespace, costing.language)
        message = with_content(message, f"[{heading}]\n{message.content}")
    if costing.target == "text":
        tokens = _text_tokens(item, message, costing, limit)
        return Candidate(item, message, tokens, tokens <= limit)
    content_tokens = tokenizer.count_up_to(message.content, limit)
    complete = content_tokens <= limit
    if message.role == "system":  # joins the system message; the prompt opens it, no join
        join = 0 if item.key == "system.prompt" else SECTION_JOIN_TOKENS
        return Candidate(item, message, content_tokens + join, complete)
    return Candidate(item, message,
                     content_tokens + frame_tokens(message, tokenizer, costing.images), complete)


def _text_tokens(item: ContextItem, message: Message, costing: Costing, limit: int) -> int:
    """Cost of an item in the text rendering.

    Its block and a line break; a system part also pays for a separator of its own (an upper
    bound when parts share a section). A system part shows without the chat rendering's label,
    but fenced when it is untrusted data (as ``message``, the rendered form, is).
    """
    tokenizer, language = costing.tokenizer, costing.language
    if message.role == "system":
        section = separator(item.label or item.namespace, language)
        body = escape_lines(message.content if item.untrusted else item.message.content)
        return tokenizer.count_up_to(body, limit) + tokenizer.count(section) + 2
    return tokenizer.count_up_to(text_block(message, language), limit) + 1


_CandidateKey = tuple[int, tuple[str, str, str, bytes, str]]


def _candidate_bytes(_: _CandidateKey, entry: tuple[ContextItem, Candidate]) -> int:
    """The rendered text and the objects (the item is counted by the cache that made it)."""
    return text_bytes(entry[1].message.content) + 500


_CANDIDATES: BoundedCache[_CandidateKey, tuple[ContextItem, Candidate]] = BoundedCache(
    "core.gather.candidates", max_entries=200_000, share=0.15, size=_candidate_bytes)


def cached_candidate(item: ContextItem, costing: Costing, limit: int) -> Candidate:
    """``render_candidate``, remembered per item object.

    Items are immutable, so a source that re-yields the same item (history does) skips
    re-rendering. Candidates are never mutated.
    """
    key = (id(item), costing.key_for(item))
    cached = _CANDIDATES.get(key) or _CANDIDATES.revive(key)
    if cached is not None and cached[0] is item:
        return cached[1]
    candidate = render_candidate(item, costing, limit)
    if not candidate.complete_count:  # a partial count depends on the limit: never reuse it
        return candidate
    _CANDIDATES.put(key, (item, candidate))
    return candidate


def with_content(message: Message, content: str) -> Message:
    """``message`` with other content (as rendered: fenced or labelled)."""
    return Message(role=message.role, content=content, tool_calls=message.tool_calls,
                   tool_call_id=message.tool_call_id, name=message.name, id=message.id,
                   timestamp=message.timestamp, images=message.images,
                   thinking=message.thinking)


def gather_source(spec: SourceSpec, position: int, source: ContextSource, request: Request,
                  cap: int, costing: Costing, *, reach: int | None = None) -> Gathered:
    """Units of one source in keep order, read until their tokens pass ``cap``.

    ``reach``: for a source offering a request list's messages newest first, a list position
    reading may stop at too (at the round boundary after the unit holding it): a build that
    continues an earlier layout needs its source's messages only back to where that layout's
    shown messages start, not as far back as the budget reaches.
    """
    traits = traits_of(source)
    gathered = Gathered(spec=spec, position=position, traits=traits, read_back_to=reach)
    try:
        items = source.build(request, spec.options)
        omitted_at: list[float] = []
        contiguous = core_options(spec.source, spec.options).contiguous
        passes_over = 0 if (traits.contiguous if contiguous is None else contiguous) else (
            PASS_OVER_LIMIT)
        names_unread = bool(getattr(source, "names_unread", False))
        gathered.units, gathered.complete, gathered.stopped_at_large = _read_units(
            spec.source, source.namespace, items, cap, costing, gathered.omitted, omitted_at,
            reach, _unit_limit(spec, traits, cap), _fenced_roles(traits), passes_over,
            names_unread)
        gathered.layer = min((u.candidates[0].item.layer for u in gathered.units), default=5)
        gathered.read_units = len(gathered.units)
        if traits.offers == "messages":
            # A message the source left out on purpose was read: it is not "unread".
            orders = [c.item.order for u in gathered.units for c in u.candidates] + omitted_at
            gathered.read_positions = frozenset(
                int(order) for order in orders if order >= 0 and order == int(order))
        elif not gathered.complete and names_unread:
            gathered.offered = gathered.read_units  # the rest are named in ``omitted``
        elif not gathered.complete:
            count = getattr(source, "offered_units", None)
            gathered.offered = int(count(request)) if callable(count) else None
    except (InvalidInputError, PlanError):
        raise
    except Exception as exc:  # a source is third-party code: isolate whatever it raises
        if spec.required:
            raise SourceError(f"required source {spec.source!r} failed: {failure(exc)}") from exc
        logger.warning("source %s failed and was left out: %s", spec.source, type(exc).__name__)
        gathered.units, gathered.error = [], failure_note(exc)
    return gathered


class RefusedItemError(SourceError):
    """A source offered an item the build refuses (``check_offered``, a key outside its namespace).

    The message is the library's own: it names the source and the item, never its text.
    """


def failure(exc: BaseException) -> str:
    """What went wrong in a source, as a required source's error says it.

    A refused item's message is the library's own and names the item; anything else a
    source raised is named by its kind only (its text may hold anything: a URL with a token,
    the payload that failed), and the error carries it as its cause.
    """
    if isinstance(exc, RefusedItemError):
        return str(exc)
    return type(exc).__name__


def failure_note(exc: BaseException) -> str:
    """What went wrong in an optional source, as the report's warning says it: kind and text.

    The report is the developer's to read; a refused item is named by the library's message.
    """
    if isinstance(exc, RefusedItemError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"[:200]


PASS_OVER_LIMIT = 16
"""How many units too large for all it may take a source cut item by item is read past.

Such a unit is left out by itself (or cut), and the smaller units after it may still fit, so
reading goes on past it. Each costs its count up to the cap: past this many, reading stops at
the next one, so a source of huge items costs a bounded amount of work."""

UNREAD = "budget: lower-ranked than anything that could fit; not read"
"""Why a unit reading stopped before was left out (a source that names what it did not read)."""
UNREAD_AFTER_LARGE = (f"budget: reading stopped after {PASS_OVER_LIMIT} items each larger than "
                      "all the source may take (a bound on the work); not read")
"""Why, when reading stopped at too many units too large for all the source may take."""

MIN_CUT_TOKENS = 48
"""A cut item shorter than this says too little to be worth its framing: pruning makes none."""


def _unit_limit(spec: SourceSpec, traits: SourceTraits, cap: int) -> int | None:
    """The most one unit can take of ``cap`` once pruning cuts it to the source's item share.

    A unit larger than that counts as that much while reading: a huge tool result or document
    is cut to its share later, and the units after it must have been read to fill the rest.
    """
    option = core_options(spec.source, spec.options).max_item_share
    share = traits.max_item_share if option is None else option
    if share is None or int(cap * share) < MIN_CUT_TOKENS:
        return None  # pruning cuts nothing that small: a unit counts whole
    return int(cap * share)


def _fenced_roles(traits: SourceTraits) -> frozenset[str]:
    """The roles of the items of a source with ``traits`` that are data, fenced whatever they say.

    A ``fenced`` source's items are data (tickets, pages, records); one reading the request's
    messages (``offers="messages"``) shows the conversation itself, whose user and assistant
    messages are not data, so only its tool results are.
    """
    if not traits.fenced:
        return frozenset()
    return _TOOL_ROLE if traits.offers == "messages" else _EVERY_ROLE


_TOOL_ROLE = frozenset(("tool",))
_EVERY_ROLE = frozenset(("system", "user", "assistant", "tool"))


def as_data(item: ContextItem) -> ContextItem:
    """``item`` marked untrusted: fenced as data in every rendering."""
    return replace(item, untrusted=True)


def check_offered(item: ContextItem, namespace: str) -> None:
    """Refuse an item of source ``namespace`` that no request may carry (``RefusedItemError``).

    Its content must be text that encodes as UTF-8 (the request's own text is checked when it
    is read; a source of the user's own may yield anything), and data (``untrusted``) never
    speaks in the user's voice: a model takes a user message as the user's words. The message
    names the item, never its text.
    """
    content = item.message.content
    if not isinstance(content, str):
        raise RefusedItemError(f"source {namespace!r} offered {item.key!r} with content that "
                               f"is not text ({type(content).__name__})")
    try:
        check_text(content, "its content")
    except InvalidInputError as exc:
        raise RefusedItemError(f"source {namespace!r} offered {item.key!r}: {exc}") from None
    if item.untrusted and item.message.role == "user":
        raise RefusedItemError(
            f"source {namespace!r} offered {item.key!r} as data (untrusted, or from a fenced "
            "source) in the user's role: data is never sent as the user's words; give it the "
            "role 'assistant' or 'system'")


def _read_units(name: str, namespace: str, items: Iterable[ContextItem], cap: int,
                costing: Costing, omitted: list[Decision], omitted_at: list[float],
                reach: int | None = None, unit_limit: int | None = None,
                fenced_roles: frozenset[str] = frozenset(), passes_over: int = 0,
                names_unread: bool = False) -> tuple[list[Unit], bool, bool]:
    """Group consecutive items sharing a group into units, stopping once past ``cap``.

    Returns the units, whether every item was read, and whether reading stopped at a unit
    larger than ``cap`` after passing over ``passes_over`` others.

    Reading stops at the first unit that starts after the tokens read pass ``cap`` (for
    history: the first unit of the next round), so that unit's items are never rendered; or,
    with ``reach``, once a unit holding a list position at or before it was read. A unit
    counts at most ``unit_limit`` tokens towards ``cap`` (``_unit_limit``); without one, the
    first ``passes_over`` units larger than ``cap`` count nothing (a source cut item by item
    leaves such a unit out by itself, and the units after it may fit: ``PASS_OVER_LIMIT``).
    An item with ``metadata["omitted"]`` is the source saying what it left out and why: it
    becomes a ``dropped`` decision in ``omitted`` (its ``order`` in ``omitted_at``), not a unit;
    ``metadata["omitted_count"]`` says how many it stands for (a run never read).
    An item whose role is in ``fenced_roles`` is data (``_fenced_roles``), marked untrusted.
    An item rendered for the first time is checked (``check_offered``); one found in the
    candidate cache was checked when it was rendered.
    With ``names_unread`` (a source whose items cost little to make: the tools source), the
    items after the stop are still taken from the source, never rendered, and each becomes a
    ``dropped`` decision in ``omitted`` naming it (``_name_unread``).
    One loop, no nested generators: this runs for every message a build reads.
    """
    prefix = namespace + "."
    reading = iter(items)  # taken on after the stop with ``names_unread``
    units: list[Unit] = []
    current: list[Candidate] = []
    group: str | None = None
    total = 0
    round_no = 0
    passed = 0
    at_large = False
    # A hit is one dict lookup: most items render alike in every language (``key_for``);
    # those that do not are found by ``cached_candidate``.
    cached, costing_key = _CANDIDATES.get, costing.neutral_key
    for item in reading:
        if not item.key.startswith(prefix):
            raise RefusedItemError(f"source {namespace!r} produced a key outside its namespace: "
                              f"{item.key!r}")
        if "omitted" in item.metadata:
            omitted.append(Decision(source=name, key=item.key, action="dropped",
                                    reason=str(item.metadata["omitted"]),
                                    count=int(item.metadata.get("omitted_count", 1))))
            omitted_at.append(item.order)
            continue
        if fenced_roles and not item.untrusted and item.message.role in fenced_roles:
            item = as_data(item)
        if current and (item.group is None or item.group != group):
            # ``_close_unit``, inlined: this runs for every unit a build reads.
            first = current[0]
            opens_round = first.item.round_start
            tokens = first.tokens if len(current) == 1 else sum(c.tokens for c in current)
            unit = Unit(name, current, None if opens_round is None else round_no, len(units),
                        tokens)
            units.append(unit)
            if unit_limit is not None:
                if tokens > unit_limit:
                    tokens = unit_limit
            elif tokens > cap:
                at_large = passed >= passes_over > 0
                passed += 1
                tokens = tokens if at_large or not passes_over else 0
            total += tokens
            round_no += 1 if opens_round else 0
            current = []
            if ((total > cap or (reach is not None and _reaches(unit, reach)))
                    and (item.round_start is None or round_no != unit.round)):
                if names_unread:
                    _name_unread(name, prefix, item, reading, omitted,
                                 UNREAD_AFTER_LARGE if at_large else UNREAD)
                return units, False, at_large
        hit = cached((id(item), costing_key))  # cached_candidate, inlined for the hot path
        if hit is not None and hit[0] is item:
            current.append(hit[1])
        else:
            check_offered(item, namespace)
            current.append(cached_candidate(item, costing, cap))
        group = item.group
    if current:
        units.append(_close_unit(name, current, round_no, len(units)))
    return units, True, False


def _name_unread(name: str, prefix: str, first: ContextItem, rest: Iterator[ContextItem],
                 omitted: list[Decision], reason: str) -> None:
    """A ``dropped`` decision for ``first`` and each item after it, none of them rendered.

    An item the source itself left out (``metadata["omitted"]``) keeps its own reason (a tool
    over the 128 a request takes); any other gets ``reason``.
    """
    for item in chain((first,), rest):
        if not item.key.startswith(prefix):
            raise RefusedItemError(f"source {prefix[:-1]!r} produced a key outside its "
                                   f"namespace: {item.key!r}")
        why = item.metadata.get("omitted")
        omitted.append(Decision(
            source=name, key=item.key, action="dropped",
            reason=reason if why is None else str(why),
            count=1 if why is None else int(item.metadata.get("omitted_count", 1))))


def _reaches(unit: Unit, position: int) -> bool:
    """Whether ``unit`` holds a message of the list at or before ``position``.

    Items placed out of the list (a session's stored turns, at detached, negative orders) do
    not count: they say nothing of how far back the list was read.
    """
    candidates = unit.candidates
    if len(candidates) == 1:  # most units: no generator
        return 0 <= candidates[0].item.order <= position
    return any(0 <= c.item.order <= position for c in candidates)


def _close_unit(name: str, candidates: list[Candidate], round_no: int, rank: int) -> Unit:
    first = candidates[0]
    opens_round = first.item.round_start
    tokens = first.tokens if len(candidates) == 1 else sum(c.tokens for c in candidates)
    return Unit(source=name, candidates=candidates,
                round=None if opens_round is None else round_no, rank=rank, tokens=tokens)


register_cache("core.gather.candidates", _CANDIDATES)
