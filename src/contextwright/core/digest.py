"""Digests: one compact item standing in for what a source had to leave out.

A plan turns it on per source with the option ``digest_share`` (0 < share < 1). While pruning,
that share of the source's grant is kept free whenever the source cannot keep everything; once
the source's units are chosen, a source that implements ``DigestingSource`` is asked for one
item that stands for the rest (history: the exact values first seen in the omitted turns), in
the room left. If it has nothing to say, the source is pruned again with its whole grant, so the
reserve never costs anything for nothing. The digest is the source's oldest unit: the first to go
if the exact count is over, and it is reported as a decision. It renders before what its source
kept; a digest that is all its source shows after the user's input goes before the input instead
(``core.assemble``), so it never ends the request in the assistant's voice. A digest is
checked like the items its source offers (``gather.check_offered``); one that fails (the source
raises, or offers an item the build refuses) fails a required source, and an optional one goes
on without it, with a warning, as a failing source is isolated (``gather.gather_source``).

A digest is costed several times while its source decides how many values fit, and rebuilt on
every build, so ``DigestCost`` counts a fenced digest line by line where the tokenizer allows it
(every line is then counted once per content, across builds) and hands the last costed item's
candidate back without counting it again.

Pure: the source's ``digest`` sees the request and the kept items; nothing here does I/O.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from itertools import chain
from operator import attrgetter
from typing import Any

from contextwright.core.accounting import frame_tokens
from contextwright.core.caches import BoundedCache, register_cache, text_bytes
from contextwright.core.fence import fence
from contextwright.core.gather import (
    Candidate,
    Costing,
    Gathered,
    RefusedItemError,
    Unit,
    check_offered,
    failure,
    failure_note,
    render_candidate,
    with_content,
)
from contextwright.core.items import ContextItem
from contextwright.core.report import Decision
from contextwright.core.request import Request
from contextwright.core.select import Selection
from contextwright.core.source import ContextSource, DigestingSource, core_options
from contextwright.errors import InvalidInputError, PlanError, SourceError

logger = logging.getLogger("contextwright")

DIGEST_OPTION = "digest_share"
_ITEM, _CANDIDATES = attrgetter("item"), attrgetter("candidates")
MIN_DIGEST_TOKENS = 16
"""Less room than this cannot hold a digest worth its framing."""


def digest_share(options: Mapping[str, Any], source: str = "source") -> float:
    """The plan's ``digest_share`` for a source (0 when off); a bad value is a ``PlanError``."""
    return core_options(source, options).digest_share


def pruning_grant(g: Gathered, grant: int) -> int:
    """The grant to prune ``g`` with: less the digest's share when it cannot keep everything.

    Only a digestible source keeps a share free: a plan may set ``digest_share`` on a source
    that makes no digest, and that share would stay empty.
    """
    share = digest_share(g.spec.options, g.spec.source)
    if share <= 0 or not g.traits.digestible or (g.complete and g.need <= grant):
        return grant
    return grant - int(grant * share)


def digest_reserve(g: Gathered, grant: int) -> int:
    """Tokens of ``grant`` that ``g`` keeps free for its digest while pruning (0: none).

    They are the source's: its digest takes them, or, when it has nothing to say, the source
    is pruned again with them (``add_digest``). Handing them to other sources in between
    would give them away twice.
    """
    return grant - pruning_grant(g, grant)


Prune = Callable[[Gathered, int], Selection]


def add_digest(g: Gathered, source: ContextSource, request: Request, grant: int,
               selections: dict[str, Selection], costing: Costing, prune: Prune,
               brought: int = 0) -> None:
    """Append ``source``'s digest of what ``g`` left out to its selection (see the docstring).

    ``prune`` re-prunes ``g`` with a grant and no reserve. The reserve is a guess: when the
    digest needs less, the source is pruned again with what the digest leaves and the digest
    remade for what is still out (it can only shrink), so the unused reserve is not wasted.
    ``brought``: tokens the digest brings along outside the source (the data note its fence
    needs when nothing else shown is fenced), so its room is that much smaller: else the
    exact count finds the build over and drops the digest, leaving its room unused.
    """
    name = g.spec.source
    if pruning_grant(g, grant) == grant:
        return
    if not (g.traits.digestible and isinstance(source, DigestingSource)):  # no digest, no reserve
        selections[name] = prune(g, grant)
        return
    room = grant - brought
    try:
        chosen = _best_digest(g, source, request, selections[name], room, costing, prune)
    except _DigestFailedError as failed:
        g.digest_error = failed.note
        chosen = None
    if chosen is None:
        selections[name] = prune(g, grant)
        return
    selection, candidate = chosen
    selection.kept.append(Unit(source=name, candidates=[candidate], round=None,
                               rank=len(selection.kept)))
    selection.decisions.append(digest_decision(name, candidate))
    selections[name] = selection


def _best_digest(g: Gathered, source: DigestingSource, request: Request, selection: Selection,
                 room: int, costing: Costing, prune: Prune
                 ) -> tuple[Selection, Candidate] | None:
    """The selection and digest to show in ``room`` (None: the source has nothing to say).

    When the digest leaves room, the source is pruned again with what it leaves and the
    digest remade for what is still out (``add_digest``).
    """
    first = _digest(g, source, request, selection, room, costing)
    if first is None:
        return None
    if room - selection.tokens - first.tokens >= MIN_DIGEST_TOKENS:
        fuller = prune(g, room - first.tokens)
        second = _digest(g, source, request, fuller, room, costing)
        if second is not None:
            return fuller, second
    return selection, first


class _DigestFailedError(Exception):
    """An optional source's digest failed: the build goes on without it (``note`` says why)."""

    def __init__(self, note: str) -> None:
        super().__init__(note)
        self.note = note


def digest_decision(source: str, candidate: Candidate) -> Decision:
    """The report's ``compacted`` decision for a digest shown (made afresh or kept from a cut)."""
    return Decision(
        source=source, key=candidate.item.key, action="compacted",
        reason=str(candidate.item.metadata.get("digest", "digest of what was left out")),
        tokens_after=candidate.tokens)


def _digest(g: Gathered, source: DigestingSource, request: Request, selection: Selection,
            grant: int, costing: Costing) -> Candidate | None:
    """What ``selection`` leaves out, as a rendered digest that fits the rest of ``grant``."""
    room = grant - selection.tokens
    if room < MIN_DIGEST_TOKENS:
        return None
    kept = list(map(_ITEM, chain.from_iterable(map(_CANDIDATES, selection.kept))))
    cost = DigestCost(costing, room + 1)
    try:
        item = source.digest(request, g.spec.options, kept, room, cost)
        if item is None:
            return None
        candidate = cost.render(checked_digest(item, g.spec.source))
    except (InvalidInputError, PlanError):
        raise  # the caller's to fix, as when the source reads them (``gather_source``)
    except Exception as exc:  # a source is third-party code: isolate what its digest raises
        name = g.spec.source
        if g.spec.required:
            raise SourceError(f"required source {name!r} failed making its digest: "
                              f"{failure(exc)}") from exc
        logger.warning("the digest of source %s failed and was left out: %s", name,
                       type(exc).__name__)
        raise _DigestFailedError(failure_note(exc)) from exc
    return candidate if candidate.tokens <= room else None


def checked_digest(item: ContextItem, name: str) -> ContextItem:
    """A digest of source ``name`` as offered items are checked (``RefusedItemError``).

    Its key is in the source's namespace, and it is one the build may send
    (``check_offered``).
    """
    if not item.key.startswith(name + "."):
        raise RefusedItemError(f"source {name!r} produced a digest key outside its namespace: "
                               f"{item.key!r}")
    check_offered(item, name)
    return item


LINE_ADDITIVE_TOKENIZERS = frozenset(("o200k_base", "cl100k_base"))
"""Encodings whose pre-tokenizer always splits after a line break followed by a character that
is neither white space nor ``/``: no token spans that point, so a text's count is the sum of the
counts of its lines cut there (``count_by_lines``)."""
_LINE_STARTS = re.compile(r"\n(?=[^\s/])")
_MAX_ADDITIVE_CHARS = 32_000
"""Longer text goes to ``render_candidate``, which counts it in pieces and may stop early."""


def count_by_lines(count: Callable[[str], int], text: str) -> int:
    """Sum of ``count`` over ``text`` cut after each line break followed by a non-space, non-/.

    Exact for ``LINE_ADDITIVE_TOKENIZERS``; with a content-keyed count cache, a text that differs
    from one counted before by a few lines costs only those lines.
    """
    total, start = 0, 0
    for match in _LINE_STARTS.finditer(text):
        total += count(text[start:match.end()])
        start = match.end()
    return total + count(text[start:])


class DigestCost:
    """The exact cost of a digest item as it would render (a digest's ``cost`` argument).

    Fenced chat items are counted by lines when the tokenizer is line-additive; everything else
    goes through ``render_candidate``. The last item costed is remembered, so the builder's own
    rendering of the chosen digest costs nothing more.
    """

    __slots__ = ("_costing", "_last", "_limit", "remember")

    def __init__(self, costing: Costing, limit: int, *, remember: bool = False) -> None:
        """``limit``: counting may stop above it (as in ``render_candidate``).

        ``remember``: the digest costed with it is likely made again from the same messages
        (a stable-prefix build remakes its last cut's digest), so a digest may remember it.
        """
        self._costing = costing
        self._limit = limit
        self._last: tuple[ContextItem, Candidate] | None = None
        self.remember = remember

    @property
    def memo_key(self) -> tuple[object, ...] | None:
        """What the counts depend on besides the item; None unless asked to ``remember``."""
        return (self._costing.key, self._limit) if self.remember else None

    def __call__(self, item: ContextItem) -> int:
        """Tokens of ``item`` as it would render."""
        return self.render(item).tokens

    def render(self, item: ContextItem) -> Candidate:
        """``render_candidate`` of ``item``, counted by lines where that is exact.

        With ``remember``, remembered per item object: a digest reused from an earlier build
        (the same item) is not rendered and counted again.
        """
        if self._last is not None and self._last[0] is item:
            return self._last[1]
        memo = self.memo_key
        key = None if memo is None else (id(item), memo)
        known = None if key is None else _RENDERED.get(key) or _RENDERED.revive(key)
        if known is not None and known[0] is item:
            candidate = known[1]
        else:
            candidate = (_render_by_lines(item, self._costing)
                         or render_candidate(item, self._costing, self._limit))
            if key is not None and candidate.complete_count:  # a partial count is the limit's
                _RENDERED.put(key, (item, candidate))
        self._last = (item, candidate)
        return candidate


_RENDERED: BoundedCache[tuple[int, tuple[object, ...]], tuple[ContextItem, Candidate]] = (
    BoundedCache("core.digest.rendered", max_entries=4_096, share=0.01,
                 size=lambda _, entry: text_bytes(entry[1].message.content) + 500))
register_cache("core.digest.rendered", _RENDERED)


def _render_by_lines(item: ContextItem, costing: Costing) -> Candidate | None:
    """``render_candidate``'s fenced chat branch, counted by lines (None: not applicable)."""
    tokenizer = costing.tokenizer
    if (not item.untrusted or costing.target != "chat" or "schema" in item.metadata
            or tokenizer.name not in LINE_ADDITIVE_TOKENIZERS
            or len(item.message.content) > _MAX_ADDITIVE_CHARS):
        return None
    shown = with_content(item.message, fence(item.message.content, item.label or item.namespace,
                                             costing.fence_key))
    content_tokens = _fenced_tokens(tokenizer.count, shown.content)
    if content_tokens is None:
        return None
    return Candidate(item, shown,
                     content_tokens + frame_tokens(shown, tokenizer, costing.images))


_OPEN, _CLOSE = "<<data", "<<end"


def _fenced_tokens(count: Callable[[str], int], fenced: str) -> int | None:
    r"""Tokens of ``<<data M label>>\n body \n<<end M>>``, or None if it cannot be split exactly.

    Each fence line is new text on every build (its marker hashes the body), so it is cut
    where the encodings always split — after ``<<data`` / ``<<end`` (letters, then a space),
    after the hex marker (a space or ``>>`` follows) — and the marker, counted once, is the only
    new piece; the body is counted by lines.
    """
    head_end = fenced.find("\n") + 1
    foot_start = fenced.rfind("\n") + 1
    marker_end = fenced.find(" ", len(_OPEN) + 1)
    body = fenced[head_end:foot_start]
    if (not fenced.startswith(_OPEN + " ") or len(fenced) > _MAX_ADDITIVE_CHARS
            or marker_end < 0 or head_end >= foot_start or body[0].isspace() or body[0] == "/"):
        return None
    marker = fenced[len(_OPEN):marker_end]  # with its leading space
    if fenced[foot_start:] != f"{_CLOSE}{marker}>>":
        return None
    return (count(_OPEN) + 2 * count(marker) + count(fenced[marker_end:head_end])
            + count_by_lines(count, body) + count(_CLOSE) + count(">>"))
